"""End-to-end: /parley catchup gives a member away for 300 messages a private summary of that range only."""

from __future__ import annotations

import asyncio
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import discord

from admission.optout import OPTED_OUT_REFUSAL
from bot import Parley
from records import OPTED_OUT_TEXT
from tests.fakes.fake_discord import (
    ALICE_ID,
    CAROL_ID,
    CHANNEL_ID,
    GUILD_ID,
    NEWCOMER_ROLE_ID,
    FakeDiscord,
    InteractionCall,
)
from tests.fakes.fake_llm import FakeLLM, ToolCall, echo, last_user_text
from tests.support.e2e_support import (
    MEMBER,
    MODERATOR,
    RunningBot,
    call_text,
    decided,
    eventually,
    run_command,
    say,
)


def catching_up(request: dict[str, Any]) -> Any:
    """The model: for the catch-up's structured output, a point about the first and the last line of each chunk,
    and one citing a line past the chunk's end; any other request is echoed."""
    tools = [tool["function"]["name"] for tool in request.get("tools", [])]
    if "final_result" not in tools:
        return echo(request)
    lines = [int(found) for found in re.findall(r"^\[(\d+)\]", last_user_text(request), re.MULTILINE)]
    points = [
        {"topic": "Deploy", "summary": "Bob talked about the deploy.", "line": lines[0]},
        {"topic": "Deploy", "summary": "Bob wrapped up.", "line": lines[-1]},
        {"topic": "Other", "summary": "Something nobody said.", "line": len(lines) + 1},
    ]
    return ToolCall("final_result", {"points": points})


def linked_ids(text: str) -> list[int]:
    return [int(found) for found in re.findall(rf"/channels/{GUILD_ID}/{CHANNEL_ID}/(\d+)\)", text)]


async def final_text(fake: FakeDiscord, calls: list[InteractionCall]) -> str:
    """The catch-up as the member finally sees it: the @original response, once edited into the summary."""
    token = calls[0].path.split("/")[-2]

    def edits() -> list[InteractionCall]:
        return [call for call in fake.interaction_calls if token in call.path and call.method == "PATCH"]

    await eventually(lambda: any("**Since" in call_text(call) for call in edits()), timeout=30)
    return "\n".join(call_text(call) for call in fake.interaction_calls if token in call.path)


