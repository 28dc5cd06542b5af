"""A member's tokens a day and a server's hold call by call: whatever I ask Parley for that takes several model calls
(a catch-up, an answer that keeps reading the channel, a Regenerate, a channel's digest, a scheduled prompt), it makes
its next call only while my role's tokens for today (ROLE_LIMITS) and the server's (SERVER_TOKENS_PER_DAY) are not
used up; at the budget it stops, keeps what it had done, and tells me once that it stopped and when the budget
resets."""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import discord
import pytest

from tests.e2e.test_e2e_ask import ask as ask_command
from tests.e2e.test_e2e_budgets import fill_the_archive
from tests.e2e.test_e2e_catchup import a_busy_channel, final_text
from tests.e2e.test_e2e_digests import at, set_daily
from tests.e2e.test_e2e_reminders import moved_on
from tests.e2e.test_e2e_streaming import answer_posts
from tests.e2e.test_e2e_support import COVERED, THRESHOLD, add_handbook, after_the_wait
from tests.fakes.fake_discord import ALICE_ID, BOT_ID, CHANNEL_ID, GUILD_ID, NEWCOMER_ROLE_ID, FakeDiscord
from tests.fakes.fake_llm import FakeLLM, ToolCall, last_user_text
from tests.support.e2e_support import MEMBER as MEMBER_PERMISSIONS
from tests.support.e2e_support import (
    RunningBot,
    call_text,
    eventually,
    group_command,
    option,
    run_command,
    say,
    use_message_command,
)

# A scheduled prompt's owner: Manage Server.
ADMIN = MEMBER_PERMISSIONS | discord.Permissions(manage_guild=True)
# The budget each row runs into: a few of the operation's model calls fit in it, not all of them.
BUDGET = 3000
MEMBER_STOP = "you have used the share of Parley's tokens your role gives you today"
SERVER_STOP = "this server has used up Parley's token budget for today"
# A point of a part summarised before the stop.
KEPT_PART = "Bob on the deploy."


def wants_more_calls(request: dict[str, Any]) -> Any:
    """A model that never finishes on its own: a part's points for a catch-up or digest (one call each, as many
    parts as the range has), and another read of the channel whenever it is offered a tool, so an answer keeps
    going round until something stops it."""
    tools = [tool["function"]["name"] for tool in request.get("tools", [])]
    if "final_result" in tools:
        first = re.findall(r"^\[(\d+)\]", last_user_text(request), re.MULTILINE)[0]
        point = {"topic": "Deploy", "summary": KEPT_PART, "line": first}
        return ToolCall("final_result", {"points": [point]})
    if tools:
        return ToolCall("get_recent_messages", {"limit": 100})
    return "From what I read: the deploy moved to Friday."


# --- The operations that make several model calls ------------------------------------------------------------------


async def catchup(bot: RunningBot, fake: FakeDiscord, llm: FakeLLM, settings: dict[str, Any]) -> str:
    """`/parley catchup` of a busy channel: one model call per part."""
    client = await bot.start(**settings)
    await a_busy_channel(client, fake)
    calls = await run_command(fake, "catchup", permissions=MEMBER_PERMISSIONS, user_id=ALICE_ID)
    return await final_text(fake, calls)


async def answer_tool_rounds(bot: RunningBot, fake: FakeDiscord, llm: FakeLLM, settings: dict[str, Any]) -> str:
    """A mention answered by a model that reads the channel again at every tool round."""
    client = await bot.start(max_model_requests=20, **settings)
    await fill_the_archive(fake, client, count=5)
    await say(fake, ALICE_ID, f"<@{BOT_ID}> what happened to the deploy?")
    [post] = await fake.wait_for_posts(1)
    return post.content


async def ask_tool_rounds(bot: RunningBot, fake: FakeDiscord, llm: FakeLLM, settings: dict[str, Any]) -> str:
    """`/ask`, answered the same way: a command's answer goes round the same tool rounds."""
    client = await bot.start(max_model_requests=20, **settings)
    await fill_the_archive(fake, client, count=5)
    calls = await ask_command(fake, "what happened to the deploy?")
    await fake.wait_for(
        lambda: any("I stopped there" in call_text(call) for call in fake.interaction_calls), what="the stop"
    )
    return "\n".join(call_text(call) for call in calls if call.body)


async def regenerate(bot: RunningBot, fake: FakeDiscord, llm: FakeLLM, settings: dict[str, Any]) -> str:
    """Alice's answer, then her Regenerate of it, whose model keeps reading the channel."""
    client = await bot.start(max_model_requests=20, **settings)
    await fill_the_archive(fake, client, count=5)
    llm.handler = lambda request: "The first answer."
    await say(fake, ALICE_ID, f"<@{BOT_ID}> what happened to the deploy?")
    await fake.wait_for(lambda: answer_posts(fake) == ["The first answer."], what="the first answer")
    await eventually(lambda: client.streams.latest(CHANNEL_ID) is not None)
    [message] = fake.bot_messages(CHANNEL_ID)
    llm.handler = wants_more_calls
    await use_message_command(fake, "Regenerate", message, user_id=ALICE_ID)
    await fake.wait_for(lambda: "I stopped there" in " ".join(answer_posts(fake)), what="the regenerated answer")
    return " ".join(answer_posts(fake))


