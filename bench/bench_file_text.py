"""Benchmark what the file text budgets cost the archive's writer: time to store a file's text, with and without.

Usage: python bench/bench_file_text.py [--backend sqlite|postgres] [--files N] [--text-bytes B] [--database-url URL]

Each backend's writer measures, per file, the bytes of file text its channel and its sender already have kept
that UTC day (archive/file_text.py). That costs most when the day's budgets are nearly used up, so the archive
is filled with one day of files up to just under the default budgets (4,000,000 bytes in the channel, 1,000,000
per member) and a busy rest of the archive (other days, other channels); then `--files` more files are stored
one flush each, once with the default budgets and once in an archive opened without budgets, and the median
time to store one is printed for both.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import discord

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from archive import Archive, ArchivedAttachment, ArchivedMessage
from archive.backends import open_archive
from archive.file_text import FileTextBudget
from config import Settings
from tests.support.postgres_support import database_url, throwaway_postgres

DAY = datetime(2025, 1, 15, tzinfo=UTC)
CHANNEL = 1
# Members whose files fill the channel's day: each just under their own budget.
FILLERS = 4
OTHER_DAYS = 30
OTHER_CHANNELS = 20


def default_budget() -> FileTextBudget:
    fields = Settings.model_fields
    channel, member = (
        fields["archive_file_text_channel_bytes"].default,
        fields["archive_file_text_member_bytes"].default,
    )
    return FileTextBudget(channel_bytes=int(channel), member_bytes=int(member))


class Files:
    """Messages with one text file each, numbered so their snowflakes fall on the day asked for."""

    def __init__(self) -> None:
        self.count = 0

    def share(self, archive: Archive, when: datetime, channel: int, member: int, text: str) -> None:
        self.count += 1
        snowflake = discord.utils.time_snowflake(when) + self.count
        attachment = ArchivedAttachment(snowflake, f"f{self.count}.log", "text/plain", len(text))
        message = ArchivedMessage(
            snowflake, 5, channel, member, f"m{member}", "a log", when, False, attachments=(attachment,)
        )
        archive.add(message)
        archive.set_attachment_text(snowflake, text)


async def fill(archive: Archive, files: Files, budget: FileTextBudget, text_bytes: int) -> None:
    """A busy archive: the channel's day used up to just under the budgets, and other days and channels."""
    text = ("lorem ipsum dolor sit amet " * (text_bytes // 27 + 1))[:text_bytes]
    per_member = (budget.member_bytes - text_bytes) // text_bytes
    for member in range(FILLERS):
        for number in range(per_member):
            files.share(archive, DAY + timedelta(minutes=number), CHANNEL, 100 + member, text)
    for day in range(1, OTHER_DAYS + 1):
        for channel in range(2, 2 + OTHER_CHANNELS):
            files.share(archive, DAY - timedelta(days=day), channel, 200 + channel, text)
    await archive.flush()


async def time_stores(archive: Archive, files: Files, count: int, text_bytes: int) -> list[float]:
    """Seconds to store each of `count` more small files' text in the channel's day, one flush each."""
    text = "x" * text_bytes
    took = []
    for number in range(count):
        started = time.perf_counter()
        files.share(archive, DAY + timedelta(hours=12, seconds=number), CHANNEL, 900 + number % 50, text)
        await archive.flush()
        took.append(time.perf_counter() - started)
    return took


async def measure(url: str, budget: FileTextBudget | None, args: argparse.Namespace) -> float:
    archive = await open_archive(url, retention_days=0, file_text_budget=budget)
    try:
        files = Files()
        await fill(archive, files, default_budget(), args.text_bytes)
        took = await time_stores(archive, files, args.files, 64)
    finally:
        await archive.close()
    return statistics.median(took) * 1000


async def run(args: argparse.Namespace) -> None:
    with contextlib.ExitStack() as stack:
        urls = []
        for name in ("budgeted", "unbudgeted"):
            if args.backend == "sqlite":
                folder = Path(stack.enter_context(tempfile.TemporaryDirectory()))
                urls.append(f"sqlite:///{folder / name}.db")
            else:
                server = args.database_url or stack.enter_context(throwaway_postgres("bench-file-text-"))
                urls.append(await create_database(server, name))
        with_budget = await measure(urls[0], default_budget(), args)
        without = await measure(urls[1], None, args)
    print(f"backend {args.backend}: median time to store one file's text, {args.files} files, one flush each")
    print(f"  with the default budgets, the day nearly used up: {with_budget:.2f} ms")
    print(f"  without budgets:                                  {without:.2f} ms")


async def create_database(server_url: str, name: str) -> str:
    import asyncpg

    database = f"bench_file_text_{name}_{int(time.time())}"
    connection = await asyncpg.connect(server_url)
    try:
        await connection.execute(f'CREATE DATABASE "{database}"')
    finally:
        await connection.close()
    return database_url(server_url, database)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--files", type=int, default=200, help="files stored and timed")
    parser.add_argument("--text-bytes", type=int, default=100_000, help="bytes of each filler file's text")
    parser.add_argument("--database-url", help="a Postgres server to create the databases on (default: a throwaway)")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
