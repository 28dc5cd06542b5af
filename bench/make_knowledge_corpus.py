"""Extract the knowledge bench's corpus (bench/data/tldr-pages.jsonl.gz) from a clone of tldr-pages.

Usage: python bench/make_knowledge_corpus.py REPOSITORY [--commit SHA] [--sections N] [--out PATH]

Reads the English pages (pages/common, linux, osx, windows) of tldr-pages (https://github.com/tldr-pages/tldr,
CC BY 4.0) at one commit straight from git, orders them by the SHA-256 of their path (so that any prefix of
the file is a sample across platforms and the alphabet rather than the commands starting with "a"), and
writes one JSON line per page ({"page": "common/tar", "markdown": ...}) until the pages, split as Parley
splits a Markdown document, make N sections: the bench needs no more. The output is gzip without a
timestamp, so the same commit and N give the same bytes.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_knowledge import CORPUS, page_sections

COMMIT = "08e345f42639f67d99282813247ac670dc6e87cb"
PLATFORMS = ("pages/common", "pages/linux", "pages/osx", "pages/windows")
# The bench loads 10,000 sections; the margin lets it show a larger size without a new extraction.
DEFAULT_SECTIONS = 12_000


def english_pages(repository: Path, commit: str) -> list[str]:
    """The English pages' paths at `commit`, in the corpus's order."""
    listing = subprocess.run(
        ["git", "-C", str(repository), "ls-tree", "-r", "--name-only", commit, *PLATFORMS],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    paths = [path for path in listing if path.endswith(".md")]
    return sorted(paths, key=lambda path: hashlib.sha256(path.encode()).hexdigest())


def page_texts(repository: Path, commit: str, paths: list[str]) -> Iterator[tuple[str, str]]:
    """(page, Markdown) for each path, read through one `git cat-file --batch` rather than a process a page."""
    with subprocess.Popen(
        ["git", "-C", str(repository), "cat-file", "--batch"], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    ) as git:
        assert git.stdin is not None and git.stdout is not None
        try:
            for path in paths:
                git.stdin.write(f"{commit}:{path}\n".encode())
                git.stdin.flush()
                size = int(git.stdout.readline().split()[2])
                text = git.stdout.read(size).decode()
                git.stdout.read(1)  # the newline after each object
                yield path.removeprefix("pages/").removesuffix(".md"), text
        finally:
            git.stdin.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("repository", type=Path, help="a clone (or bare mirror) of tldr-pages")
    parser.add_argument("--commit", default=COMMIT)
    parser.add_argument("--sections", type=int, default=DEFAULT_SECTIONS)
    parser.add_argument("--out", type=Path, default=CORPUS)
    args = parser.parse_args()
    pages = sections = 0
    with args.out.open("wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as out:
        for page, markdown in page_texts(args.repository, args.commit, english_pages(args.repository, args.commit)):
            if sections >= args.sections:
                break
            out.write(json.dumps({"page": page, "markdown": markdown}, ensure_ascii=False).encode() + b"\n")
            pages += 1
            sections += len(page_sections(page, markdown))
    print(f"{pages:,} pages, {sections:,} sections, {args.out.stat().st_size:,} bytes: {args.out}")


if __name__ == "__main__":
    main()
