"""Tests that a deploy installs what the tests run: requirements.txt in step with pyproject.toml, Railway's files."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

# Runs .ci/check_requirements.py, which compiles requirements, in a process of its own (see tests/conftest.py).
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
CHECK = ROOT / ".ci" / "check_requirements.py"


def check(project: Path) -> subprocess.CompletedProcess[str]:
    """The offline requirements check, run on `project` as CI runs it."""
    return subprocess.run([sys.executable, str(CHECK), str(project)], capture_output=True, text=True, timeout=60)


def project_copy(tmp_path: Path) -> Path:
    for name in ("pyproject.toml", "requirements.txt"):
        shutil.copy(ROOT / name, tmp_path / name)
    return tmp_path


def test_committed_requirements_are_in_step() -> None:
    """The repository's requirements.txt pins every runtime dependency at a version pyproject.toml allows."""
    result = check(ROOT)
    assert (result.returncode, result.stderr) == (0, "")


def test_missing_requirements_file_fails_the_check(tmp_path: Path) -> None:
    """Without requirements.txt a deploy would install nothing: the check fails and says how to fix it."""
    project = project_copy(tmp_path)
    (project / "requirements.txt").unlink()
    result = check(project)
    assert result.returncode == 1
    assert result.stderr.strip() == (
        "requirements.txt is missing, so a deploy would install nothing:"
        " run .ci/compile-requirements and commit requirements.txt"
    )


def test_dependency_added_only_to_pyproject_fails_the_check(tmp_path: Path) -> None:
    """A dependency in pyproject.toml that requirements.txt does not pin fails the check, by name."""
    project = project_copy(tmp_path)
    pyproject = project / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('"aiosqlite>=', '"humanize>=4",\n    "aiosqlite>=', 1))
    result = check(project)
    assert result.returncode == 1
    assert result.stderr.startswith("humanize is in pyproject.toml but not pinned in requirements.txt")


def test_pin_outside_pyprojects_range_fails_the_check(tmp_path: Path) -> None:
    """Raising a lower bound in pyproject.toml without recompiling fails the check."""
    project = project_copy(tmp_path)
    pyproject = project / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('"aiosqlite>=0.21,<1"', '"aiosqlite>=0.99,<1"'))
    result = check(project)
    assert result.returncode == 1
    assert "requirements.txt pins aiosqlite==" in result.stderr and "outside aiosqlite<1,>=0.99" in result.stderr


def test_requirements_hold_no_index_address() -> None:
    """requirements.txt names no package index, so a deploy uses the builder's own."""
    text = (ROOT / "requirements.txt").read_text()
    assert "--index-url" not in text and "--extra-index-url" not in text and "--find-links" not in text


def test_deploy_runs_the_python_the_tests_run() -> None:
    """Railpack reads .python-version; it names the Python this suite runs on."""
    assert (ROOT / ".python-version").read_text().strip() == f"{sys.version_info.major}.{sys.version_info.minor}"


def test_railway_starts_the_bot_from_requirements() -> None:
    """railway.toml builds with Railpack, starts `python bot.py`, and its comment says where the install comes from."""
    text = (ROOT / "railway.toml").read_text()
    config = tomllib.loads(text)
    assert config["build"]["builder"] == "RAILPACK"
    assert config["deploy"]["startCommand"] == "python bot.py"
    assert "pip install -r requirements.txt" in text and "/app/data" in text


def test_ci_checks_requirements_and_replays_the_deploy_before_the_tests() -> None:
    """.ci/run recompiles requirements.txt and replays Railpack's install before it runs pytest."""
    ci = (ROOT / ".ci" / "run").read_text()
    steps = [ci.index("python .ci/check_requirements.py --recompile"), ci.index(".ci/railpack-replay")]
    assert steps == sorted(steps) and steps[-1] < ci.rindex("pytest")