async def test_a_member_away_for_300_messages_is_caught_up_on_them_alone(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    llm.handler = catching_up
    client = await bot.start()
    await say(fake, fake.bob_id, "before anything: the old plan")
    forgotten_at = await say(fake, fake.bob_id, "the plan before the forget")
    await run_command(fake, "forget", permissions=MODERATOR)
    own = await say(fake, ALICE_ID, "off to lunch, back in an hour")
    sent = [await say(fake, fake.bob_id, f"deploy note {number}: step {number} is done") for number in range(300)]
    asked = await say(fake, fake.bob_id, f"<@{ALICE_ID}> can you review the deploy when you are back?")
    await decided(client, asked)  # the bot has had every message
    assert client.archive is not None
    await client.archive.flush()

    calls = await run_command(fake, "catchup", permissions=MEMBER, user_id=ALICE_ID)
    assert calls[0].body is not None and calls[0].body["data"]["flags"] & discord.MessageFlags.ephemeral.flag
    text = await final_text(fake, calls)
    assert "**Since your last message here: 301 messages.**" in text
    in_range = {int(message["id"]) for message in [*sent, asked]}
    links = linked_ids(text)
    assert links and set(links) <= in_range
    assert int(sent[0]["id"]) in links
    assert int(own["id"]) not in links and int(forgotten_at["id"]) not in links
    assert f"[jump](https://discord.com/channels/{GUILD_ID}/{CHANNEL_ID}/{asked['id']})" in text
    assert "**Asked of you**" in text
    assert fake.bot_posts == []  # nothing in the channel: the catch-up is the member's alone
    # The progress line counted the parts as the model finished them; each part was one model call.
    parts = int(re.findall(r"of (\d+) parts done", text)[0])
    assert parts > 1 and len([r for r in llm.requests if "final_result" in str(r.get("tools"))]) == parts


async def test_without_read_message_history_there_is_no_catch_up(bot: RunningBot, fake: FakeDiscord) -> None:
    await bot.start()
    await say(fake, fake.bob_id, "something said here")
    cannot_read = MEMBER & ~discord.Permissions(read_message_history=True)
    [call] = await run_command(fake, "catchup", permissions=cannot_read, user_id=ALICE_ID)
    assert "Read Message History" in call_text(call)


async def test_the_archive_off_is_said_in_one_line(bot: RunningBot, fake: FakeDiscord) -> None:
    await bot.start(database_url="")
    [call] = await run_command(fake, "catchup", permissions=MEMBER, user_id=ALICE_ID)
    assert call_text(call) == "Catching up reads the archive, which is off here (DATABASE_URL is empty)."


async def test_a_catch_up_shows_the_model_nothing_of_a_member_who_opted_out(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """What Bob wrote before opting out is in the range as the placeholder only; Bob's own catch-up is refused,
    with no model call."""
    llm.handler = catching_up
    client = await bot.start()
    await say(fake, ALICE_ID, "off to lunch")
    await say(fake, fake.bob_id, "the secret launch date is friday")
    await decided(client, await say(fake, CAROL_ID, "sounds good"))  # the bot has had every message
    assert client.archive is not None
    await client.archive.flush()
    await client.admission.optouts.set(GUILD_ID, fake.bob_id, True)

    calls = await run_command(fake, "catchup", permissions=MEMBER, user_id=ALICE_ID)
    await final_text(fake, calls)
    sent = "\n".join(str(request["messages"]) for request in llm.requests)
    assert OPTED_OUT_TEXT in sent and "launch date" not in sent and "sounds good" in sent

    requests = len(llm.requests)
    [refused] = await run_command(fake, "catchup", permissions=MEMBER, user_id=fake.bob_id)
    assert call_text(refused) == OPTED_OUT_REFUSAL and len(llm.requests) == requests


async def a_busy_channel(client: Any, fake: FakeDiscord) -> None:
    """Alice was away while Bob wrote 300 long messages (a catch-up of several parts), all archived."""
    await say(fake, ALICE_ID, "off to lunch")
    wordy = "the deploy pipeline is still waiting on a review from someone on the platform team " * 2
    for number in range(300):
        await say(fake, fake.bob_id, f"note {number}: {wordy}")
    await decided(client, await say(fake, fake.bob_id, "that is all"))
    assert client.archive is not None
    await client.archive.flush()


def alices_tokens_at_each_call(client: Parley, llm: FakeLLM) -> list[int]:
    """The catch-up's model, noting Alice's tokens of the day as each call reaches it."""
    seen: list[int] = []

    def counting(request: dict[str, Any]) -> Any:
        seen.append(client.usage.member_tokens(GUILD_ID, ALICE_ID))
        return catching_up(request)

    llm.handler = counting
    return seen


async def test_a_catch_up_stops_at_the_members_tokens_a_day_call_by_call(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """Alice's role gives her 3,000 tokens a day; a busy channel takes several chunks. Every chunk's model call
    starts while her tokens are under 3,000, the rest are not made, and the catch-up she gets keeps the parts done
    and says once why it stopped and when her tokens reset."""
    fake.give_role(ALICE_ID, NEWCOMER_ROLE_ID)
    client = await bot.start(role_limits=f"{NEWCOMER_ROLE_ID}:0:3000")
    seen_before_each_call = alices_tokens_at_each_call(client, llm)
    await a_busy_channel(client, fake)

    calls = await run_command(fake, "catchup", permissions=MEMBER, user_id=ALICE_ID)
    text = await final_text(fake, calls)
    parts = int(re.findall(r"of (\d+) parts done", text)[0])
    assert len(seen_before_each_call) < parts, "every part was written, past the member's tokens"
    assert all(spent < 3000 for spent in seen_before_each_call), seen_before_each_call
    assert "Deploy" in text  # the parts written before the stop are kept
    midnight = datetime.combine(client.usage.day + timedelta(days=1), datetime.min.time(), UTC)
    assert text.count("your role gives you") == 1 and f"<t:{int(midnight.timestamp())}:R>" in text


async def test_two_catch_ups_at_once_pass_the_members_tokens_by_one_part_each_at_most(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """Alice races two catch-ups: each part still asks first, so each catch-up passes her 3,000 tokens by the one
    part under way when they ran out, no more (a budget counts what was spent, not what is being spent)."""
    fake.give_role(ALICE_ID, NEWCOMER_ROLE_ID)
    client = await bot.start(role_limits=f"{NEWCOMER_ROLE_ID}:0:3000")
    seen_before_each_call = alices_tokens_at_each_call(client, llm)
    await a_busy_channel(client, fake)
    first, second = await asyncio.gather(
        *(run_command(fake, "catchup", permissions=MEMBER, user_id=ALICE_ID) for _ in range(2))
    )
    texts = [await final_text(fake, calls) for calls in (first, second)]
    assert all(text.count("your role gives you") == 1 for text in texts), texts
    # Not "every call saw her under 3,000": each part asks before its call, but the other catch-up's part may be
    # counted between that question and the call reaching the model. What holds is the number of calls: alone, a
    # catch-up makes 2 before her tokens are spent; racing, each may add the part it had under way.
    assert len(seen_before_each_call) <= 2 + 2
