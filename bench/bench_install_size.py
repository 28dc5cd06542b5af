"""Benchmark what a deploy installs: requirements.txt in a fresh virtual environment, its size on disk and install time.

Usage: python bench/bench_install_size.py [--against REV]

Does what Railway's builder does (`.ci/railpack-replay`): a new venv, `pip install -r requirements.txt` with
only that file at hand, and reports the distributions installed, the venv's size on disk (site-packages
without pip) and the install's wall time. With
`--against REV`, the requirements.txt of an earlier commit first, in the same minutes, for a before/after.
The install needs the package index (pip's cache makes a second run faster: the time is the least telling
figure; the sizes are exact).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MIB = 1024 * 1024


def folder_bytes(folder: Path) -> int:
    """The bytes of the files under `folder` (symbolic links not followed: the venv links the interpreter)."""
    total = 0
    for path, _folders, files in os.walk(folder):
        for name in files:
            file = Path(path, name)
            if not file.is_symlink():
                total += file.stat().st_size
    return total


def measure(requirements: str, label: str) -> str:
    """Install `requirements` (the file's text) into a fresh venv; one line of figures."""
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        (work / "install").mkdir()
        (work / "install" / "requirements.txt").write_text(requirements)
        subprocess.run([sys.executable, "-m", "venv", str(work / "venv")], check=True)
        started = time.perf_counter()
        subprocess.run(
            [str(work / "venv/bin/pip"), "install", "--quiet", "--disable-pip-version-check", "-r", "requirements.txt"],
            cwd=work / "install",
            check=True,
        )
        seconds = time.perf_counter() - started
        (site_packages,) = (work / "venv/lib").glob("python*/site-packages")
        subprocess.run([str(work / "venv/bin/pip"), "uninstall", "--quiet", "--yes", "pip"], check=True)
        distributions = len(list(site_packages.glob("*.dist-info")))
        return (
            f"{label}: {distributions} distributions, site-packages {folder_bytes(site_packages) / MIB:.0f} MiB,"
            f" install {seconds:.0f} s"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", metavar="REV", help="also measure the requirements.txt of this earlier commit")
    args = parser.parse_args()
    if args.against:
        earlier = subprocess.run(
            ["git", "show", f"{args.against}:requirements.txt"], cwd=ROOT, check=True, capture_output=True, text=True
        ).stdout
        print(measure(earlier, f"requirements.txt at {args.against}"), flush=True)
    print(measure((ROOT / "requirements.txt").read_text(), "requirements.txt"))


if __name__ == "__main__":
    main()
