"""Check that requirements.txt, what a deploy installs, is in step with pyproject.toml.

Offline by default: the file exists, and every runtime dependency pyproject.toml names is pinned in
it at a version pyproject.toml allows. With --recompile it also re-runs .ci/compile-requirements
into a copy (which needs the package index) and fails unless the copy is byte for byte the file.

    python .ci/check_requirements.py [--recompile] [PROJECT_FOLDER]

Exit 0 when in step; 1 with one line per problem and what to do otherwise.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

FIX = "run .ci/compile-requirements and commit requirements.txt"
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;]+)")


def pinned_versions(requirements: str) -> dict[str, Version]:
    """The `name==version` pins of a compiled requirements file, by normalized name."""
    pins: dict[str, Version] = {}
    for line in requirements.splitlines():
        match = _PIN.match(line)
        if match:
            pins[canonicalize_name(match.group(1))] = Version(match.group(2))
    return pins


def runtime_dependencies(pyproject: Path) -> list[Requirement]:
    with pyproject.open("rb") as file:
        return [Requirement(text) for text in tomllib.load(file)["project"]["dependencies"]]


def problems(project: Path) -> list[str]:
    """What is out of step between the project's pyproject.toml and requirements.txt, one line each."""
    requirements = project / "requirements.txt"
    if not requirements.is_file():
        return [f"requirements.txt is missing, so a deploy would install nothing: {FIX}"]
    pins = pinned_versions(requirements.read_text())
    found = []
    for dependency in runtime_dependencies(project / "pyproject.toml"):
        pinned = pins.get(canonicalize_name(dependency.name))
        if pinned is None:
            found.append(f"{dependency.name} is in pyproject.toml but not pinned in requirements.txt: {FIX}")
        elif not dependency.specifier.contains(pinned, prereleases=True):
            found.append(f"requirements.txt pins {dependency.name}=={pinned}, outside {dependency}: {FIX}")
    return found


def recompile_differences(project: Path) -> list[str]:
    """The unified diff between requirements.txt and a fresh compile that starts from its pins."""
    committed = (project / "requirements.txt").read_text()
    with tempfile.TemporaryDirectory() as folder:
        copy = Path(folder) / "requirements.txt"
        # The copy carries the current pins, so the compile prefers them exactly as it does in place.
        shutil.copyfile(project / "requirements.txt", copy)
        environment = {**os.environ, "REQUIREMENTS_OUTPUT": str(copy)}
        subprocess.run([str(project / ".ci" / "compile-requirements")], check=True, env=environment)
        fresh = copy.read_text()
    return list(difflib.unified_diff(committed.splitlines(), fresh.splitlines(), "requirements.txt", "recompiled"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("project", nargs="?", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--recompile", action="store_true", help="also compile afresh and compare (needs the index)")
    args = parser.parse_args(argv)
    found = problems(args.project)
    if not found and args.recompile:
        diff = recompile_differences(args.project)
        if diff:
            found = [*diff, f"requirements.txt differs from a fresh compile of pyproject.toml: {FIX}"]
    for line in found:
        print(line, file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
