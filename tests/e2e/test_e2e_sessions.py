"""End-to-end: `python bot.py` restarted in the middle of a conversation picks it up from the archive."""

from __future__ import annotations

import asyncio
import logging
import signal
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from archive import Archive
from bot import Parley
from tests.fakes.fake_discord import ALICE_ID, BOT_ID, CHANNEL_ID, FakeDiscord
from tests.fakes.fake_llm import FakeLLM, echo
from tests.support.e2e_support import (
    RunningBot,
    bot_environment,
    eventually,
    request_texts,
    run_command,
    say,
    start_bot_py,
)

# Long enough that no answer, even on a loaded machine, outlasts a conversation.
TIMEOUT = 3.0


def kept_turns(database: Path) -> int:
    """The bot turns of the channel's conversation as committed to the archive (0 if none is kept)."""
    with sqlite3.connect(database) as db:
        try:
            rows = db.execute(
                "SELECT json_extract(state, '$.bot_turns') FROM conversations WHERE channel_id = ?", (CHANNEL_ID,)
            ).fetchall()
        except sqlite3.OperationalError:  # not migrated yet
            return 0
    return int(rows[0][0]) if rows else 0


@pytest.mark.slow
@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
async def test_conversation_continues_after_restart(
    fake: FakeDiscord, llm: FakeLLM, tmp_path: Path, stop: signal.Signals
) -> None:
    """A follow-up without a mention after a restart is answered, with the earlier turns in the model's history."""
    database = tmp_path / "parley.db"
    env = bot_environment(fake, llm, database)
    first = await start_bot_py(env, tmp_path)
    second: asyncio.subprocess.Process | None = None
    try:
        await fake.wait_for_ready(timeout=30)
        await say(fake, ALICE_ID, f"<@{BOT_ID}> remember that my favourite animal is the ferret")
        await fake.wait_for_posts(1, timeout=15)
        # A crash loses at most the archive's last commit interval: wait until the answer is committed.
        await eventually(lambda: kept_turns(database) >= 1, timeout=15)
        first.send_signal(stop)
        await asyncio.wait_for(first.wait(), 15)

        second = await start_bot_py(env, tmp_path)
        await fake.wait_for(lambda: len(fake.identifies) >= 2, timeout=30, what="second IDENTIFY")
        await fake.wait_for_ready(timeout=30)
        await say(fake, ALICE_ID, "which animal was that again?")
        posts = await fake.wait_for_posts(2, timeout=15)
    finally:
        for process in (first, second):
            if process is not None and process.returncode is None:
                process.kill()
                await process.wait()
    assert "which animal was that again?" in posts[1].content
    earlier = request_texts(llm.requests[-1])[:-1]
    assert any("ferret" in text for text in earlier), earlier


async def answer_recorded(client: Parley) -> None:
    """Wait until the answer is in the conversation's model history (just after its post): there is something to
    summarise once the conversation times out."""
    conversation = client.manager.get(CHANNEL_ID)
    assert conversation is not None
    await eventually(lambda: bool(conversation.llm_history))


async def conversation_summarised(bot: RunningBot, fake: FakeDiscord) -> Archive:
    """Start Parley, have a conversation time out, and wait until the archive keeps its summary; the archive."""
    client = await bot.start(conversation_timeout_seconds=TIMEOUT)
    await say(fake, ALICE_ID, f"<@{BOT_ID}> my favourite animal is the ferret")
    await fake.wait_for_posts(1)
    await answer_recorded(client)
    bot.clock.advance(TIMEOUT)
    await eventually(lambda: client.manager.get(CHANNEL_ID) is None)
    archive = client.archive
    assert archive is not None
    async with asyncio.timeout(10):
        while not await archive.summaries(CHANNEL_ID):  # noqa: ASYNC110 - the archive has no event to wait on
            await asyncio.sleep(0.05)
    return archive


async def test_next_conversation_starts_with_the_summary_of_the_last(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """A conversation that timed out is summarised, and the channel's next one starts with that summary quoted."""
    await conversation_summarised(bot, fake)
    summary_request = llm.requests[-1]
    assert "ferret" in request_texts(summary_request)[-1]
    await say(fake, ALICE_ID, f"<@{BOT_ID}> hello again")
    await fake.wait_for_posts(2)
    first_prompt = request_texts(llm.requests[-1])[-1]
    assert "<earlier_conversations>" in first_prompt
    assert first_prompt.index("<earlier_conversations>") < first_prompt.index("hello again")


async def test_no_summary_is_kept_of_a_message_deleted_while_it_was_written(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    """A message deleted while its ended conversation is being summarised keeps the summary from being stored."""
    release = asyncio.Event()

    async def slow_summaries(request: dict[str, Any]) -> str:
        if "Summarise this part" in request_texts(request)[-1]:
            await release.wait()
        return echo(request)

    llm.handler = slow_summaries
    client = await bot.start(conversation_timeout_seconds=TIMEOUT)
    secret = await say(fake, ALICE_ID, f"<@{BOT_ID}> my secret is the ferret")
    await fake.wait_for_posts(1)
    await answer_recorded(client)
    requests = len(llm.requests)
    # The conversation times out (found so by the client's sweep) and is summarised.
    bot.clock.advance(TIMEOUT)
    await eventually(lambda: len(llm.requests) > requests, timeout=TIMEOUT + 10)
    with caplog.at_level(logging.INFO, "parley"):
        await fake.delete_messages(CHANNEL_ID, int(secret["id"]))
        await eventually(lambda: client.manager.get(CHANNEL_ID) is None)
        release.set()
        await eventually(lambda: "summary of the conversation that ended" in caplog.text)
    archive = client.archive
    assert archive is not None
    await archive.flush()
    assert await archive.summaries(CHANNEL_ID) == []


async def test_forget_deletes_the_channels_summaries(bot: RunningBot, fake: FakeDiscord, llm: FakeLLM) -> None:
    """`/parley-admin forget` deletes the kept summaries, so the next conversation starts without them."""
    archive = await conversation_summarised(bot, fake)
    await run_command(fake, "forget")
    await archive.flush()
    assert await archive.summaries(CHANNEL_ID) == []
    await say(fake, ALICE_ID, f"<@{BOT_ID}> hello again")
    await fake.wait_for_posts(2)
    assert "<earlier_conversations>" not in request_texts(llm.requests[-1])[-1]
