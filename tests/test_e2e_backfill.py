"""End-to-end: catch-up after downtime, and Discord failures around an answer, with the real client and the fakes."""

from __future__ import annotations

import asyncio
import contextlib
from datetime import UTC, datetime, timedelta
from pathlib import Path

from e2e_support import RunningBot, eventually, request_texts, say
from fake_discord import ALICE_ID, BOB_ID, BOT_ID, CAROL_ID, CHANNEL_ID, OTHER_CHANNEL_ID, FakeDiscord
from fake_llm import FakeLLM

from bot import Parley

ROOT = Path(__file__).resolve().parents[1]
CATCH_UP_BOUND = 5.0  # seconds after READY within which catch-up must be done: a bound for polling only


async def archived(client: Parley, channel_id: int = CHANNEL_ID) -> dict[int, str]:
    """The channel's archived messages, id to text, once everything queued is committed."""
    assert client.archive is not None
    await client.archive.flush()
    rows = await client.archive.recent(channel_id, limit=100_000)
    return {row.message_id: row.content for row in rows}


async def archive_holds(client: Parley, expected: dict[int, str], channel_id: int = CHANNEL_ID) -> None:
    """Wait (bounded) until the channel's archive is exactly `expected`."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(CATCH_UP_BOUND):
            while await archived(client, channel_id) != expected:  # noqa: ASYNC110 - the archive has no event
                await asyncio.sleep(0.05)
    now = await archived(client, channel_id)
    assert (sorted(now.keys() - expected.keys()), sorted(expected.keys() - now.keys())) == ([], [])
    assert now == expected


async def caught_up(client: Parley) -> None:
    """Wait (bounded) until this session's catch-up has covered #general and finished."""
    await eventually(lambda: CHANNEL_ID in client.covered_since and not client.catching_up, CATCH_UP_BOUND)


def stored(fake: FakeDiscord, channel_id: int = CHANNEL_ID) -> dict[int, str]:
    return {int(message["id"]): message["content"] for message in fake.messages(channel_id)}


async def test_catch_up_archives_missed_messages_edits_and_deletions(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """Messages posted, edited and deleted while the bot was down reach the archive as Discord now has them."""
    client = await bot.start()
    kept = await say(fake, BOB_ID, "before the outage")
    edited = await say(fake, CAROL_ID, "typo befor the outage")
    deleted = await say(fake, CAROL_ID, "regrettable words")
    await archive_holds(client, stored(fake))
    await bot.stop()
    for number in range(250):  # three history pages of 100
        fake.add_history(CHANNEL_ID, ALICE_ID if number % 2 else BOB_ID, f"missed message {number}")
    fake.add_history(OTHER_CHANNEL_ID, ALICE_ID, "missed in #random")
    fake.channels[CHANNEL_ID].find(int(edited["id"]))["content"] = "no typo before the outage"  # type: ignore[index]
    fake.forget_messages(CHANNEL_ID, int(deleted["id"]))
    client = await bot.start()
    await archive_holds(client, stored(fake))
    await archive_holds(client, stored(fake, OTHER_CHANNEL_ID), OTHER_CHANNEL_ID)
    now = await archived(client)
    assert now[int(kept["id"])] == "before the outage" and int(deleted["id"]) not in now
    assert now[int(edited["id"])] == "no typo before the outage"


async def test_a_channel_never_archived_gets_at_most_the_cap_newest_first(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """A channel the archive has never seen is caught up with only its newest BACKFILL_MAX_MESSAGES messages."""
    for number in range(30):
        fake.add_history(CHANNEL_ID, BOB_ID, f"old message {number}")
    newest = dict(list(stored(fake).items())[-12:])
    client = await bot.start(backfill_max_messages=12)
    await archive_holds(client, newest)


async def test_catch_up_keeps_to_the_retention(bot: RunningBot, fake: FakeDiscord, llm: FakeLLM) -> None:
    """Messages older than HISTORY_RETENTION_DAYS are not fetched back into the archive."""
    fake.add_history(CHANNEL_ID, BOB_ID, "from last month", datetime.now(UTC) - timedelta(days=30))
    recent = fake.add_history(CHANNEL_ID, BOB_ID, "from yesterday", datetime.now(UTC) - timedelta(days=1))
    client = await bot.start(history_retention_days=7)
    await archive_holds(client, {int(recent["id"]): "from yesterday"})


async def test_context_after_catch_up_comes_from_the_archive(bot: RunningBot, fake: FakeDiscord, llm: FakeLLM) -> None:
    """Once catch-up has covered a channel, a new conversation's context is read from the archive, not Discord."""
    client = await bot.start()
    await say(fake, BOB_ID, "archived before the restart")
    await archive_holds(client, stored(fake))
    await caught_up(client)
    await bot.stop()
    fake.add_history(CHANNEL_ID, CAROL_ID, "the deploy broke while the bot was down")
    client = await bot.start()
    await caught_up(client)
    history_reads = len([r for r in fake.requests if r.method == "GET" and "/messages?" in r.path])
    await say(fake, ALICE_ID, f"<@{BOT_ID}> what broke?")
    await fake.wait_for_posts(1)
    assert len([r for r in fake.requests if r.method == "GET" and "/messages?" in r.path]) == history_reads
    assert "the deploy broke while the bot was down" in request_texts(llm.requests[0])[-1]


async def test_no_catch_up_when_backfill_max_messages_is_zero(bot: RunningBot, fake: FakeDiscord, llm: FakeLLM) -> None:
    """BACKFILL_MAX_MESSAGES=0 turns catch-up off: nothing missed is fetched."""
    fake.add_history(CHANNEL_ID, BOB_ID, "said while the bot was down")
    client = await bot.start(backfill_max_messages=0)
    live = await say(fake, ALICE_ID, "said while the bot was up")
    await archive_holds(client, {int(live["id"]): "said while the bot was up"})
    assert client.covered_since == {}
