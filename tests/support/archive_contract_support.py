"""Shared values and helpers of the archive contract tests (test_archive_contract*.py)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg

from archive.sqlite import ArchivedMessage

NOW = datetime(2025, 1, 15, 12, 0, tzinfo=UTC)
GUILD = 10
CHANNEL = 1
OTHER_CHANNEL = 2


def msg(
    message_id: int,
    content: str,
    *,
    channel: int = CHANNEL,
    guild: int = GUILD,
    author: str = "alice",
    author_id: int = 100,
    minutes_ago: float = 0,
    **fields: object,
) -> ArchivedMessage:
    return ArchivedMessage(
        message_id=message_id,
        guild_id=guild,
        channel_id=channel,
        author_id=author_id,
        author_name=author,
        content=content,
        created_at=NOW - timedelta(minutes=minutes_ago),
        is_bot=False,
        **fields,  # type: ignore[arg-type]
    )


def ids(messages: list[ArchivedMessage]) -> list[int]:
    return [m.message_id for m in messages]


@contextmanager
def raw_db(path: Path) -> Iterator[sqlite3.Connection]:
    """A plain connection to the archive file, committed and closed on exit."""
    db = sqlite3.connect(path)
    try:
        with db:
            yield db
    finally:
        db.close()


def fts_rowids(path: Path, word: str) -> list[int]:
    """Rowids the full-text index itself still holds for a word."""
    with raw_db(path) as db:
        rows = db.execute("SELECT rowid FROM messages_fts WHERE messages_fts MATCH ?", (f'"{word}"',))
        return [rowid for (rowid,) in rows]


def fts_integrity_check(path: Path) -> None:
    """Raises if the FTS index and the messages table disagree."""
    with raw_db(path) as db:
        db.execute("INSERT INTO messages_fts (messages_fts, rank) VALUES ('integrity-check', 1)")


REFUSE_MODES = (
    "CREATE TRIGGER refuse_modes BEFORE {} ON profile_settings BEGIN SELECT RAISE(ABORT, 'disk says no'); END"
)
REFUSE_MODES_POSTGRES = """
CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'disk says no'; END $$;
CREATE TRIGGER refuse_modes BEFORE {} ON profile_settings FOR EACH ROW EXECUTE FUNCTION refuse();
"""


async def refuse_mode_writes(archive_url: str, db_path: Path, event: str) -> None:
    """Make the archive's database itself refuse `event` (INSERT or UPDATE) on the profile values (modes among them)."""
    if archive_url.startswith("sqlite"):
        with raw_db(db_path) as db:
            db.execute(REFUSE_MODES.format(event))
        return
    connection = await asyncpg.connect(archive_url)
    try:
        await connection.execute(REFUSE_MODES_POSTGRES.format(event))
    finally:
        await connection.close()
