"""End-to-end: reminders set with /remind are posted once at their time, pinging only their owner; one due while
Parley was stopped is posted once when it is back, marked late; two processes on one Postgres post one once; a
member over the limit is told so. The scheduler runs on the bot's clock, which the tests move on."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import discord
import pytest

from bot import Parley
from tests.conftest import fresh_postgres_database
from tests.fakes.fake_discord import ALICE_ID, BOB_ID, CHANNEL_ID, GUILD_ID, FakeDiscord
from tests.fakes.fake_llm import FakeLLM
from tests.support.e2e_support import (
    MEMBER,
    MODERATOR,
    RunningBot,
    assert_ephemeral_one_liner,
    command_payload,
    option,
    run_command,
    two_processes_serving_the_server,
)


async def remind(fake: FakeDiscord, when: str, what: str, *extra: dict[str, Any], **who: Any) -> str:
    """Use `/remind set`; the one ephemeral line it answers."""
    options = [option("when", when), option("what", what), *extra]
    return assert_ephemeral_one_liner(await run_command(fake, "set", options, group="remind", **who))


async def moved_on(bot: RunningBot, client: Parley, seconds: float) -> None:
    """Move the bot's clock on and wait for the reminder scheduler's next pass over the due reminders."""
    bot.clock.advance(seconds)
    scheduler = client.reminders
    scheduler.passed.clear()
    scheduler.wake()
    await asyncio.wait_for(scheduler.passed.wait(), 5)


# Manage Messages given to a member in the channel, as Discord resolves it for a timed post's delivery.
MANAGE = discord.Permissions(manage_messages=True)


def pinged(post: Any) -> list[int]:
    return [int(user["id"]) for user in post.message["mentions"]]


async def test_a_reminder_set_for_3_seconds_later_posts_once_pinging_only_its_owner(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    client = await bot.start()
    said = await remind(fake, "3s", "check the deploy @everyone <@&123>", permissions=MEMBER)
    assert said.startswith("I'll remind you on ") and "/remind cancel id:" in said

    await moved_on(bot, client, 2)
    assert fake.posts_in(CHANNEL_ID) == []
    await moved_on(bot, client, 1)
    [post] = await fake.wait_for_posts(1)
    await moved_on(bot, client, 3600)

    assert len(fake.posts_in(CHANNEL_ID)) == 1
    assert post.content == (
        f"\N{ALARM CLOCK} <@{ALICE_ID}>, you asked me to remind you:\n> check the deploy @everyone <@&123>"
    )
    # Discord pings what allowed_mentions allows: the owner, and neither @everyone nor the role the text names.
    assert post.body["allowed_mentions"] == {"parse": [], "users": [ALICE_ID]}
    assert pinged(post) == [ALICE_ID]
    assert llm.requests == []


async def test_a_reminder_due_while_parley_was_stopped_posts_once_marked_late_when_it_is_back(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    await bot.start()
    await remind(fake, "1h", "water the plants", permissions=MEMBER)
    await bot.stop()
    bot.clock.advance(3 * 3600)

    client = await bot.start()
    [post] = await fake.wait_for_posts(1)
    await moved_on(bot, client, 60)

    assert len(fake.posts_in(CHANNEL_ID)) == 1
    assert post.content.startswith(f"\N{ALARM CLOCK} <@{ALICE_ID}>, you asked me to remind you:\n> water the plants")
    assert "\n-# (late: due " in post.content and post.content.endswith(", Parley was offline)")


async def test_a_member_over_the_limit_is_told_so_and_a_timed_post_needs_manage_messages(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    client = await bot.start(reminders_per_member=1)
    await remind(fake, "tomorrow 9:00", "one", permissions=MEMBER)
    refused = await remind(fake, "tomorrow 10:00", "two", permissions=MEMBER)
    assert refused == (
        "You have 1 reminder waiting here, the most one member may have: cancel one with `/remind cancel` first."
    )
    here = option("here", True)
    assert "Manage Messages" in await remind(fake, "1h", "standup", here, user_id=BOB_ID, permissions=MEMBER)
    assert (await remind(fake, "1h", "standup", here, user_id=BOB_ID, permissions=MODERATOR)).startswith(
        "I'll post this here on "
    )
    assert client.archive is not None
    assert await client.archive.pending_reminders(GUILD_ID, ALICE_ID) == (1, 2)


async def test_list_shows_a_members_own_and_cancel_is_for_the_owner_or_a_manager(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    client = await bot.start()
    await remind(fake, "2h", "alice's", permissions=MEMBER)
    [listed] = await run_command(fake, "list", group="remind", permissions=MEMBER)
    assert client.archive is not None
    [mine] = await client.archive.member_reminders(GUILD_ID, ALICE_ID)
    assert listed.body is not None and f"**{mine.id}** · " in listed.body["data"]["content"]
    cancel = [option("id", mine.id)]

    refused = assert_ephemeral_one_liner(
        await run_command(fake, "cancel", cancel, group="remind", user_id=BOB_ID, permissions=MEMBER)
    )
    assert "someone else's" in refused
    done = assert_ephemeral_one_liner(
        await run_command(fake, "cancel", cancel, group="remind", user_id=BOB_ID, permissions=MODERATOR)
    )
    assert done == f"Cancelled reminder {mine.id} (<@{ALICE_ID}>'s)."
    assert await client.archive.member_reminders(GUILD_ID, ALICE_ID) == []


async def test_two_processes_on_one_postgres_post_a_reminder_once(
    fake: FakeDiscord,
    llm: FakeLLM,
    tmp_path: Path,
    postgres_server: str,
    discord_endpoints: None,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Two processes share one Postgres archive and both serve the fake's server (shard 0 of 2 beside shard 1 of 7,
    as across a reshard): both find the reminder due at once, and it is posted once."""
    database_url = await fresh_postgres_database(postgres_server)
    with caplog.at_level(logging.INFO, "parley.reminders"):
        async with two_processes_serving_the_server(fake, llm, tmp_path, database_url) as both:
            await both[0][1].reminders.book.set(
                guild_id=GUILD_ID, channel_id=CHANNEL_ID, owner_id=ALICE_ID, owner_may_post=True,
                text="rotate the keys", when="3s", post_here=False,
            )  # fmt: skip
            await asyncio.gather(*(moved_on(process, client, 3) for process, client in both))
            [post] = await fake.wait_for_posts(1)
            await asyncio.gather(*(moved_on(process, client, 60) for process, client in both))
            assert len(fake.posts_in(CHANNEL_ID)) == 1
    assert "rotate the keys" in post.content
    assert caplog.text.count("posted in channel") == 1
    assert fake.handler_errors == [] and llm.handler_errors == []


