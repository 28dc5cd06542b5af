"""End-to-end: /parley-admin usage after a scripted day of traffic, against what the fake model server counted;
the month's chart."""

from __future__ import annotations

import io
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import discord
import genai_prices
import pytest
from PIL import Image

from commands import usage_report
from commands.usage_chart import HEIGHT, PALETTE, WIDTH, panels, slot
from commands.usage_report import CHART_FAILED, CHART_FILE
from tests.fakes.fake_discord import (
    ALICE_ID,
    BOB_ID,
    BOT_ID,
    CALLBACK_DEFERRED_CHANNEL_MESSAGE,
    CAROL_ID,
    CHANNEL_ID,
    GUILD_ID,
    OTHER_CHANNEL_ID,
    FakeDiscord,
)
from tests.fakes.fake_llm import FakeLLM, ToolCall, message_text
from tests.support.e2e_support import (
    EPHEMERAL,
    MODERATOR,
    RunningBot,
    assert_ephemeral_one_liner,
    decided,
    eventually,
    option,
    reply_embeds,
    reply_text,
    run_command,
)

PRICED_MODEL = "gpt-4.1-mini"
SCRIPTED_DAY = datetime(2026, 11, 20, 15, 0, tzinfo=UTC)
SERVER_MANAGER = MODERATOR | discord.Permissions(manage_guild=True)


def answers_and_judges(request: dict[str, Any]) -> Any:
    """Answers a question; as the judge, says the message is not for the bot."""
    system = message_text(request["messages"][0])
    if system.startswith("You decide whether"):
        return ToolCall("final_result", {"respond": False, "confidence": 0.9, "reason": "chatter"})
    return "Use the deploy script, then check the logs for errors before you announce it."


@dataclass
class Counted:
    """What the fake model server reported for some of its requests."""

    answers: int = 0
    judge_calls: int = 0
    input_tokens: int = 0
    cached: int = 0
    output: int = 0

    def add(self, request: dict[str, Any], usage: dict[str, Any]) -> None:
        system = message_text(request["messages"][0])
        if system.startswith("You decide whether"):
            self.judge_calls += 1
        elif not system.startswith("You summarise"):
            self.answers += 1
        self.input_tokens += usage["prompt_tokens"]
        self.cached += usage.get("prompt_tokens_details", {}).get("cached_tokens", 0)
        self.output += usage["completion_tokens"]

    def line(self) -> str:
        """The figures as /parley-admin usage words them, with the cost from genai-prices' own calculation."""
        usage = genai_prices.Usage(
            input_tokens=self.input_tokens, cache_read_tokens=self.cached, output_tokens=self.output
        )
        cost = genai_prices.calc_price(usage, PRICED_MODEL).total_price
        cached = f" ({self.cached:,} cached)" if self.cached else ""
        return (
            f"{self.answers:,} answers, {self.judge_calls:,} judge calls; {self.input_tokens:,} input tokens{cached},"
            f" {self.output:,} output; ${cost:.4f}"
        )


