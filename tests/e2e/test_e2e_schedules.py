"""End-to-end: `/parley-admin schedule`, with bot.py's client, the fake Discord and the fake model, on the bot's clock.

A scheduled prompt is posted once at its time with the model's answer, pinging no one; once after a restart across its
time, marked late; once by two processes on one Postgres; not at all, with a log line, once the server's budget is
spent; now with `run`. Its run is offered only the tools that change nothing. Who may schedule where, and the count
limit, are tried as members without the permissions would."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import discord
import pytest

from bot import Parley
from tests.conftest import fresh_postgres_database
from tests.e2e.test_e2e_privacy import erase_by_command, export_of
from tests.e2e.test_e2e_reminders import moved_on
from tests.fakes.fake_discord import ALICE_ID, BOB_ID, BOT_ID, CHANNEL_ID, GUILD_ID, OTHER_CHANNEL_ID, FakeDiscord
from tests.fakes.fake_llm import FakeLLM, allow_model_requests, last_user_text
from tests.support.e2e_support import MEMBER, RunningBot, group_command, option, two_processes_serving_the_server

ADMIN = MEMBER | discord.Permissions(manage_guild=True)
CHANNEL_MANAGER = MEMBER | discord.Permissions(manage_channels=True)
ANSWER = "Monday notes: three releases shipped, nothing is blocked."
PROMPT = "Sum up what this channel discussed last week."
# The fake's clock starts at the wall clock: an hourly schedule is due an hour on, whatever the date.
HOURLY = "every 1h"
# A channel overwrite: what Discord resolves for the owner at each run.
MANAGES_CHANNEL = discord.Permissions(manage_channels=True)


async def schedule(
    fake: FakeDiscord,
    subcommand: str,
    options: list[dict[str, Any]] | None = None,
    *,
    permissions: discord.Permissions = ADMIN,
    resolved: dict[str, Any] | None = None,
    posts: int = 1,
) -> str:
    """`/parley-admin schedule <subcommand>` in #general; what Parley answered."""
    return await group_command(
        fake, "schedule", subcommand, options, resolved=resolved, permissions=permissions, posts=posts
    )


async def add(fake: FakeDiscord, prompt: str = PROMPT, when: str = HOURLY, **who: Any) -> str:
    return await schedule(fake, "add", [option("prompt", prompt), option("when", when)], **who)


async def add_as_bob(fake: FakeDiscord) -> str:
    """Bob's schedule in #general, by Manage Channels there (Alice owns the fake's server: she has every permission)."""
    options = [option("prompt", PROMPT), option("when", HOURLY)]
    return await group_command(fake, "schedule", "add", options, permissions=CHANNEL_MANAGER, user_id=BOB_ID)


async def start(bot: RunningBot, fake: FakeDiscord, **overrides: Any) -> Parley:
    """Start the bot with Alice managing #general, as Discord resolves it when a run checks its owner again."""
    fake.allow(CHANNEL_ID, ALICE_ID, MANAGES_CHANNEL)
    return await bot.start(**overrides)


def tool_names(request: dict[str, Any]) -> set[str]:
    return {tool["function"]["name"] for tool in request.get("tools", [])}


async def ran(bot: RunningBot, client: Parley, seconds: float) -> None:
    """Move the clock on, let the scheduler's pass claim what is due, and wait for the runs it started."""
    await moved_on(bot, client, seconds)
    await moved_on(bot, client, 0)  # a pass begun before the clock moved may have ended the first wait
    await client.reminders.runs_finished()


