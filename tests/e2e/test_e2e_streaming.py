"""End-to-end: streamed answers, their Stop button and the Regenerate command, through the real discord.py
client against the fake Discord and a fake model server that streams."""

from __future__ import annotations

import asyncio
import copy
import itertools
import statistics
from typing import Any

import pytest

from discord_io import split_message
from edge.streaming import ANSWER_FINISHED, BROKE_OFF, CANNOT_REGENERATE, NOT_YOUR_ANSWER, REGENERATING
from tests.fakes.fake_discord import ALICE_ID, BOB_ID, BOT_ID, CHANNEL_ID, FakeDiscord
from tests.fakes.fake_llm import BreakOff, FakeLLM, ToolCall, echo
from tests.support.e2e_support import (
    MODERATOR,
    RunningBot,
    assert_ephemeral_one_liner,
    click,
    eventually,
    request_texts,
    say,
    use_message_command,
)

PROSE = " ".join(f"Sentence number {i} says a little more about it." for i in range(40))


def slow(llm: FakeLLM, *, delay: float = 0.03, words: int = 6) -> None:
    """Make the fake model write `words` words every `delay` seconds (PROSE, 360 words, then takes 1.8 s: several
    of the edit intervals these tests set, 0.2-0.3 s)."""
    llm.stream_delay, llm.words_per_chunk = delay, words


def answer_posts(fake: FakeDiscord) -> list[str]:
    """The bot's messages in #general as they stand now."""
    return [message["content"] for message in fake.bot_messages(CHANNEL_ID)]


def stop_id(message: dict[str, Any]) -> str | None:
    """The custom id of the message's button, if it has one."""
    buttons = [button for row in message.get("components") or [] for button in row.get("components", [])]
    return buttons[0]["custom_id"] if buttons else None


async def ask(fake: FakeDiscord, text: str, author: int = ALICE_ID) -> dict[str, Any]:
    return await say(fake, author, f"<@{BOT_ID}> {text}")


@pytest.mark.parametrize("streamed", [True, False])
async def test_answer_ends_as_the_non_streamed_posts(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM, streamed: bool
) -> None:
    """Streamed or not, the answer ends as exactly the posts the splitter makes of it; streamed, it was edited
    as it grew, never twice within STREAM_EDIT_SECONDS in the channel."""
    llm.handler = lambda request: PROSE
    if streamed:  # Not streamed, the answer is posted whole: how fast the model wrote it changes nothing.
        slow(llm)
    client = await bot.start(stream_answers=streamed, stream_edit_seconds=0.3)
    await ask(fake, "tell me about it")
    await fake.wait_for(lambda: answer_posts(fake) == split_message(PROSE), timeout=15, what="the whole answer")
    # The answer noted as the channel's latest: its posts and edits are all made, any still to come would show now.
    await eventually(lambda: client.streams.latest(CHANNEL_ID) is not None)
    assert answer_posts(fake) == split_message(PROSE)
    edits = fake.edits_in(CHANNEL_ID)
    if streamed:
        assert edits, "the answer should have grown by edits"
        gaps = [later.at - earlier.at for earlier, later in itertools.pairwise(edits)]
        # Measured where the fake receives them: an edit held up on a loaded machine arrives late and the next one
        # on time, so a single gap can come in under the 0.3 s the bot kept. Without pacing the gaps would be a few
        # milliseconds; with it, none is under half the interval and the typical one is the interval.
        assert all(gap >= 0.15 for gap in gaps), gaps
        assert statistics.median(gaps) >= 0.27, gaps
    else:
        assert edits == []


