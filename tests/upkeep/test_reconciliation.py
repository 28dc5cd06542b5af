"""The archive's recheck against Discord (upkeep/reconciliation.py), run on bot.py's client against the fake Discord.

The client runs with catch-up off, so nothing walks on its own; each test walks the channels itself.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import discord
import pytest

from archive import Archive, ArchivedMessage, ReconciliationProgress
from bot import Parley
from tests.fakes.fake_discord import ALICE_ID, CHANNEL_ID, GUILD_ID, OTHER_CHANNEL_ID, FakeDiscord
from tests.support.e2e_support import RunningBot
from upkeep.background import BackgroundTasks
from upkeep.reconciliation import Reconciliation, next_pass

pytestmark = pytest.mark.usefixtures("llm")

START = datetime.now(UTC) - timedelta(days=10)


def history(fake: FakeDiscord, count: int, channel_id: int = CHANNEL_ID) -> list[dict[str, Any]]:
    """`count` messages, an hour apart from 10 days ago, in Discord's history."""
    return [
        fake.add_history(channel_id, ALICE_ID, f"message number{n}", START + timedelta(hours=n)) for n in range(count)
    ]


def archive_them(archive: Archive, messages: list[dict[str, Any]], channel_id: int = CHANNEL_ID) -> None:
    for message in messages:
        archive.add(
            ArchivedMessage(
                message_id=int(message["id"]),
                guild_id=GUILD_ID,
                channel_id=channel_id,
                author_id=ALICE_ID,
                author_name="alice",
                content=message["content"],
                created_at=discord.utils.snowflake_time(int(message["id"])),
                is_bot=False,
            )
        )


class Walk:
    """A Reconciliation over the running client's archive, forgetting into a record of what it forgot."""

    def __init__(self, client: Parley, **settings: Any) -> None:
        assert client.archive is not None
        self.archive = client.archive
        self.client = client
        self.forgotten: set[int] = set()
        self.reconciliation = Reconciliation(
            client.settings.model_copy(update={"reconcile_page_pause_seconds": 0, **settings}),
            BackgroundTasks(),
            self.forget,
        )

    def forget(self, channel_id: int, message_ids: Collection[int]) -> None:
        self.forgotten.update(message_ids)
        self.archive.delete(message_ids)

    async def run(self, *channel_ids: int, session_start: datetime | None = None) -> None:
        channels = [self.client.get_channel(channel_id) for channel_id in channel_ids or (CHANNEL_ID,)]
        assert all(isinstance(channel, discord.TextChannel) for channel in channels)
        self.reconciliation.start(self.archive, channels, session_start or datetime.now(UTC))  # type: ignore[arg-type]
        await self.reconciliation.background.wait()
        await self.archive.flush()


def history_reads(fake: FakeDiscord, channel_id: int = CHANNEL_ID) -> list[dict[str, str]]:
    reads = [urlsplit(request.path) for request in fake.requests if request.method == "GET"]
    return [dict(parse_qsl(read.query)) for read in reads if read.path.endswith(f"/channels/{channel_id}/messages")]


async def started(bot: RunningBot) -> Parley:
    return await bot.start(backfill_max_messages=0)


async def test_deletions_and_edits_anywhere_in_the_archive_are_taken_in(bot: RunningBot, fake: FakeDiscord) -> None:
    """Over 250 archived messages, a deletion and an edit far beyond the newest 100 reach the archive and search."""
    messages = history(fake, 250)
    client = await started(bot)
    walk = Walk(client)
    archive_them(walk.archive, messages)
    deleted, edited = int(messages[3]["id"]), int(messages[4]["id"])
    fake.forget_messages(CHANNEL_ID, deleted)
    edit = fake.channels[CHANNEL_ID].find(edited)
    assert edit is not None
    edit["content"], edit["edited_timestamp"] = "rewritten later", datetime.now(UTC).isoformat()

    await walk.run()

    assert walk.forgotten == {deleted}
    assert await walk.archive.search(CHANNEL_ID, "number3") == []
    [found] = await walk.archive.search(CHANNEL_ID, "rewritten")
    assert (found.message_id, found.content) == (edited, "rewritten later")
    assert len(await walk.archive.recent(CHANNEL_ID, limit=1000)) == 249
    assert [read.get("limit") for read in history_reads(fake)] == ["100", "100", "100"]
    assert walk.reconciliation.forgotten == 1 and walk.reconciliation.edited == 1
    [progress] = (await walk.archive.reconciliation_progress()).values()
    assert progress.done


async def test_an_unedited_archive_is_left_as_it_is(bot: RunningBot, fake: FakeDiscord) -> None:
    """Messages Discord returns unchanged are neither forgotten nor rewritten; an empty channel costs no request."""
    messages = history(fake, 120)
    client = await started(bot)
    walk = Walk(client)
    archive_them(walk.archive, messages)
    await walk.run(CHANNEL_ID, OTHER_CHANNEL_ID)
    assert walk.forgotten == set() and walk.reconciliation.edited == 0
    assert len(await walk.archive.recent(CHANNEL_ID, limit=1000)) == 120
    assert history_reads(fake, OTHER_CHANNEL_ID) == []
    assert walk.reconciliation.describe(GUILD_ID) == "Recheck of the archive against Discord: 2/2 channels done"


