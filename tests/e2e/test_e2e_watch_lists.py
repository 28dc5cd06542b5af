"""End-to-end: watch lists, through the real discord.py client and the fake Discord: `/parley-admin moderation watch`
and `words`; a new message that passes the local pre-filter and that the (fake) model flags becomes a case card; one
that does not pass costs no model call; the screening budget stops screening, not answering."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import discord

from bot import Parley
from records import ModerationSettings
from tests.e2e.test_e2e_memory import run_group_command
from tests.fakes.fake_discord import BOB_ID, BOT_ID, CHANNEL_ID, GUILD_ID, OTHER_CHANNEL_ID, FakeDiscord
from tests.fakes.fake_llm import FakeLLM, ToolCall
from tests.support.e2e_support import MEMBER, RunningBot, embed_text, option, say, settled

MOD_CHANNEL = OTHER_CHANNEL_ID
ADMIN = MEMBER | discord.Permissions(manage_messages=True, manage_guild=True)
FLAGGED: dict[str, Any] = {"rule": "1. No scams", "confidence": 0.95, "summary": "offers free Nitro behind a link"}
ANSWER = "Good morning!"


def flags_or_answers(request: dict[str, Any]) -> Any:
    """The fake model: a screening reading flags the message; anything else is answered in words."""
    if "final_result" in {tool["function"]["name"] for tool in request.get("tools", [])}:
        return ToolCall("final_result", FLAGGED)
    return ANSWER


def screenings(llm: FakeLLM) -> int:
    """How many requests were screening readings (the only ones with a structured output here)."""
    return sum(
        "final_result" in {tool["function"]["name"] for tool in request.get("tools", [])} for request in llm.requests
    )


async def watching(bot: RunningBot, llm: FakeLLM, **overrides: Any) -> Parley:
    """The bot with #random as the moderation channel, #general watched by command, "free nitro" listed."""
    llm.handler = flags_or_answers
    client = await bot.start(**overrides)
    settings = ModerationSettings(GUILD_ID, MOD_CHANNEL, "1. No scams.\n2. Be kind.")
    await client.archive.set_moderation_settings(settings, set_by=BOB_ID, now=datetime.now(UTC))
    said = await run_group_command(bot.fake, "moderation", "watch", [option("setting", "on")], permissions=ADMIN)
    assert said.startswith(f"New messages in <#{CHANNEL_ID}> are screened")
    said = await run_group_command(
        bot.fake, "moderation", "words", [option("words", "Free Nitro, scam")], permissions=ADMIN
    )
    assert "`free nitro`, `scam`" in said
    return client


async def test_a_message_passing_the_prefilter_and_flagged_by_the_model_becomes_a_case(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    client = await watching(bot, llm)
    spam = await say(fake, BOB_ID, "claim your free nitro: https://nitro.example")
    [card] = await fake.wait_for_posts(1, MOD_CHANNEL)
    await settled(fake)
    text = embed_text(card.message["embeds"][0])
    assert "a flagged message" in text and "free nitro" in text and FLAGGED["rule"] in text
    assert "Flagged by" in text and "the listed word" in text
    [case] = await client.archive.moderation_cases(GUILD_ID)
    assert (case.source, case.message_id, case.reporters) == ("watch", int(spam["id"]), 0)
    # A case, never an action: nothing was deleted, no one timed out.
    assert fake.deleted_ids == [] and fake.member_edits == []


async def test_a_message_not_passing_the_prefilter_costs_no_model_call(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    client = await watching(bot, llm)
    await say(fake, BOB_ID, "good morning, how did the release go?")
    await settled(fake)
    assert screenings(llm) == 0 and await client.archive.moderation_cases(GUILD_ID) == []
    await run_group_command(fake, "moderation", "watch", [option("setting", "off")], permissions=ADMIN)
    await say(fake, BOB_ID, "claim your free nitro: https://nitro.example")
    await settled(fake)
    assert screenings(llm) == 0  # a channel no longer watched is not screened


async def test_the_screening_budget_stops_screening_not_answering(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    client = await watching(bot, llm, screening_tokens_per_day=1)
    await say(fake, BOB_ID, "claim your free nitro: https://nitro.example")
    await fake.wait_for_posts(1, MOD_CHANNEL)
    await settled(fake)
    assert screenings(llm) == 1
    await say(fake, BOB_ID, "second chance: free nitro for everyone")
    await settled(fake)
    assert screenings(llm) == 1 and len(await client.archive.moderation_cases(GUILD_ID)) == 1
    await say(fake, BOB_ID, f"<@{BOT_ID}> good morning")
    [answer] = await fake.wait_for_posts(1, CHANNEL_ID)
    assert answer.content == ANSWER