async def test_long_streamed_answer_with_code_ends_as_three_messages(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """A 5,000-character streamed answer with a code block ends as 3 messages, fences balanced in each, every
    line once; no post or edit ever went over 2,000 characters."""
    code = "\n".join(f"print('line {i}')" for i in range(220))
    answer = f"Here is the script you asked for.\n\n```python\n{code}\n```\n\nRun it with python3. {PROSE[:1200]}"
    assert 4800 < len(answer) < 5600
    llm.handler = lambda request: answer
    slow(llm, delay=0.01, words=4)
    await bot.start(stream_edit_seconds=0.2)
    await ask(fake, "write me a script")
    await fake.wait_for(lambda: answer_posts(fake) == split_message(answer), timeout=20, what="the whole answer")
    posts = answer_posts(fake)
    assert len(posts) == 3
    assert all(post.count("```") % 2 == 0 for post in posts)
    lines = [line for post in posts for line in post.splitlines() if line.startswith("print(")]
    assert lines == code.splitlines()
    written = [post.body.get("content") or "" for post in fake.posts_in(CHANNEL_ID)]
    written += [edit.body.get("content") or "" for edit in fake.edits_in(CHANNEL_ID)]
    assert all(len(text) <= 2000 for text in written)


async def test_rate_limited_edit_loses_no_text(bot: RunningBot, fake: FakeDiscord, llm: FakeLLM) -> None:
    """A 429 on an edit is waited out and the answer still ends whole."""
    llm.handler = lambda request: PROSE
    slow(llm, delay=0.015)  # 0.9 s: several edits at 0.2 s, the first one refused
    fake.fail_next_edits(1, status=429, retry_after=0.3)
    await bot.start(stream_edit_seconds=0.2)
    await ask(fake, "tell me about it")
    await fake.wait_for(lambda: answer_posts(fake) == split_message(PROSE), timeout=15, what="the whole answer")
    assert any(r.method == "PATCH" and r.status == 429 for r in fake.requests)


async def test_model_failure_mid_stream_leaves_one_clear_line(bot: RunningBot, fake: FakeDiscord, llm: FakeLLM) -> None:
    """A model that breaks off after its first sentences leaves one line saying so, not half an answer."""
    llm.handler = lambda request: BreakOff(PROSE[:600])
    slow(llm, delay=0.05, words=6)
    await bot.start(stream_edit_seconds=0.2)
    await ask(fake, "tell me about it")
    await fake.wait_for(lambda: answer_posts(fake) == [BROKE_OFF], timeout=15, what="the one line")
    assert any(post.content != BROKE_OFF for post in fake.posts_in(CHANNEL_ID)) or fake.edits_in(CHANNEL_ID)
    [message] = fake.bot_messages(CHANNEL_ID)
    assert stop_id(message) is None


async def test_stop_keeps_the_partial_answer_marked_in_the_history(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """Only the asker (or a message manager) can stop; Stop ends the stream, the post ends "(stopped)" without
    its button, and the next request's history holds the partial answer so marked."""
    llm.handler = lambda request: PROSE * 3
    slow(llm, delay=0.05, words=2)
    client = await bot.start(stream_edit_seconds=0.2)
    await ask(fake, "tell me everything")
    await fake.wait_for(lambda: any(stop_id(m) for m in fake.bot_messages(CHANNEL_ID)), timeout=10, what="Stop")
    [message] = fake.bot_messages(CHANNEL_ID)
    await eventually(lambda: client.streams.live_on(int(message["id"])) is not None)
    custom_id = stop_id(message)
    assert custom_id is not None

    refused = await click(fake, message, custom_id, user_id=BOB_ID)
    assert assert_ephemeral_one_liner(refused) == NOT_YOUR_ANSWER
    # As a member's client still shows it: the button of a message since edited, or of a bot since restarted.
    stale = copy.deepcopy(message)
    await click(fake, message, custom_id, user_id=ALICE_ID)
    await fake.wait_for(lambda: answer_posts(fake)[0].endswith("(stopped)"), timeout=10, what="stopped")
    [stopped] = fake.bot_messages(CHANNEL_ID)
    assert stop_id(stopped) is None and len(stopped["content"]) < len(PROSE)

    llm.handler = echo
    slow(llm, delay=0, words=32)
    await ask(fake, "and now?")
    await fake.wait_for(lambda: len(llm.requests) == 2, what="the next request")
    assistant = [m["content"] for m in llm.requests[1]["messages"] if m["role"] == "assistant"]
    assert assistant == [stopped["content"]]

    late = await click(fake, stale, custom_id, user_id=ALICE_ID, permissions=MODERATOR)
    assert assert_ephemeral_one_liner(late) == ANSWER_FINISHED


async def test_regenerate_replaces_the_answer_and_its_history(bot: RunningBot, fake: FakeDiscord, llm: FakeLLM) -> None:
    """Regenerate on the latest answer writes a new one into the same post, and the model history holds the
    new answer in place of the old; someone else's Regenerate is refused."""
    answers = iter(["The first answer.", "The second answer.", "Noted."])
    llm.handler = lambda request: next(answers)
    client = await bot.start()
    await ask(fake, "what is it?")
    await fake.wait_for(lambda: answer_posts(fake) == ["The first answer."], what="first answer")
    await eventually(lambda: client.streams.latest(CHANNEL_ID) is not None)
    [message] = fake.bot_messages(CHANNEL_ID)

    refused = await use_message_command(fake, "Regenerate", message, user_id=BOB_ID)
    assert assert_ephemeral_one_liner(refused) == NOT_YOUR_ANSWER
    calls = await use_message_command(fake, "Regenerate", message, user_id=ALICE_ID)
    assert assert_ephemeral_one_liner(calls) == REGENERATING
    await fake.wait_for(lambda: answer_posts(fake) == ["The second answer."], what="second answer")
    assert fake.bot_messages(CHANNEL_ID)[0]["id"] == message["id"]
    assert request_texts(llm.requests[1])[-1] == request_texts(llm.requests[0])[-1]

    await ask(fake, "thanks")
    await fake.wait_for(lambda: len(llm.requests) == 3, what="the next request")
    assistant = [m["content"] for m in llm.requests[2]["messages"] if m["role"] == "assistant"]
    assert assistant == ["The second answer."]


async def test_regenerate_works_on_the_latest_answer_after_a_restart(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """After a redeploy within the conversation, Regenerate still rewrites the latest answer; an older one is not."""
    answers = iter(["The first answer.", "The second answer.", "The rewritten answer."])
    llm.handler = lambda request: next(answers)
    await bot.start()
    await ask(fake, "what is it?")
    await fake.wait_for(lambda: answer_posts(fake) == ["The first answer."], what="first answer")
    await ask(fake, "and the other?")
    await fake.wait_for(lambda: answer_posts(fake)[-1:] == ["The second answer."], what="second answer")
    older, latest = fake.bot_messages(CHANNEL_ID)
    await bot.stop()
    await bot.start()

    refused = await use_message_command(fake, "Regenerate", older, user_id=ALICE_ID)
    assert assert_ephemeral_one_liner(refused) == CANNOT_REGENERATE
    calls = await use_message_command(fake, "Regenerate", latest, user_id=ALICE_ID)
    assert assert_ephemeral_one_liner(calls) == REGENERATING
    await fake.wait_for(lambda: answer_posts(fake) == ["The first answer.", "The rewritten answer."], what="rewrite")
    assert request_texts(llm.requests[2])[-1] == request_texts(llm.requests[1])[-1]


async def test_edits_never_ping(bot: RunningBot, fake: FakeDiscord, llm: FakeLLM) -> None:
    """Whatever a streamed answer grows to say, no edit pings @everyone, @here, a role or anyone but the asker."""
    llm.handler = lambda request: f"Hello there. @everyone @here <@{BOB_ID}> <@&{fake.bot_role_id}> " + PROSE
    slow(llm, delay=0.015)  # 0.9 s: several edits at 0.2 s
    await bot.start(stream_edit_seconds=0.2)
    await ask(fake, "announce it")
    await fake.wait_for(lambda: len(fake.edits_in(CHANNEL_ID)) >= 2, timeout=15, what="edits")
    await eventually(lambda: not any(stop_id(m) for m in fake.bot_messages(CHANNEL_ID)), timeout=15)
    for edit in fake.edits_in(CHANNEL_ID):
        allowed = edit.body["allowed_mentions"]
        assert allowed["parse"] == [] and not allowed.get("roles") and not allowed.get("everyone")
        assert {int(user) for user in allowed.get("users", [])} <= {ALICE_ID}
    assert all(int(user["id"]) != BOB_ID for m in fake.bot_messages(CHANNEL_ID) for user in m["mentions"])


async def test_a_slow_tool_round_shows_a_status(bot: RunningBot, fake: FakeDiscord, llm: FakeLLM) -> None:
    """While a tool round runs, the answer shows what it is doing; the answer then takes its place."""
    replies = iter([ToolCall("search_history", {"query": "deploy"}), "We deployed on Monday."])

    async def handler(request: dict[str, Any]) -> Any:
        reply = next(replies)
        if isinstance(reply, str):
            await asyncio.sleep(1.0)  # the model takes its time reading the results
        return reply

    llm.handler = handler
    await bot.start()
    await ask(fake, "when did we deploy?")
    await fake.wait_for(lambda: answer_posts(fake) == ["We deployed on Monday."], timeout=10, what="the answer")
    [post] = fake.posts_in(CHANNEL_ID)
    assert post.body["content"] == "*searching the channel's history…*"