async def test_a_reminder_whose_owner_was_blocked_meanwhile_is_dropped_with_a_log_line(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    await bot.start()
    await remind(fake, "1h", "deploy", option("every", "daily"), permissions=MEMBER)
    await bot.stop()
    bot.clock.advance(2 * 3600)
    with caplog.at_level(logging.INFO, "parley.reminders"):
        client = await bot.start(blocked_members=frozenset({ALICE_ID}))
        await moved_on(bot, client, 1)
    assert fake.posts_in(CHANNEL_ID) == []
    assert "dropped: its owner may not use Parley there now (member_blocked)" in caplog.text
    assert client.archive is not None and await client.archive.pending_reminders(GUILD_ID, ALICE_ID) == (0, 0)


async def test_opting_out_cancels_a_members_reminders_and_they_can_set_none(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    client = await bot.start()
    await remind(fake, "1h", "stretch", permissions=MEMBER)
    payload = command_payload(fake, "privacy", permissions=MEMBER)
    payload["data"]["options"] = [{"type": 2, "name": "privacy", "options": [{"type": 1, "name": "optout"}]}]
    await fake.dispatch("INTERACTION_CREATE", payload)
    assert client.archive is not None
    archive = client.archive
    await fake.wait_for(lambda: any(payload["token"] in call.path for call in fake.interaction_calls), what="optout")
    assert await archive.pending_reminders(GUILD_ID, ALICE_ID) == (0, 0)
    assert "You opted out of Parley in this server" in await remind(fake, "1h", "stretch", permissions=MEMBER)


async def test_a_timed_post_here_pings_no_one_and_comes_again(bot: RunningBot, fake: FakeDiscord, llm: FakeLLM) -> None:
    client = await bot.start()
    every = option("every", "daily")
    said = await remind(fake, "1h", "standup: what's blocking you?", every, option("here", True), permissions=MODERATOR)
    assert said.startswith("I'll post this here on ") and ", then every day (reminder " in said

    await moved_on(bot, client, 3600)
    await moved_on(bot, client, 24 * 3600)
    first, second = await fake.wait_for_posts(2)
    assert (
        first.content == f"\N{ALARM CLOCK} Timed post from <@{ALICE_ID}> (every day):\n> standup: what's blocking you?"
    )
    assert second.content == first.content
    assert first.body["allowed_mentions"] == {"parse": []} and pinged(first) == []


async def test_a_timed_post_stops_once_its_owner_loses_manage_messages(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    """Bob (not the server's owner, who has every permission) sets a timed post with Manage Messages, then loses
    it: the post stops and is dropped with a log line."""
    fake.allow(CHANNEL_ID, BOB_ID, MANAGE)
    client = await bot.start()
    every, here = option("every", "daily"), option("here", True)
    await remind(fake, "1h", "standup", every, here, permissions=MODERATOR, user_id=BOB_ID)
    await moved_on(bot, client, 3600)
    await fake.wait_for_posts(1)
    await bot.stop()
    fake.allow(CHANNEL_ID, BOB_ID, discord.Permissions.none())  # a moderator no more

    with caplog.at_level(logging.INFO, "parley.reminders"):
        client = await bot.start()
        await moved_on(bot, client, 24 * 3600)
        await moved_on(bot, client, 1)  # a pass begun before the clock moved may have ended the first wait
    assert len(fake.posts_in(CHANNEL_ID)) == 1
    assert "dropped: its owner no longer has Manage Messages in the channel" in caplog.text
    assert client.archive is not None and await client.archive.pending_reminders(GUILD_ID, BOB_ID) == (0, 0)
