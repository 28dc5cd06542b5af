"""The archive's backends share their query code: a method written once per backend is a dialect's own (its
connection, its statements), not a second copy of something both do (issue 42)."""

from __future__ import annotations

import ast
from pathlib import Path

ARCHIVE = Path(__file__).resolve().parents[2] / "archive"
# At most this many method names defined in both backends' modules (__init__, open, read and a few dialect hooks).
MOST_WRITTEN_TWICE = 5


def test_few_methods_are_written_once_per_backend() -> None:
    twice = methods(ARCHIVE / "sqlite.py") & methods(ARCHIVE / "postgres.py")
    assert len(twice) <= MOST_WRITTEN_TWICE, sorted(twice)


def test_a_method_written_in_both_modules_is_found(tmp_path: Path) -> None:
    """Methods of every class in a module count, helper classes' too; module functions do not."""
    sqlite = tmp_path / "sqlite.py"
    sqlite.write_text("class A:\n    def read(self): ...\n    async def new_id(self): ...\n\n\ndef helper(): ...\n")
    postgres = tmp_path / "postgres.py"
    postgres.write_text(
        "class B:\n    def read(self): ...\n\n\nclass _C:\n    async def new_id(self): ...\n\n\ndef helper(): ...\n"
    )
    assert methods(sqlite) & methods(postgres) == {"read", "new_id"}


def methods(path: Path) -> set[str]:
    """The names of the methods defined in `path`'s classes."""
    tree = ast.parse(path.read_text())
    return {
        member.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef)
        for member in node.body
        if isinstance(member, ast.FunctionDef | ast.AsyncFunctionDef)
    }