async def test_the_walk_goes_on_where_it_stopped(bot: RunningBot, fake: FakeDiscord) -> None:
    """A walk noted as having reached a message starts below it: what is newer is not asked for again."""
    messages = history(fake, 250)
    client = await started(bot)
    walk = Walk(client)
    archive_them(walk.archive, messages)
    session_start = datetime.now(UTC)
    top = discord.utils.time_snowflake(session_start, high=False)
    reached = int(messages[150]["id"])
    await walk.archive.save_reconciliation_progress(ReconciliationProgress(CHANNEL_ID, GUILD_ID, top, reached))
    newer, older = int(messages[200]["id"]), int(messages[20]["id"])
    fake.forget_messages(CHANNEL_ID, newer, older)

    await walk.run(session_start=session_start)

    assert walk.forgotten == {older}  # the newer one lies in the part already walked
    assert history_reads(fake)[0]["before"] == str(reached)
    assert (await walk.archive.reconciliation_progress())[CHANNEL_ID].done


async def test_away_again_during_a_walk_means_another_pass(bot: RunningBot, fake: FakeDiscord) -> None:
    """An unfinished walk goes on after a new outage, then walks again from the new session down."""
    messages = history(fake, 250)
    client = await started(bot)
    walk = Walk(client)
    archive_them(walk.archive, messages)
    reached = int(messages[150]["id"])
    first_top = int(messages[240]["id"])
    await walk.archive.save_reconciliation_progress(ReconciliationProgress(CHANNEL_ID, GUILD_ID, first_top, reached))
    newer, older = int(messages[200]["id"]), int(messages[20]["id"])
    fake.forget_messages(CHANNEL_ID, newer, older)

    await walk.run()

    assert walk.forgotten == {newer, older}
    befores = [read["before"] for read in history_reads(fake)]
    assert befores[0] == str(reached) and int(befores[2]) > first_top
    assert (await walk.archive.reconciliation_progress())[CHANNEL_ID].done


def test_next_pass() -> None:
    """A done or missing pass starts anew at the session; an unfinished one goes on and another follows it."""
    channel: Any = type("Channel", (), {"id": CHANNEL_ID, "guild": type("Guild", (), {"id": GUILD_ID})})
    assert next_pass(None, channel, 900) == ReconciliationProgress(CHANNEL_ID, GUILD_ID, 900, 900)
    done = ReconciliationProgress(CHANNEL_ID, GUILD_ID, 500, 0)
    assert next_pass(done, channel, 900) == ReconciliationProgress(CHANNEL_ID, GUILD_ID, 900, 900)
    unfinished = ReconciliationProgress(CHANNEL_ID, GUILD_ID, 500, 200)
    assert next_pass(unfinished, channel, 900) == ReconciliationProgress(CHANNEL_ID, GUILD_ID, 500, 200, 900)
    assert next_pass(next_pass(unfinished, channel, 900), channel, 800).again_id == 900
    assert next_pass(unfinished, channel, 500) == unfinished


async def test_the_walk_stops_at_the_retention_horizon(bot: RunningBot, fake: FakeDiscord) -> None:
    """Messages older than HISTORY_RETENTION_DAYS are not asked for: the prune drops them anyway."""
    old = fake.add_history(CHANNEL_ID, ALICE_ID, "from last month", datetime.now(UTC) - timedelta(days=30))
    recent = history(fake, 5)
    client = await started(bot)
    walk = Walk(client, history_retention_days=20)
    archive_them(walk.archive, [old, *recent])
    fake.forget_messages(CHANNEL_ID, int(old["id"]))
    await walk.run()
    assert walk.forgotten == set()
    [read] = history_reads(fake)
    assert int(read["before"]) > int(recent[-1]["id"])


async def test_a_channel_discord_refuses_is_left_and_the_next_walked(bot: RunningBot, fake: FakeDiscord) -> None:
    """A channel whose history Discord refuses (here: gone) keeps its progress; the others are still rechecked."""
    refused, walked = history(fake, 3), history(fake, 3, OTHER_CHANNEL_ID)
    client = await started(bot)
    walk = Walk(client)
    archive_them(walk.archive, refused)
    archive_them(walk.archive, walked, OTHER_CHANNEL_ID)
    fake.forget_messages(OTHER_CHANNEL_ID, int(walked[0]["id"]))
    del fake.channels[CHANNEL_ID]  # Discord answers 404 Unknown Channel
    await walk.run(CHANNEL_ID, OTHER_CHANNEL_ID)
    assert walk.forgotten == {int(walked[0]["id"])}
    progress = await walk.archive.reconciliation_progress()
    assert not progress[CHANNEL_ID].done and progress[OTHER_CHANNEL_ID].done
    assert walk.reconciliation.describe(GUILD_ID) == (
        "Recheck of the archive against Discord: 1/2 channels done (stopped; it goes on after the next restart)"
    )
