"""Benchmark a member's export and erasure (`/parley privacy export | erase`) in a busy server's archive.

Usage: python bench/bench_privacy.py [--backend sqlite|postgres] [--messages N] [--member-messages K]
                                     [--channels C] [--database-url URL]

Fills a throwaway archive with N messages in C channels of one server from 1,000 members, and K more (every tenth
with a text file read into the archive) from the member who asks; then times their export (whole, and capped at
Discord's 10 MB upload limit) and their erasure, and watches the event loop meanwhile: the longest it went without
running a 1 ms timer is how long the bot could not have handled anything else.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from admission.optout import OptOuts
from archive import Archive, ArchivedAttachment, ArchivedMessage
from archive.backends import open_archive
from conversation import ConversationManager
from tests.support.postgres_support import database_url, throwaway_postgres
from upkeep.privacy import DEFAULT_UPLOAD_LIMIT, MemberErasure, export_member
from usage.budget import UsageLedger

GUILD = 900_000_000_000_000_000
FIRST_CHANNEL = 1_100_000_000_000_000_000
FIRST_MEMBER = 2_000_000_000_000_000_000
MEMBERS = 1_000
ASKER = FIRST_MEMBER + MEMBERS
START = datetime(2025, 1, 1, tzinfo=UTC)
FILE_TEXT = "quarterly numbers, the launch plan and a list of names " * 20
T = TypeVar("T")


class _Nothing:
    def forget_messages(self, channel_id: int, message_ids: object) -> None: ...

    def forget_author(self, author_id: int, channel_ids: object) -> None: ...

    def delete_from_ending(self, channel_id: int, message_ids: object) -> None: ...

    async def forget_member(self, guild_id: int, member_id: int) -> int:
        return 0


async def fill(archive: Archive, messages: int, member_messages: int, channels: int) -> None:
    total = messages + member_messages
    asker_every = max(1, total // max(1, member_messages))
    asked = 0
    for number in range(total):
        by_asker = asked < member_messages and number % asker_every == 0
        author = ASKER if by_asker else FIRST_MEMBER + number % MEMBERS
        files: tuple[ArchivedAttachment, ...] = ()
        if by_asker:
            if asked % 10 == 0:
                files = (ArchivedAttachment(10 * number + 1, "notes.txt", "text/plain", len(FILE_TEXT)),)
            asked += 1
        archive.add(
            ArchivedMessage(
                message_id=10 * number + 2,
                guild_id=GUILD,
                channel_id=FIRST_CHANNEL + number % channels,
                author_id=author,
                author_name=f"member {author - FIRST_MEMBER}",
                content=f"message {number}: something said in the channel about the plan",
                created_at=START + timedelta(seconds=number),
                is_bot=False,
                attachments=files,
            )
        )
        for file in files:
            archive.set_attachment_text(file.attachment_id, FILE_TEXT)
        if number % 5_000 == 0:
            await archive.flush()
    await archive.flush()


async def watched(work: Awaitable[T]) -> tuple[T, float, float]:
    """`work`'s result, its wall time, and the longest the event loop went without running a 1 ms timer meanwhile."""
    loop = asyncio.get_running_loop()
    longest = 0.0

    async def tick() -> None:
        nonlocal longest
        while True:
            before = loop.time()
            await asyncio.sleep(0.001)
            longest = max(longest, loop.time() - before - 0.001)

    ticker = asyncio.create_task(tick())
    started = time.perf_counter()
    try:
        result = await work
    finally:
        ticker.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await ticker
    return result, time.perf_counter() - started, longest


@contextlib.asynccontextmanager
async def opened(backend: str, url: str | None) -> AsyncIterator[Archive]:
    if backend == "sqlite":
        with tempfile.TemporaryDirectory() as folder:
            archive = await open_archive(f"sqlite:///{folder}/parley.db", retention_days=0)
            try:
                yield archive
            finally:
                await archive.close()
        return
    with contextlib.ExitStack() as stack:
        if url is None:
            server = stack.enter_context(throwaway_postgres("parley-bench-privacy-"))
            url = database_url(server, "postgres")
        archive = await open_archive(url, retention_days=0)
        try:
            yield archive
        finally:
            await archive.close()


async def main(args: argparse.Namespace) -> None:
    async with opened(args.backend, args.database_url) as archive:
        started = time.perf_counter()
        await fill(archive, args.messages, args.member_messages, args.channels)
        print(
            f"filled {args.messages + args.member_messages:,} messages ({args.member_messages:,} by the member)"
            f" in {time.perf_counter() - started:.1f} s ({args.backend})"
        )
        whole, seconds, stall = await watched(export_member(archive, GUILD, ASKER, limit=2**40))
        print(
            f"export, whole: {whole.messages:,} messages, {len(whole.data) / 2**20:.1f} MB in {seconds:.2f} s;"
            f" longest event-loop stall {stall * 1000:.1f} ms"
        )
        capped, seconds, stall = await watched(export_member(archive, GUILD, ASKER, limit=DEFAULT_UPLOAD_LIMIT))
        print(
            f"export, capped at 10 MB: {capped.messages:,} messages ({capped.cut:,} left out),"
            f" {len(capped.data) / 2**20:.1f} MB in {seconds:.2f} s; longest event-loop stall {stall * 1000:.1f} ms"
        )
        erasure = MemberErasure(
            archive, ConversationManager(), _Nothing(), _Nothing(), UsageLedger(), lambda channel: GUILD, OptOuts(),
            _Nothing(),
        )  # fmt: skip
        erased, seconds, stall = await watched(erasure.erase(GUILD, ASKER))
        print(
            f"erase: {erased.messages:,} messages and {erased.attachments:,} files in {seconds:.2f} s;"
            f" longest event-loop stall {stall * 1000:.1f} ms"
        )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--messages", type=int, default=300_000, help="other members' messages")
    parser.add_argument("--member-messages", type=int, default=30_000, help="the asking member's messages")
    parser.add_argument("--channels", type=int, default=50)
    parser.add_argument("--database-url", help="an empty Postgres database to use instead of a throwaway server")
    return parser.parse_args(argv)


if __name__ == "__main__":
    asyncio.run(main(parse_args()))
