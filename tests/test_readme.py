"""Tests that the README stays true to the code: every setting documented, two commands."""

from __future__ import annotations

import re
from pathlib import Path

from config import Settings

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def test_every_setting_is_documented_with_its_default() -> None:
    """The settings table names every variable, with the default the code actually uses."""
    for name, field in Settings.model_fields.items():
        row = re.search(rf"^\| `{name.upper()}` \| (.+?) \|", README, re.MULTILINE)
        assert row, f"{name.upper()} missing from the README's settings table"
        if not field.is_required() and field.default is not None and name != "judge_model":
            assert row.group(1) == documented_default(field.default), name


def documented_default(value: object) -> str:
    """How the settings table writes a default: `true`, `120`, or none for an empty list."""
    if isinstance(value, frozenset) and not value:
        return "none"
    return f"`{str(value).lower() if isinstance(value, bool) else value}`"


def test_readme_gives_the_install_and_test_commands() -> None:
    """The README's quick start installs the pinned requirements, and gives the test command CI uses."""
    assert "pip install -r requirements.txt" in README and "python bot.py --check" in README
    assert 'pip install -e ".[dev]" && pytest' in README
    ci = (Path(__file__).resolve().parents[1] / ".ci" / "run").read_text()
    assert 'pip install --quiet -e ".[dev]"' in ci and ci.rstrip().endswith("pytest")


def test_readme_and_pre_commit_name_the_checks_ci_runs() -> None:
    """Every check .ci/run makes before the tests is in the README's Development section and the pre-commit config."""
    root = Path(__file__).resolve().parents[1]
    ci = (root / ".ci" / "run").read_text()
    checks = re.findall(r"^((?:ruff|mypy)\b.*)$", ci, re.MULTILINE)
    assert checks == ["ruff check .", "ruff format --check .", "mypy"]
    development = README.split("## Development", 1)[1]
    pre_commit = (root / ".pre-commit-config.yaml").read_text()
    for check in checks:
        assert check in development, check
        assert f"entry: {check.removesuffix(' .')}" in pre_commit, check
