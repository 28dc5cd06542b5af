"""End-to-end guards: bots and webhooks, text that cannot be encoded, the history permission, Logfire's content."""

from __future__ import annotations

import asyncio
import logging

import pytest
from e2e_support import RunningBot, eventually, request_texts, say
from fake_discord import ALICE_ID, BOT_ID, CHANNEL_ID, FakeDiscord
from fake_llm import FakeLLM

LONE_SURROGATE = "\ud800"


async def test_message_with_a_lone_surrogate_is_answered_and_archived(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    """A lone UTF-16 surrogate (some clients send them) is answered and archived, with no error logged."""
    caplog.set_level(logging.INFO)
    client = await bot.start()
    question = await say(fake, ALICE_ID, f"<@{BOT_ID}> what is {LONE_SURROGATE}this{LONE_SURROGATE}?\x00")
    [post] = await fake.wait_for_posts(1)
    assert "sorry" not in post.content.lower()
    assert "this" in request_texts(llm.requests[0])[-1]
    archive = client.archive
    assert archive is not None
    await archive.flush()
    stored = {row.message_id: row.content for row in await archive.recent(CHANNEL_ID)}
    assert stored[int(question["id"])] == "@Parley what is \ufffdthis\ufffd?"
    await eventually(lambda: any(entry.reason == "mention" for entry in client.decisions.recent(CHANNEL_ID)))
    assert [record for record in caplog.records if record.levelno >= logging.ERROR or record.exc_info] == []


async def test_edit_to_a_lone_surrogate_is_archived(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    """An edit whose new text holds a lone surrogate updates the archive, with no error logged."""
    client = await bot.start()
    original = await say(fake, ALICE_ID, "meeting on tuesday")
    await fake.edit_user_message(CHANNEL_ID, int(original["id"]), f"meeting on {LONE_SURROGATE}thursday")
    archive = client.archive
    assert archive is not None

    async def stored_text() -> str | None:
        await archive.flush()
        return {row.message_id: row.content for row in await archive.recent(CHANNEL_ID)}.get(int(original["id"]))

    async with asyncio.timeout(5):
        while await stored_text() != "meeting on \ufffdthursday":  # noqa: ASYNC110 - the archive has no event
            await asyncio.sleep(0.02)
    assert [record for record in caplog.records if record.levelno >= logging.ERROR or record.exc_info] == []
