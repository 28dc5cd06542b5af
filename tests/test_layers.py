"""The import contracts (pyproject.toml's [tool.importlinter], checked by .ci/lint-imports) cover every module,
and a circle through them fails the check."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]


def lint_config() -> dict[str, Any]:
    config: dict[str, Any] = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    return config


def parley_modules(root: Path) -> set[str]:
    """The project's root modules and packages (bench/ is no package; tests/ is one, but not Parley's)."""
    modules = {path.stem for path in root.glob("*.py")}
    return modules | {path.parent.name for path in root.glob("*/__init__.py")} - {"tests"}


def test_every_module_is_a_root_of_the_contracts() -> None:
    """A new module must be named in root_packages, or no contract would see its imports."""
    assert set(lint_config()["root_packages"]) == parley_modules(ROOT)


def test_every_module_has_its_layer() -> None:
    """Each module is placed in the layers, so an import up (or a circle) through it is found.

    A package whose modules sit at different heights (ops/: the command line at the top, the masking of secrets at
    the bottom) is placed module by module instead, each of its modules then in a layer of its own choosing.
    """
    [layers] = [contract for contract in lint_config()["contracts"] if contract["type"] == "layers"]
    placed = [name.strip() for layer in layers["layers"] for name in layer.split("|")]
    split = {name.partition(".")[0] for name in placed if "." in name}
    for package in split:
        modules = {f"{package}.{path.stem}" for path in (ROOT / package).glob("*.py") if path.stem != "__init__"}
        assert sorted(name for name in placed if name.startswith(f"{package}.")) == sorted(modules)
    assert sorted(name for name in placed if "." not in name) == sorted(set(lint_config()["root_packages"]) - split)


@pytest.mark.slow
def test_a_circle_breaks_the_contracts(tmp_path: Path) -> None:
    """The value types importing the engine back (the circle records.py broke) fails .ci/lint-imports, naming it."""
    copy = tmp_path / "parley"
    shutil.copytree(
        ROOT,
        copy,
        ignore=shutil.ignore_patterns(".git", ".venv", "tests", "bench", "__pycache__", "*.db", "data"),
    )
    records = copy / "records.py"
    records.write_text(records.read_text() + "\nfrom conversation import ChannelConversation  # noqa: E402, F401\n")
    checked = subprocess.run(
        [str(copy / ".ci" / "lint-imports")],
        capture_output=True,
        text=True,
        timeout=300,
        env={"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"},
    )
    assert checked.returncode != 0
    assert "records is not allowed to import conversation" in checked.stdout