async def digest(bot: RunningBot, fake: FakeDiscord, llm: FakeLLM, settings: dict[str, Any]) -> str:
    """A channel's daily digest of a busy day: one model call per part, asked for by no member."""
    client = await bot.start(**settings)
    due = await set_daily(bot, fake)
    await a_busy_channel(client, fake)
    await at(bot, due + timedelta(seconds=30))
    return "\n".join(message.content for message in fake.posts_in(CHANNEL_ID))


async def support_answer_tool_rounds(bot: RunningBot, fake: FakeDiscord, llm: FakeLLM, settings: dict[str, Any]) -> str:
    """A question nobody addressed in a support channel, answered from the documents by the desk after its wait, by a
    model that reads the channel again at every tool round."""
    client = await bot.start(max_model_requests=20, knowledge_answer_threshold=THRESHOLD, **settings)
    await fill_the_archive(fake, client, count=5)
    await client.desk.set_support(CHANNEL_ID, GUILD_ID, True, set_by=ALICE_ID)
    await add_handbook(client)
    await say(fake, ALICE_ID, COVERED)
    await after_the_wait(bot, client)
    [post] = await fake.wait_for_posts(1)
    return post.content


# --- The budgets ---------------------------------------------------------------------------------------------------

# Alice's role gives her BUDGET tokens a day; the server has no budget.
MEMBER = {"role_limits": f"{NEWCOMER_ROLE_ID}:0:{BUDGET}"}
# The server has BUDGET tokens a day; Alice has no limit of her own.
SERVER = {"server_tokens_per_day": BUDGET}


@dataclass(frozen=True)
class Row:
    """An operation, the budget it runs into, and the line that says it stopped there."""

    run: Callable[[RunningBot, FakeDiscord, FakeLLM, dict[str, Any]], Awaitable[str]]
    settings: dict[str, Any]
    # What the member (or, for a digest, the channel) is told once about the stop.
    told: str
    # What was done before the stop and is shown all the same (an answer's tool rounds wrote nothing to show).
    kept: str = ""


ROWS = [
    pytest.param(Row(catchup, MEMBER, MEMBER_STOP, KEPT_PART), id="catchup-member"),
    pytest.param(Row(catchup, SERVER, SERVER_STOP, KEPT_PART), id="catchup-server"),
    pytest.param(Row(answer_tool_rounds, MEMBER, MEMBER_STOP), id="answer-tool-rounds-member"),
    pytest.param(Row(answer_tool_rounds, SERVER, SERVER_STOP), id="answer-tool-rounds-server"),
    pytest.param(Row(ask_tool_rounds, MEMBER, MEMBER_STOP), id="ask-command-member"),
    pytest.param(Row(ask_tool_rounds, SERVER, SERVER_STOP), id="ask-command-server"),
    pytest.param(Row(regenerate, MEMBER, MEMBER_STOP), id="regenerate-member"),
    pytest.param(Row(regenerate, SERVER, SERVER_STOP), id="regenerate-server"),
    pytest.param(Row(support_answer_tool_rounds, MEMBER, MEMBER_STOP), id="support-desk-answer-member"),
    pytest.param(Row(support_answer_tool_rounds, SERVER, SERVER_STOP), id="support-desk-answer-server"),
    # Asked for by no member: a digest has the server's budget only.
    pytest.param(Row(digest, SERVER, "the server used up its token budget", KEPT_PART), id="digest-server"),
]


@pytest.mark.parametrize("row", ROWS)
async def test_a_budget_holds_call_by_call(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM, archive_url: str, row: Row
) -> None:
    fake.give_role(ALICE_ID, NEWCOMER_ROLE_ID)
    llm.handler = wants_more_calls
    shown = await row.run(bot, fake, llm, {"database_url": archive_url, **row.settings})
    # Every model call in the test is Alice's (or the server's): the tokens spent before each call are what the
    # budget counts, and each call started below it.
    spent_before = [sum(usage["total_tokens"] for usage in llm.usages[:index]) for index in range(len(llm.usages))]
    assert all(spent < BUDGET for spent in spent_before), spent_before
    # It stopped at the budget, not at its end, and said so once.
    assert shown.count(row.told) == 1 and row.kept in shown, shown
    client = bot.client
    assert client is not None
    await eventually(lambda: client.usage.server_tokens(GUILD_ID) >= BUDGET)


async def test_a_scheduled_prompt_holds_the_servers_budget_call_by_call_and_posts_nothing_it_could_not_finish(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM, archive_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Asked for by no member, a scheduled prompt has the server's budget only; stopped there, nobody is waiting for
    its answer, so nothing is posted and the log says why (its next time is tried as usual)."""
    llm.handler = wants_more_calls
    client = await bot.start(database_url=archive_url, max_model_requests=20, **SERVER)
    await fill_the_archive(fake, client, count=5)
    options = [option("prompt", "What happened to the deploy this week?"), option("when", "every 1h")]
    said = await group_command(fake, "schedule", "add", options, permissions=ADMIN)
    assert said.startswith("Scheduled prompt ")
    with caplog.at_level(logging.INFO, "parley.reminders"):
        await moved_on(bot, client, 3600)
        await moved_on(bot, client, 1)  # a pass begun before the clock moved may have ended the first wait
        await client.reminders.runs_finished()
    spent_before = [sum(usage["total_tokens"] for usage in llm.usages[:index]) for index in range(len(llm.usages))]
    assert len(spent_before) > 1 and all(spent < BUDGET for spent in spent_before), spent_before
    assert fake.bot_messages(CHANNEL_ID) == []
    assert "not posted: server " in caplog.text and "spent its token budget during the run" in caplog.text
    assert client.usage.server_tokens(GUILD_ID) >= BUDGET