async def test_usage_after_a_day_matches_what_the_model_server_counted(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM, archive_url: str
) -> None:
    """Per channel and per member, /parley-admin usage shows the fake server's answers, judge calls, tokens and cost;
    the week's figures come back from either archive backend."""
    llm.handler = answers_and_judges
    llm.caches_prefixes = True
    # Answers posted whole: a streamed one is on Discord before its run, and so its count, has ended.
    client = await bot.start(
        llm_model=PRICED_MODEL,
        use_llm_judge=True,
        judge_calls_per_minute=0,
        summarize_history=False,
        stream_answers=False,
        database_url=archive_url,
    )
    client.usage.clock = lambda: SCRIPTED_DAY
    by_channel = {CHANNEL_ID: Counted(), OTHER_CHANNEL_ID: Counted()}
    by_member = {ALICE_ID: Counted(), BOB_ID: Counted(), CAROL_ID: Counted()}

    async def traffic(channel_id: int, author_id: int, text: str, *, answered: bool) -> None:
        before = len(llm.requests)
        posts = len(fake.posts_in(channel_id))
        sent = await fake.send_user_message(channel_id, author_id, text)
        if answered:
            await fake.wait_for_posts(posts + 1, channel_id)
        else:  # the judge's tokens are counted before its decision is logged
            await decided(client, sent)
        for request, usage in zip(llm.requests[before:], llm.usages[before:], strict=True):
            by_channel[channel_id].add(request, usage)
            by_member[author_id].add(request, usage)

    await traffic(CHANNEL_ID, ALICE_ID, f"<@{BOT_ID}> how do we deploy the bot?", answered=True)
    await traffic(CHANNEL_ID, ALICE_ID, f"<@{BOT_ID}> and how do we roll it back?", answered=True)
    await traffic(CHANNEL_ID, CAROL_ID, "anyone up for lunch later?", answered=False)
    await traffic(OTHER_CHANNEL_ID, BOB_ID, f"<@{BOT_ID}> what is the staging address?", answered=True)
    assert by_channel[CHANNEL_ID].judge_calls == 1 and by_member[ALICE_ID].cached > 0

    report = reply_text(await run_command(fake, "usage", [option("period", "day")], permissions=SERVER_MANAGER))

    assert "genai-prices " + genai_prices.__version__ in report
    for channel_id, counted in by_channel.items():
        assert f"<#{channel_id}> {counted.line()}" in report
    for member_id, counted in by_member.items():
        assert f"<@{member_id}> {counted.line()}" in report

    # The next day starts from nothing, and the week still holds the scripted day, read back from the archive.
    assert client.archive is not None
    await client.archive.flush()
    client.usage.clock = lambda: SCRIPTED_DAY + timedelta(days=1)
    next_day = reply_text(await run_command(fake, "usage", permissions=SERVER_MANAGER))
    assert "used no model tokens in this server today" in next_day
    # A week's reply is deferred (its chart is drawn first), then posted as a follow-up.
    week_calls = await run_command(fake, "usage", [option("period", "week")], posts=2, permissions=SERVER_MANAGER)
    week = reply_text(week_calls)
    assert f"<@{ALICE_ID}> {by_member[ALICE_ID].line()}" in week


