"""End-to-end: what the model sees of a channel is exactly its conversation (issue: five context bugs)."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.fake_discord import ALICE_ID, BOB_ID, BOT_ID, CAROL_ID, CHANNEL_ID, FakeDiscord
from tests.fakes.fake_llm import FakeLLM
from tests.support.e2e_support import (
    RunningBot,
    assert_ephemeral_one_liner,
    eventually,
    request_texts,
    run_command,
    say,
)

BUSY_LINES = 50


def lines_seen(request_text: str) -> list[int]:
    """Which `line-NN` messages of the busy channel a request quotes."""
    return [n for n in range(BUSY_LINES) if f"line-{n:02d}" in request_text]


async def test_busy_channel_context_from_discord_is_the_latest_before_the_question(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """With the archive off, a new conversation sees the 20 messages just before the question, not the hour's first."""
    for n in range(BUSY_LINES):
        fake.add_history(CHANNEL_ID, BOB_ID, f"line-{n:02d}")
    await bot.start(database_url="")
    await say(fake, ALICE_ID, f"<@{BOT_ID}> what was the last line?")
    await fake.wait_for_posts(1)
    assert lines_seen(request_texts(llm.requests[0])[-1]) == list(range(30, 50))


async def test_busy_channel_context_from_the_archive_is_the_latest_before_the_question(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """With the archive on and covering the period, the context is the same 20 latest messages."""
    client = await bot.start()
    client.coverage.watching_since -= timedelta(hours=2)  # as if the bot had been up for two hours
    for n in range(BUSY_LINES):
        await say(fake, BOB_ID, f"line-{n:02d}")
    await say(fake, ALICE_ID, f"<@{BOT_ID}> what was the last line?")
    await fake.wait_for_posts(1)
    assert lines_seen(request_texts(llm.requests[0])[-1]) == list(range(30, 50))


@pytest.mark.parametrize("archive", [True, False], ids=["archive", "no-archive"])
async def test_nothing_from_before_forget_reaches_the_next_conversation(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM, tmp_path: Path, archive: bool
) -> None:
    """After /parley-admin forget, the next conversation's request holds nothing said before it, archive on or off."""
    client = await bot.start(database_url=f"sqlite:///{tmp_path / 'parley.db'}" if archive else "")
    client.coverage.watching_since -= timedelta(hours=2)  # the archive path, where there is one
    await say(fake, ALICE_ID, f"<@{BOT_ID}> which plans do we have?")
    await fake.wait_for_posts(1)
    await say(fake, BOB_ID, "the old plan was pineapple")
    await say(fake, CAROL_ID, "and the backup plan was mango")
    assert_ephemeral_one_liner(await run_command(fake, "forget"))
    await say(fake, ALICE_ID, f"<@{BOT_ID}> which plans do we have now?")
    await fake.wait_for_posts(2)
    text = "\n".join(request_texts(llm.requests[1]))
    assert "which plans do we have now?" in text
    assert not any(word in text for word in ("pineapple", "mango", "which plans do we have?"))


async def test_history_tools_off_keeps_the_archive_context(bot: RunningBot, fake: FakeDiscord, llm: FakeLLM) -> None:
    """HISTORY_TOOLS=false offers the model no tools, yet context still comes from the archive."""
    # Catch-up off: its history reads would hide whether context read Discord's.
    client = await bot.start(history_tools=False, backfill_max_messages=0)
    client.coverage.watching_since -= timedelta(hours=2)
    await say(fake, BOB_ID, "the build server is down again")
    await say(fake, ALICE_ID, f"<@{BOT_ID}> any idea why?")
    await fake.wait_for_posts(1)
    [request] = llm.requests
    assert not request.get("tools")
    assert "the build server is down again" in request_texts(request)[-1]
    assert not any(request.method == "GET" and "/messages" in request.path for request in fake.requests)


@pytest.mark.parametrize("archive", [True, False], ids=["archive", "no-archive"])
async def test_a_mention_after_the_conversation_ended_sees_the_bots_last_exchange(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM, tmp_path: Path, archive: bool
) -> None:
    """Three minutes after an answer, a new conversation's request holds the earlier question and answer."""
    llm.handler = lambda request: "Run `make deploy ENV=prod`." if len(llm.requests) == 1 else "Same with ENV=staging."
    client = await bot.start(database_url=f"sqlite:///{tmp_path / 'parley.db'}" if archive else "")
    client.coverage.watching_since -= timedelta(hours=2)  # the archive path, where there is one
    await say(fake, ALICE_ID, f"<@{BOT_ID}> how do I deploy to prod?")
    await fake.wait_for_posts(1)
    await eventually(lambda: getattr(client.manager.get(CHANNEL_ID), "bot_turns", 0) == 1)
    three_minutes_on = client.manager.clock() + timedelta(minutes=3)
    client.manager.clock = lambda: three_minutes_on  # the conversation timed out
    assert client.manager.get(CHANNEL_ID) is None
    await say(fake, ALICE_ID, f"<@{BOT_ID}> and for staging?")
    await fake.wait_for_posts(2)
    text = "\n".join(request_texts(llm.requests[1]))
    assert "how do I deploy to prod?" in text and "Run `make deploy ENV=prod`." in text
    assert text.count("how do I deploy to prod?") == 1


async def test_a_message_posted_while_the_model_writes_reaches_the_next_request_once(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """A message sent while an answer is being written is in the next request, exactly once."""
    writing, release = asyncio.Event(), asyncio.Event()

    async def slow_first_answer(request: dict[str, Any]) -> str:
        if len(llm.requests) == 1:
            writing.set()
            await release.wait()
            return "Checking the deploy list."
        return "prod-7 is the one."

    llm.handler = slow_first_answer
    await bot.start()
    await say(fake, ALICE_ID, f"<@{BOT_ID}> which server failed?")
    await writing.wait()
    await say(fake, BOB_ID, "it was prod-7 again")
    release.set()
    await fake.wait_for_posts(1)
    await say(fake, ALICE_ID, "so which one was it?")
    await fake.wait_for_posts(2)
    assert "prod-7" not in "\n".join(request_texts(llm.requests[0]))
    assert "\n".join(request_texts(llm.requests[1])).count("it was prod-7 again") == 1


@pytest.mark.parametrize("archive", [True, False], ids=["archive", "no-archive"])
async def test_deleted_and_edited_messages_reach_the_next_request_as_they_now_stand(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM, tmp_path: Path, archive: bool
) -> None:
    """Mid-conversation, a deleted message's text is gone from the next request and an edited one reads anew."""
    llm.handler = lambda request: "Noted."  # not an echo: the model's own words are not rewritten
    await bot.start(database_url=f"sqlite:///{tmp_path / 'parley.db'}" if archive else "")
    secret = await say(fake, BOB_ID, "oops my password is hunter2")
    plan = await say(fake, CAROL_ID, "we deploy to staging-1 today")
    await say(fake, ALICE_ID, f"<@{BOT_ID}> where do we deploy?")
    await fake.wait_for_posts(1)
    assert "hunter2" in "\n".join(request_texts(llm.requests[0]))
    await fake.delete_messages(CHANNEL_ID, int(secret["id"]))
    await fake.edit_user_message(CHANNEL_ID, int(plan["id"]), "we deploy to staging-2 today")
    await say(fake, ALICE_ID, f"<@{BOT_ID}> and where exactly?")
    await fake.wait_for_posts(2)
    text = "\n".join(request_texts(llm.requests[1]))
    assert "hunter2" not in text and "staging-1" not in text
    assert text.count("we deploy to staging-2 today") == 1
