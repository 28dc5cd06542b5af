"""Getting started's local run, run literally in a fresh folder, reaches `python bot.py --check` passing."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

# Runs Getting started's local run in shells of its own (see tests/conftest.py).
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
GETTING_STARTED = (ROOT / "docs" / "getting-started.md").read_text()
# Steps that need the network, replaced here by this suite's checkout and interpreter; .ci/railpack-replay
# runs the same install (a fresh venv, `pip install -r requirements.txt`) for real in CI.
NEEDS_NETWORK = ("git clone ", "python3 -m venv ", "pip install ")
# What the quick start tells the reader to fill in by hand.
FILLED_IN = {"DISCORD_TOKEN": "quick-start-token", "OPENAI_API_KEY": "sk-quick-start"}


def quick_start_commands() -> list[str]:
    """The shell commands of Getting started's local run (its sh blocks before the first subsection), in order."""
    section = GETTING_STARTED.split("\n## Run it on your computer\n", 1)[1].split("\n## ", 1)[0].split("\n### ", 1)[0]
    blocks = re.findall(r"^[ \t]*```sh\n(.*?)^[ \t]*```", section, re.MULTILINE | re.DOTALL)
    assert blocks, "the quick start has no sh block"
    lines = (line.split("  #", 1)[0].strip() for block in blocks for line in block.splitlines())
    return [line for line in lines if line]


def checkout_copy(destination: Path) -> Path:
    """This repository's files as a fresh clone has them (no venv, no .env, no data)."""
    ignored = shutil.ignore_patterns(".git", ".venv", ".env", "data", "__pycache__", "*.egg-info", ".*_cache")
    shutil.copytree(ROOT, destination, ignore=ignored)
    return destination


def test_quick_start_reaches_a_passing_check(tmp_path: Path) -> None:
    """Each offline quick-start command runs as written, in order; with the two values filled in, `--check` exits 0."""
    commands = quick_start_commands()
    assert commands[-2:] == ["python bot.py --check", "python bot.py"]
    folder = checkout_copy(tmp_path / "parley")
    # `python` is this suite's interpreter, which has requirements.txt installed: its folder comes first,
    # as an activated virtual environment's does.
    environment = {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", "HOME": str(tmp_path)}
    skipped = []
    for command in commands[:-1]:
        if command.startswith(NEEDS_NETWORK):
            skipped.append(command.split()[0:2])
            continue
        if command == "python bot.py --check":
            env_file = folder / ".env"
            env_file.write_text(fill_in(env_file.read_text()))
        result = subprocess.run(
            ["bash", "-c", command], cwd=folder, env=environment, capture_output=True, text=True, timeout=120
        )
        assert result.returncode == 0, f"{command}: {result.stderr}"
    assert skipped == [["git", "clone"], ["python3", "-m"], ["pip", "install"]]
    assert result.stdout.splitlines()[-1].startswith("OK, no warnings; next: `python bot.py`")


def fill_in(env_text: str) -> str:
    """.env with DISCORD_TOKEN and OPENAI_API_KEY filled in, as the quick start asks the reader to do."""
    for name, value in FILLED_IN.items():
        env_text, count = re.subn(rf"^{name}=$", f"{name}={value}", env_text, flags=re.MULTILINE)
        assert count == 1, f".env.example has no empty {name}= line to fill in"
    return env_text