async def test_a_schedule_posts_the_models_answer_once_at_its_time_pinging_no_one(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    llm.handler = lambda request: f"{ANSWER} @everyone <@&123>"
    client = await start(bot, fake, server_actions=True)
    said = await add(fake)
    assert said.startswith("Scheduled prompt ") and f"in <#{CHANNEL_ID}> every hour" in said

    await ran(bot, client, 3590)
    assert fake.posts_in(CHANNEL_ID) == [] and llm.requests == []
    await ran(bot, client, 10)
    [post] = await fake.wait_for_posts(1)
    await ran(bot, client, 60)

    assert len(fake.posts_in(CHANNEL_ID)) == 1 and len(llm.requests) == 1
    assert post.content.startswith(ANSWER) and "-# Scheduled prompt " in post.content
    assert "late" not in post.content
    assert post.body["allowed_mentions"] == {"parse": []}
    assert PROMPT in last_user_text(llm.requests[0])
    # Nobody is there to approve a change: only the tools that change nothing are offered.
    offered = tool_names(llm.requests[0])
    assert "search_history" in offered
    assert not offered & {"remember", "remind", "pin_message", "delete_message", "time_out_member", "generate_image"}
    # The run counts for the server.
    assert client.usage.server_tokens(GUILD_ID) > 0


async def test_a_restart_across_its_time_posts_it_once_marked_late(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    llm.handler = lambda request: ANSWER
    await start(bot, fake)
    await add(fake)
    await bot.stop()
    bot.clock.advance(3600 + 20 * 60)

    client = await bot.start()
    [post] = await fake.wait_for_posts(1)
    await client.reminders.runs_finished()
    await ran(bot, client, 60)

    assert len(fake.posts_in(CHANNEL_ID)) == 1 and len(llm.requests) == 1
    assert post.content.startswith(ANSWER) and "late: due " in post.content


async def test_a_schedule_whose_server_budget_is_spent_posts_nothing_and_says_why(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    client = await start(bot, fake, server_tokens_per_day=50)
    await add(fake)
    client.usage.record(GUILD_ID, CHANNEL_ID, ALICE_ID, 60, 0)
    with caplog.at_level(logging.INFO):
        await ran(bot, client, 3600)
        await ran(bot, client, 60)
    assert fake.posts_in(CHANNEL_ID) == [] and llm.requests == []
    assert "scheduled prompt " in caplog.text and "has spent its token budget today" in caplog.text


async def test_run_posts_it_now_and_leaves_its_times_as_they_are(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    llm.handler = lambda request: ANSWER
    client = await start(bot, fake)
    said = await add(fake)
    schedule_id = int(said.removeprefix("Scheduled prompt ").split(":")[0])
    before = await client.reminders.book.scheduled(GUILD_ID)

    # The deferral ("Parley is thinking…"), then the one line.
    done = await schedule(fake, "run", [option("id", schedule_id)], posts=2)
    assert done.strip() == f"Scheduled prompt {schedule_id} answered in <#{CHANNEL_ID}>."
    [post] = fake.posts_in(CHANNEL_ID)
    assert post.content.startswith(ANSWER)
    assert await client.reminders.book.scheduled(GUILD_ID) == before


async def test_list_and_remove(bot: RunningBot, fake: FakeDiscord, llm: FakeLLM) -> None:
    client = await bot.start()
    said = await add(fake)
    schedule_id = int(said.removeprefix("Scheduled prompt ").split(":")[0])
    listed = await schedule(fake, "list")
    assert listed.startswith(f"**{schedule_id}** · ") and f"every hour · scheduled prompt in <#{CHANNEL_ID}>" in listed
    assert PROMPT in listed
    assert await schedule(fake, "remove", [option("id", schedule_id)]) == (
        f"Scheduled prompt {schedule_id} removed: Parley no longer answers it."
    )
    assert await client.reminders.book.scheduled(GUILD_ID) == []
    assert (await schedule(fake, "list")).startswith("This server has no scheduled prompts")


# --- Attacks: who may schedule where, and how many -------------------------------------------------------------------


async def test_a_member_without_manage_server_or_manage_channels_may_not_schedule(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    client = await bot.start()
    refused = await add(fake, permissions=MEMBER)
    assert refused.startswith("You need Manage Server, or Manage Channels in the channel it is for")
    assert await client.reminders.book.scheduled(GUILD_ID) == []


async def test_manage_channels_schedules_in_its_channel_but_not_in_another(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    client = await bot.start()
    elsewhere = {"type": 7, "name": "channel", "value": str(OTHER_CHANNEL_ID)}
    resolved = {"channels": {str(OTHER_CHANNEL_ID): fake.channels[OTHER_CHANNEL_ID].payload() | {"permissions": "0"}}}
    options = [option("prompt", PROMPT), option("when", HOURLY), elsewhere]
    refused = await schedule(fake, "add", options, permissions=CHANNEL_MANAGER, resolved=resolved)
    assert refused.startswith("You need Manage Server, or Manage Channels in the channel it is for")
    assert await client.reminders.book.scheduled(GUILD_ID) == []

    assert (await add(fake, permissions=CHANNEL_MANAGER)).startswith("Scheduled prompt ")
    # An admin's schedule in another channel is not theirs to run or remove.
    other = await schedule(fake, "add", options, resolved=resolved)
    other_id = int(other.removeprefix("Scheduled prompt ").split(":")[0])
    denied = await schedule(fake, "remove", [option("id", other_id)], permissions=CHANNEL_MANAGER)
    assert denied.startswith("You need Manage Server")
    assert len(await client.reminders.book.scheduled(GUILD_ID)) == 2


async def test_the_count_limit_and_a_time_that_is_no_schedule(bot: RunningBot, fake: FakeDiscord, llm: FakeLLM) -> None:
    client = await start(bot, fake, schedules_per_server=1)
    assert (await add(fake)).startswith("Scheduled prompt ")
    over = await add(fake, when="daily 18:00")
    assert over.startswith("This server has 1 scheduled prompts, the most it may have (SCHEDULES_PER_SERVER)")
    unreadable = await add(fake, when="whenever")
    assert "is no schedule I can read" in unreadable
    assert len(await client.reminders.book.scheduled(GUILD_ID)) == 1


async def test_an_owner_who_lost_the_permission_has_the_schedule_dropped(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    """The owner's permission is checked again at each time, as Discord resolves it then."""
    fake.allow(CHANNEL_ID, BOB_ID, MANAGES_CHANNEL)
    await bot.start()
    assert (await add_as_bob(fake)).startswith("Scheduled prompt ")
    await bot.stop()
    fake.allow(CHANNEL_ID, BOB_ID, discord.Permissions.none())  # a channel manager no more
    with caplog.at_level(logging.INFO, "parley.reminders"):
        client = await bot.start()
        await ran(bot, client, 3600)
        await ran(bot, client, 1)
    assert fake.posts_in(CHANNEL_ID) == [] and llm.requests == []
    assert "no longer has Manage Server" in caplog.text
    assert await client.reminders.book.scheduled(GUILD_ID) == []


async def test_two_processes_on_one_postgres_post_a_schedule_once(
    fake: FakeDiscord,
    llm: FakeLLM,
    tmp_path: Path,
    postgres_server: str,
    discord_endpoints: None,
    caplog: pytest.LogCaptureFixture,
) -> None:
    llm.handler = lambda request: ANSWER
    database_url = await fresh_postgres_database(postgres_server)
    fake.allow(CHANNEL_ID, ALICE_ID, MANAGES_CHANNEL)  # as `start` does
    with caplog.at_level(logging.INFO, "parley.reminders"), allow_model_requests():
        async with two_processes_serving_the_server(fake, llm, tmp_path, database_url) as both:
            await add(fake)
            await asyncio.gather(*(ran(process, client, 3600) for process, client in both))
            [post] = await fake.wait_for_posts(1)
            await asyncio.gather(*(ran(process, client, 60) for process, client in both))
            assert len(fake.posts_in(CHANNEL_ID)) == 1
    assert post.content.startswith(ANSWER)
    assert len(llm.requests) == 1


async def test_an_owners_scheduled_prompts_are_in_their_export_and_gone_with_their_erase(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    client = await start(bot, fake)
    schedule_id = int((await add(fake)).removeprefix("Scheduled prompt ").split(":")[0])
    [exported] = (await export_of(fake))["reminders"]
    assert (exported["id"], exported["text"], exported["scheduled_prompt"]) == (str(schedule_id), PROMPT, True)
    said = await erase_by_command(fake)
    assert "1 reminder(s)" in said
    assert await client.reminders.book.scheduled(GUILD_ID) == []
    await ran(bot, client, 3600)
    assert fake.posts_in(CHANNEL_ID) == [] and llm.requests == []


async def test_a_channel_parley_may_not_post_in_is_refused_when_it_is_set(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    fake.deny(OTHER_CHANNEL_ID, BOT_ID, discord.Permissions(send_messages=True))
    client = await start(bot, fake)
    elsewhere = {"type": 7, "name": "channel", "value": str(OTHER_CHANNEL_ID)}
    resolved = {"channels": {str(OTHER_CHANNEL_ID): fake.channels[OTHER_CHANNEL_ID].payload() | {"permissions": "0"}}}
    options = [option("prompt", PROMPT), option("when", HOURLY), elsewhere]
    refused = await schedule(fake, "add", options, resolved=resolved)
    assert refused == (f"Parley may not post in <#{OTHER_CHANNEL_ID}>: grant it View Channel and Send Messages there.")
    assert await client.reminders.book.scheduled(GUILD_ID) == []
