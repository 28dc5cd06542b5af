"""Each public class name of Parley's means one thing: no two of its modules define a class of the same name, so
neither a reader nor an import takes one for the other."""

from __future__ import annotations

import ast
import tomllib
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_no_public_class_name_is_defined_in_two_modules() -> None:
    assert defined_twice(ROOT) == {}


def test_a_name_defined_in_two_modules_is_found(tmp_path: Path) -> None:
    """A module's and a package module's class of one name; a private one, or one inside a function, is no one's."""
    (tmp_path / "pyproject.toml").write_text('[tool.importlinter]\nroot_packages = ["limits", "admission"]\n')
    (tmp_path / "limits.py").write_text("class Place:\n    pass\n\n\nclass _Line:\n    pass\n")
    (tmp_path / "admission").mkdir()
    (tmp_path / "admission" / "__init__.py").write_text("")
    (tmp_path / "admission" / "access.py").write_text("class Place:\n    pass\n\n\nclass _Line:\n    pass\n")
    (tmp_path / "admission" / "local.py").write_text("def f() -> None:\n    class Place:\n        pass\n")
    assert defined_twice(tmp_path) == {"Place": ["admission/access.py", "limits.py"]}


def defined_twice(root: Path) -> dict[str, list[str]]:
    """Each public class name defined at the top of more than one of `root`'s modules, with their paths."""
    defined: defaultdict[str, list[str]] = defaultdict(list)
    for path in sources(root):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                defined[node.name].append(path.relative_to(root).as_posix())
    return {name: sorted(paths) for name, paths in defined.items() if len(paths) > 1}


def sources(root: Path) -> list[Path]:
    """The files of `root`'s modules and packages (pyproject.toml's [tool.importlinter] root_packages)."""
    names = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["importlinter"]["root_packages"]
    return [
        path
        for name in names
        for path in (sorted((root / name).rglob("*.py")) if (root / name).is_dir() else [root / f"{name}.py"])
    ]
