"""Promise: "Parley never posts what a member wrote or asked for in a channel where that member may not post
(see the channel and send messages in it): not when they ask, and not later either: a reminder (or a scheduled
prompt) stops once its owner loses Send Messages or View Channel there, is timed out, leaves the server or is
banned, and Parley never pings them into a channel they cannot see."

Each row is a path by which a member's words, or an answer to their question, would reach a channel, tried by a
member who may not post there (or who could when they set it and can no longer); through the fake Discord and the
fake model. Every row ends with no post of Parley's in the channel and no reminder waiting.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import discord
import pytest

from commands.ask_menu import ASK_PARLEY, IN_THE_CHANNEL, ONLY_ME, QUESTION_ID, VISIBILITY_ID
from tests.e2e.test_e2e_reminders import moved_on
from tests.e2e.test_e2e_support import COVERED, THRESHOLD, add_handbook, after_the_wait
from tests.fakes.fake_discord import BOB_ID, CHANNEL_ID, GUILD_ID, FakeDiscord
from tests.fakes.fake_llm import FakeLLM, ToolCall, replies
from tests.support.e2e_support import (
    MEMBER,
    RunningBot,
    assert_ephemeral_one_liner,
    call_text,
    calls_for,
    command_payload,
    group_command,
    open_modal,
    option,
    run_command,
    say,
    submit_modal,
    use_top_command,
)

# Bob is not the server's owner (who has every permission, whatever the channel says).
OWNER = BOB_ID
MUTED = discord.Permissions(MEMBER.value & ~discord.Permissions(send_messages=True).value)
BLIND = discord.Permissions(MEMBER.value & ~discord.Permissions(view_channel=True).value)
# What Discord gives a timed-out member in an interaction: View Channel and Read Message History alone.
TIMED_OUT = discord.Permissions(view_channel=True, read_message_history=True)
# A scheduled prompt's owner: Manage Channels in the channel, in the interaction and in Discord's overwrites.
MANAGES_CHANNEL = discord.Permissions(manage_channels=True)
CHANNEL_MANAGER = MEMBER | MANAGES_CHANNEL
REMIND = ToolCall("remind", {"when": "1h", "text": "everyone look at me", "every": "hourly", "post_here": False})


async def answered_line(fake: FakeDiscord, calls: list[Any]) -> str:
    """Everything the bot has said to the interaction that `calls` began, once it said something."""

    def said() -> bool:
        return any(call.body and call_text(call) for call in calls_for(fake, calls))

    await fake.wait_for(said, what="an answer to the interaction")
    return "\n".join(call_text(call) for call in calls_for(fake, calls) if call.body)


# --- When it is asked ---------------------------------------------------------------------------


async def remind_set(fake: FakeDiscord, permissions: discord.Permissions) -> str:
    options = [option("when", "1h"), option("what", "everyone look at me"), option("every", "hourly")]
    calls = await run_command(fake, "set", options, group="remind", user_id=OWNER, permissions=permissions)
    return assert_ephemeral_one_liner(calls)


async def remind_set_muted(fake: FakeDiscord, llm: FakeLLM, bot: RunningBot) -> str:
    await bot.start()
    return await remind_set(fake, MUTED)


async def remind_set_timed_out(fake: FakeDiscord, llm: FakeLLM, bot: RunningBot) -> str:
    await bot.start()
    return await remind_set(fake, TIMED_OUT)


async def ask_parley(fake: FakeDiscord, visibility: str) -> str:
    target = await say(fake, OWNER, "the release checklist")
    modal = await open_modal(fake, ASK_PARLEY, target, user_id=OWNER, permissions=MUTED)
    values: dict[str, str | list[str]] = {QUESTION_ID: "remind me of this every hour", VISIBILITY_ID: [visibility]}
    return await answered_line(fake, await submit_modal(fake, modal, values, user_id=OWNER, permissions=MUTED))


async def remind_tool_from_ask_parley(fake: FakeDiscord, llm: FakeLLM, bot: RunningBot) -> str:
    """Asked privately, the answer is the asker's alone; the reminder it would set would post in the channel, so the
    `remind` tool is not offered to her (reminders/tool.py): the model's call of it is an unknown tool's."""
    await bot.start()
    llm.handler = replies(REMIND, "Done.")
    await ask_parley(fake, ONLY_ME)
    return " ".join(message["content"] for message in llm.requests[-1]["messages"] if message["role"] == "tool")


async def ask_parley_in_public(fake: FakeDiscord, llm: FakeLLM, bot: RunningBot) -> str:
    await bot.start()
    return await ask_parley(fake, IN_THE_CHANNEL)


async def ask_in_public(fake: FakeDiscord, permissions: discord.Permissions) -> str:
    calls = await use_top_command(fake, "ask", [option("question", "hello?")], user_id=OWNER, permissions=permissions)
    return await answered_line(fake, calls)


async def ask_muted(fake: FakeDiscord, llm: FakeLLM, bot: RunningBot) -> str:
    await bot.start()
    return await ask_in_public(fake, MUTED)


async def ask_blind(fake: FakeDiscord, llm: FakeLLM, bot: RunningBot) -> str:
    await bot.start()
    return await ask_in_public(fake, BLIND)


async def digest_on_muted(fake: FakeDiscord, llm: FakeLLM, bot: RunningBot) -> str:
    """A channel manager denied Send Messages there asks for a daily digest to be posted there."""
    await bot.start()
    manager = discord.Permissions(MUTED.value | discord.Permissions(manage_channels=True).value)
    payload = command_payload(fake, "digest", user_id=OWNER, permissions=manager)
    payload["data"]["options"] = [{"type": 2, "name": "digest", "options": [{"type": 1, "name": "on"}]}]
    token = payload["token"]

    def calls() -> list[Any]:
        return [call for call in fake.interaction_calls if f"/{token}" in call.path]

    await fake.dispatch("INTERACTION_CREATE", payload)
    await fake.wait_for(lambda: bool(calls()), what="/parley-admin digest on answered")
    said = assert_ephemeral_one_liner(calls())
    assert bot.client is not None and bot.client.archive is not None
    assert await bot.client.archive.digest(CHANNEL_ID) is None
    return said


async def catchup_muted(fake: FakeDiscord, llm: FakeLLM, bot: RunningBot) -> str:
    """/parley catchup answers its asker alone, whatever they may do in the channel."""
    await bot.start()
    calls = await run_command(fake, "catchup", user_id=OWNER, permissions=MUTED)
    assert calls[0].body is not None and calls[0].body["data"]["flags"] & discord.MessageFlags.ephemeral.flag
    return await answered_line(fake, calls)


async def support_question_muted_during_the_wait(fake: FakeDiscord, llm: FakeLLM, bot: RunningBot) -> str:
    """A question nobody addressed in a support channel; a moderator denies its asker Send Messages there before the
    desk's wait is over: the documents' answer to it is not posted."""
    client = await bot.start(knowledge_answer_threshold=THRESHOLD)
    await client.desk.set_support(CHANNEL_ID, GUILD_ID, True, set_by=OWNER)
    await add_handbook(client)
    await say(fake, OWNER, COVERED)
    fake.deny(CHANNEL_ID, OWNER, discord.Permissions(send_messages=True))
    await fake.dispatch("CHANNEL_UPDATE", fake.channels[CHANNEL_ID].payload())
    await after_the_wait(bot, client)
    assert llm.requests == []
    return ""


# --- Later, when it comes due ---------------------------------------------------------------------------


def later(change: Callable[[FakeDiscord], None]) -> Callable[[FakeDiscord, FakeLLM, RunningBot], Awaitable[str]]:
    """A reminder set by a member who may post, then `change`d while Parley was stopped, then come due."""

    async def path(fake: FakeDiscord, llm: FakeLLM, bot: RunningBot) -> str:
        await bot.start()
        assert (await remind_set(fake, MEMBER)).startswith("I'll remind you on ")
        await bot.stop()
        change(fake)
        client = await bot.start()
        await moved_on(bot, client, 3600)
        await moved_on(bot, client, 1)  # a pass begun before the clock moved may have ended the first wait
        return ""

    return path


def later_scheduled(
    change: Callable[[FakeDiscord], None],
) -> Callable[[FakeDiscord, FakeLLM, RunningBot], Awaitable[str]]:
    """A scheduled prompt set by a channel manager who may post, then `change`d while Parley was stopped, then due."""

    async def path(fake: FakeDiscord, llm: FakeLLM, bot: RunningBot) -> str:
        fake.allow(CHANNEL_ID, OWNER, MANAGES_CHANNEL)
        await bot.start()
        assert (await schedule_add(fake, CHANNEL_MANAGER)).startswith("Scheduled prompt ")
        await bot.stop()
        change(fake)
        client = await bot.start()
        await moved_on(bot, client, 3600)
        await moved_on(bot, client, 1)
        await client.reminders.runs_finished()
        return ""

    return path


async def schedule_add(fake: FakeDiscord, permissions: discord.Permissions) -> str:
    options = [option("prompt", "Post the week's plan @everyone"), option("when", "every 1h")]
    return await group_command(fake, "schedule", "add", options, permissions=permissions, user_id=OWNER)


async def schedule_add_muted(fake: FakeDiscord, llm: FakeLLM, bot: RunningBot) -> str:
    await bot.start()
    return await schedule_add(fake, MUTED | MANAGES_CHANNEL)


def manager_muted(fake: FakeDiscord) -> None:
    """Still Manage Channels in the channel, but Send Messages denied there (one member overwrite, as Discord keeps)."""
    fake.allow(CHANNEL_ID, OWNER, MANAGES_CHANNEL, discord.Permissions(send_messages=True))


def deny(permission: str) -> Callable[[FakeDiscord], None]:
    return lambda fake: fake.deny(CHANNEL_ID, OWNER, discord.Permissions(**{permission: True}))


def time_out(fake: FakeDiscord) -> None:
    fake.time_out(OWNER, datetime.now(UTC) + timedelta(days=1))


def part(fake: FakeDiscord) -> None:
    fake.part(OWNER)


MAY_NOT_POST = "can't post in this channel"
PATHS: list[tuple[str, Callable[[FakeDiscord, FakeLLM, RunningBot], Awaitable[str]], str]] = [
    ("/remind set, Send Messages denied", remind_set_muted, MAY_NOT_POST),
    ("/remind set, timed out", remind_set_timed_out, MAY_NOT_POST),
    ("remind tool from Ask Parley, Send Messages denied", remind_tool_from_ask_parley, "Unknown tool name: 'remind'"),
    ("/ask public, Send Messages denied", ask_muted, MAY_NOT_POST),
    ("/ask public, View Channel denied", ask_blind, MAY_NOT_POST),
    ("Ask Parley public, Send Messages denied", ask_parley_in_public, MAY_NOT_POST),
    ("digest on, Send Messages denied", digest_on_muted, MAY_NOT_POST),
    ("/parley catchup, Send Messages denied", catchup_muted, ""),
    ("support desk's answer, Send Messages denied during the wait", support_question_muted_during_the_wait, ""),
    ("reminder due, owner lost Send Messages", later(deny("send_messages")), ""),
    ("reminder due, owner lost View Channel", later(deny("view_channel")), ""),
    ("reminder due, owner timed out", later(time_out), ""),
    ("reminder due, owner left or was banned", later(part), ""),
    ("/parley-admin schedule add, Send Messages denied", schedule_add_muted, MAY_NOT_POST),
    ("scheduled prompt due, owner lost Send Messages", later_scheduled(manager_muted), ""),
    ("scheduled prompt due, owner timed out", later_scheduled(time_out), ""),
]


@pytest.mark.parametrize(("path", "told"), [(p, t) for _, p, t in PATHS], ids=[name for name, _, _ in PATHS])
async def test_nothing_is_posted_where_its_member_may_not_post(
    path: Callable[[FakeDiscord, FakeLLM, RunningBot], Awaitable[str]],
    told: str,
    fake: FakeDiscord,
    llm: FakeLLM,
    bot: RunningBot,
) -> None:
    said = await path(fake, llm, bot)
    assert told in said
    assert fake.bot_messages(CHANNEL_ID) == []
    client = bot.client
    assert client is not None and client.archive is not None
    assert await client.archive.pending_reminders(GUILD_ID, OWNER) == (0, 0)
    assert await client.archive.pending_reminders(GUILD_ID, OWNER, prompts=True) == (0, 0)