async def test_a_summary_is_counted_for_its_channel_and_no_member(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """A conversation that timed out is summarised: /parley-admin usage counts the summary's tokens for the channel,
    on a line of their own rather than for the member whose mention started the conversation."""
    timeout = 3.0
    client = await bot.start(
        llm_model=PRICED_MODEL, judge_model=PRICED_MODEL, conversation_timeout_seconds=timeout, stream_answers=False
    )
    client.usage.clock = lambda: SCRIPTED_DAY
    await fake.send_user_message(CHANNEL_ID, ALICE_ID, f"<@{BOT_ID}> my favourite animal is the ferret")
    await fake.wait_for_posts(1, CHANNEL_ID)
    conversation = client.manager.get(CHANNEL_ID)
    assert conversation is not None
    await eventually(lambda: bool(conversation.llm_history))  # the answer is in what a summary would cover
    bot.clock.advance(timeout)  # the conversation times out, and the client's sweep ends it
    await eventually(lambda: len(llm.requests) == 2, timeout=timeout + 10)
    answer, summary = Counted(), Counted()
    answer.add(llm.requests[0], llm.usages[0])
    summary.add(llm.requests[1], llm.usages[1])
    assert summary.answers == 0 and summary.input_tokens > 0
    await eventually(lambda: client.usage.server_tokens(GUILD_ID) > answer.input_tokens + answer.output)

    report = reply_text(await run_command(fake, "usage", permissions=SERVER_MANAGER))

    assert f"<@{ALICE_ID}> {answer.line()}" in report
    assert f"Conversation summaries {summary.line()}" in report
    both = Counted(
        answers=1,
        input_tokens=answer.input_tokens + summary.input_tokens,
        cached=answer.cached + summary.cached,
        output=answer.output + summary.output,
    )
    assert f"<#{CHANNEL_ID}> {both.line()}" in report


async def test_usage_needs_manage_server(bot: RunningBot, fake: FakeDiscord) -> None:
    """A moderator without Manage Server is told in one line that /parley-admin usage needs it."""
    await bot.start()
    line = assert_ephemeral_one_liner(await run_command(fake, "usage", permissions=MODERATOR))
    assert line == "You need the Manage Server permission in this channel to use /parley-admin usage."


async def test_usage_month_is_an_embed_with_a_chart_of_each_days_tokens(bot: RunningBot, fake: FakeDiscord) -> None:
    """`/parley-admin usage month` answers with an embed showing a PNG chart: bars on the days with usage, in the
    biggest channel's colour where only it spoke, and none on the days without."""
    client = await bot.start(llm_model=PRICED_MODEL, stream_answers=False)
    # Answers posted whole are counted before they are posted.
    for day, channel_id, answers in ((0, CHANNEL_ID, 1), (2, OTHER_CHANNEL_ID, 1), (2, CHANNEL_ID, 2)):
        moment = SCRIPTED_DAY + timedelta(days=day)
        client.usage.clock = lambda moment=moment: moment  # type: ignore[misc]
        await fake.send_user_message(channel_id, ALICE_ID, f"<@{BOT_ID}> how do we deploy the bot, day {day}?")
        await fake.wait_for_posts(answers, channel_id)
    assert client.archive is not None
    await client.archive.flush()
    today = SCRIPTED_DAY + timedelta(days=3)
    client.usage.clock = lambda: today

    calls = await run_command(fake, "usage", [option("period", "month")], posts=2, permissions=SERVER_MANAGER)

    deferral, answer = calls
    assert deferral.body is not None and deferral.body["type"] == CALLBACK_DEFERRED_CHANNEL_MESSAGE
    assert deferral.body["data"]["flags"] & EPHEMERAL
    [embed] = reply_embeds(calls)
    assert embed["image"]["url"] == f"attachment://{CHART_FILE}"
    assert embed["title"] == "Parley's model usage in this server" and "the last 30 days" in embed["description"]
    [(name, png)] = answer.files
    chart = Image.open(io.BytesIO(png))
    assert (name, chart.format, chart.size) == (CHART_FILE, "PNG", (WIDTH, HEIGHT))
    pixels = chart.convert("RGB")
    tokens_panel, _ = panels()

    def bar_colours(days_ago: int) -> set[Any]:
        left, right = slot(tokens_panel, 29 - days_ago, 30)
        found = pixels.crop((left + 1, tokens_panel.top, right - 1, tokens_panel.bottom)).getcolors(WIDTH * HEIGHT)
        assert found is not None
        return {colour for _, colour in found} & set(PALETTE)

    # #general spoke on two days, #random on one: #general is the biggest channel, the first colour.
    assert bar_colours(3) == {PALETTE[0]} and bar_colours(1) == {PALETTE[0], PALETTE[1]}
    assert bar_colours(2) == bar_colours(0) == bar_colours(10) == set()


async def test_a_chart_that_cannot_be_drawn_leaves_the_figures(
    bot: RunningBot, fake: FakeDiscord, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """When drawing fails, `usage week` still answers with its figures, says the chart is missing, and logs why."""

    def broken(*_: object) -> bytes:
        raise OSError("cannot open resource")

    monkeypatch.setattr(usage_report, "chart_of", broken)
    client = await bot.start(stream_answers=False)
    await fake.send_user_message(CHANNEL_ID, ALICE_ID, f"<@{BOT_ID}> how do we deploy the bot?")
    await fake.wait_for_posts(1, CHANNEL_ID)
    await eventually(lambda: client.usage.server_tokens(GUILD_ID) > 0)

    calls = await run_command(fake, "usage", [option("period", "week")], posts=2, permissions=SERVER_MANAGER)

    [embed] = reply_embeds(calls)
    assert "image" not in embed and calls[-1].files == ()
    assert f"<#{CHANNEL_ID}> 1 answers" in embed["fields"][0]["value"]
    assert embed["description"].endswith(CHART_FAILED)
    assert "the /parley-admin usage chart could not be drawn" in caplog.text
