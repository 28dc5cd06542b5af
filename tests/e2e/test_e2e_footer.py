"""End-to-end: the footer under each answer (ANSWER_FOOTER, a profile's `footer`): its tokens, and its cost where
priced, the same figures the usage report counts; a member's own day in /parley status (issue 48, part 3)."""

from __future__ import annotations

from typing import Any

import discord

from archive import TokenUsage
from tests.e2e.test_e2e_ask import ask as use_ask
from tests.e2e.test_e2e_memory import run_group_command, string_option
from tests.e2e.test_e2e_usage import PRICED_MODEL
from tests.fakes.fake_discord import ALICE_ID, BOT_ID, CHANNEL_ID, GUILD_ID, FakeDiscord
from tests.fakes.fake_llm import FakeLLM
from tests.support.e2e_support import MEMBER, MODERATOR, RunningBot, calls_for, run_command, settled
from usage.footer import answer_footer

ADMIN = MODERATOR | discord.Permissions(manage_guild=True)


def footers(fake: FakeDiscord) -> list[str]:
    """Every answer footer Parley has shown, in order: in its posts' edits and its interaction responses' edits."""
    bodies = [edit.body for edit in fake.edits] + [call.body or {} for call in fake.interaction_calls]
    return [
        embed["footer"]["text"]
        for body in bodies
        for embed in (body.get("embeds") or (body.get("data") or {}).get("embeds") or [])
        if "footer" in embed and not embed.get("title")
    ]


async def answered_with_footer(fake: FakeDiscord, shown: int) -> str:
    await fake.wait_for(lambda: len(footers(fake)) > shown, what="the answer's footer")
    return footers(fake)[-1]


async def counted(bot: RunningBot) -> TokenUsage:
    """The one usage row of today in the server: what /parley-admin usage reports."""
    assert bot.client is not None
    [row] = await bot.client.usage.guild_usage(GUILD_ID, 1)
    return row


async def test_a_whole_answer_shows_its_tokens_and_cost_as_the_usage_report_counts_them(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    await bot.start(llm_model=PRICED_MODEL, stream_answers=False, answer_footer="cost")
    await fake.send_user_message(CHANNEL_ID, ALICE_ID, f"<@{BOT_ID}> how do we deploy?")
    footer = await answered_with_footer(fake, 0)
    row = await counted(bot)
    [usage] = llm.usages
    assert (row.input_tokens, row.output_tokens) == (usage["prompt_tokens"], usage["completion_tokens"])
    assert footer == answer_footer("cost", row)
    assert footer.startswith(f"{row.total_tokens:,} tokens ({row.input_tokens:,} in, {row.output_tokens:,} out) · ≈ $")
    # The footer is no part of the answer's text: the model's next request does not read it back.
    await fake.send_user_message(CHANNEL_ID, ALICE_ID, f"<@{BOT_ID}> and then?")
    await answered_with_footer(fake, 1)
    assert "tokens (" not in str(llm.requests[-1]["messages"])


async def test_a_server_profile_shows_tokens_under_streamed_answers_and_asks(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """`footer: tokens` for the server: a streamed answer and a public /ask each show their own tokens, no cost."""
    await bot.start()
    said = await run_group_command(
        fake,
        "profile",
        "set",
        [string_option("setting", "footer"), string_option("value", "tokens"), string_option("scope", "server")],
        permissions=ADMIN,
    )
    assert "footer" in said
    await fake.send_user_message(CHANNEL_ID, ALICE_ID, f"<@{BOT_ID}> how do we deploy?")
    streamed = await answered_with_footer(fake, 0)
    [first] = llm.usages
    total = first["prompt_tokens"] + first["completion_tokens"]
    assert streamed == f"{total:,} tokens ({first['prompt_tokens']:,} in, {first['completion_tokens']:,} out)"
    calls = await use_ask(fake, "and how do we roll back?")
    asked = await answered_with_footer(fake, 1)
    last = llm.usages[-1]
    given, written = last["prompt_tokens"], last["completion_tokens"]
    assert asked == f"{given + written:,} tokens ({given:,} in, {written:,} out)"
    assert any("embeds" in str(call.body) for call in calls_for(fake, calls))


async def test_footers_are_off_by_default(bot: RunningBot, fake: FakeDiscord, llm: FakeLLM) -> None:
    await bot.start(stream_answers=False)
    posts = len(fake.posts_in(CHANNEL_ID))
    await fake.send_user_message(CHANNEL_ID, ALICE_ID, f"<@{BOT_ID}> how do we deploy?")
    await fake.wait_for_posts(posts + 1, CHANNEL_ID)
    await settled(fake)
    assert footers(fake) == []


async def test_status_shows_the_members_own_tokens_today(bot: RunningBot, fake: FakeDiscord, llm: FakeLLM) -> None:
    await bot.start(llm_model=PRICED_MODEL, stream_answers=False)
    posts = len(fake.posts_in(CHANNEL_ID))
    await fake.send_user_message(CHANNEL_ID, ALICE_ID, f"<@{BOT_ID}> how do we deploy?")
    await fake.wait_for_posts(posts + 1, CHANNEL_ID)
    row = await counted(bot)
    [status] = await run_command(fake, "status", permissions=MEMBER)
    assert status.body is not None
    fields: dict[str, Any] = {field["name"]: field["value"] for field in status.body["data"]["embeds"][0]["fields"]}
    assert fields["Your tokens today"].startswith(f"{row.total_tokens:,} tokens (≈ $")
    [bobs] = await run_command(fake, "status", permissions=MEMBER, user_id=ALICE_ID + 1)
    assert bobs.body is not None
    assert {field["name"]: field["value"] for field in bobs.body["data"]["embeds"][0]["fields"]}.get(
        "Your tokens today"
    ) == "0 tokens (≈ $0.0000)"
