"""Tests for catchup/: where a catch-up starts, what it reads (on both archive backends), and how it is written."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic_ai import models
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from archive.backends import open_archive
from catchup import reading
from catchup.reading import Since, SinceError, id_at, parse_since, questions_for, read_range
from catchup.writing import (
    CHUNK_CHARS,
    CatchUpWriter,
    build_catchup_agent,
    chunk_tokens,
    chunked,
    fitted,
    line_chars,
    within_budget,
)
from commands.catchup import describe_catchup
from tests.support.archive_contract_support import CHANNEL, GUILD, msg

models.ALLOW_MODEL_REQUESTS = False

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
ALICE, BOB = 100, 101


# --- Where a catch-up starts -------------------------------------------------------------------


def test_since_is_a_duration_a_message_link_or_the_members_own_last_message() -> None:
    assert parse_since(None, channel_id=CHANNEL, now=NOW) == Since(0, "your last message here", own_last=True)
    three_hours = parse_since("3h", channel_id=CHANNEL, now=NOW)
    assert three_hours.after_id == id_at(NOW - timedelta(hours=3)) and not three_hours.own_last
    assert parse_since(" 90 minutes ", channel_id=CHANNEL, now=NOW).after_id == id_at(NOW - timedelta(minutes=90))
    link = f"https://discord.com/channels/{GUILD}/{CHANNEL}/123456789"
    assert parse_since(link, channel_id=CHANNEL, now=NOW).after_id == 123456789


@pytest.mark.parametrize(
    ("text", "told"),
    [
        ("yesterday", "takes a duration"),
        ("0h", "between a minute and a year"),
        ("400d", "between a minute and a year"),
        (f"https://discord.com/channels/{GUILD}/999/1", "another channel"),
    ],
)
def test_a_since_that_names_no_point_is_refused_in_one_line(text: str, told: str) -> None:
    with pytest.raises(SinceError, match=told):
        parse_since(text, channel_id=CHANNEL, now=NOW)


def test_an_id_made_at_a_moment_is_below_every_later_message() -> None:
    moment = datetime(2026, 1, 1, tzinfo=UTC)
    assert id_at(moment) < id_at(moment + timedelta(milliseconds=1))
    assert datetime.fromtimestamp(((id_at(moment) >> 22) + 1_420_070_400_000) / 1000, UTC) == moment


# --- What it reads ----------------------------------------------------------------------------


@pytest.fixture
def small_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pages of 7, so a few dozen messages take several pages."""
    monkeypatch.setattr(reading, "PAGE", 7)


async def test_the_range_starts_after_the_members_last_message_and_after_a_forget(
    archive_url: str, small_pages: None
) -> None:
    archive = await open_archive(archive_url, retention_days=0)
    try:
        for number in range(1, 41):
            author = ALICE if number in (5, 12) else BOB
            archive.add(msg(number, f"message {number}", author_id=author, minutes_ago=60 - number))
        await archive.flush()
        own = await read_range(archive, CHANNEL, Since(0, "", own_last=True), member_id=ALICE, forgotten_after=None)
        assert [m.message_id for m in own.messages] == list(range(13, 41)) and not own.more
        since_link = await read_range(archive, CHANNEL, Since(30, ""), member_id=ALICE, forgotten_after=None)
        assert [m.message_id for m in since_link.messages] == list(range(31, 41))
        forgotten = await read_range(archive, CHANNEL, Since(0, ""), member_id=ALICE, forgotten_after=35)
        assert [m.message_id for m in forgotten.messages] == list(range(36, 41))
        # A digest's period: after one message, before another (across pages of 7).
        period = await read_range(archive, CHANNEL, Since(8, ""), member_id=0, forgotten_after=None, before_id=33)
        assert [m.message_id for m in period.messages] == list(range(9, 33)) and not period.more
    finally:
        await archive.close()


async def test_a_range_stops_at_the_most_messages_one_catch_up_reads(
    archive_url: str, small_pages: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reading, "MAX_MESSAGES", 10)
    archive = await open_archive(archive_url, retention_days=0)
    try:
        for number in range(1, 31):
            archive.add(msg(number, f"message {number}", author_id=BOB, minutes_ago=60 - number))
        await archive.flush()
        found = await read_range(archive, CHANNEL, Since(0, ""), member_id=ALICE, forgotten_after=None)
        assert [m.message_id for m in found.messages] == list(range(21, 31)) and found.more
    finally:
        await archive.close()


def test_questions_for_the_member_are_those_that_name_or_answer_them_and_ask() -> None:
    messages = [
        msg(1, "alice, can you look?", author_id=BOB, mention_ids=frozenset({ALICE})),
        msg(2, "nice work alice", author_id=BOB, mention_ids=frozenset({ALICE})),
        msg(3, "and the logs?", author_id=BOB, reply_to_author_id=ALICE),
        msg(4, "did anyone see this?", author_id=BOB),
        msg(5, "me? really?", author_id=ALICE, mention_ids=frozenset({ALICE})),
    ]
    assert [m.message_id for m in questions_for(ALICE, messages)] == [1, 3]


# --- How it is written ------------------------------------------------------------------------


def test_chunks_are_bounded_and_the_same_messages_give_the_same_chunks() -> None:
    messages = [msg(number, "x" * 400) for number in range(1, 201)]
    chunks = chunked(messages)
    assert len(chunks) > 1 and all(sum(line_chars(m) for m in chunk) <= CHUNK_CHARS for chunk in chunks)
    assert [m for chunk in chunks for m in chunk] == messages
    longer = chunked([*messages, msg(201, "one more")])
    assert longer[:-1] == chunks[:-1]


def test_the_budget_keeps_the_newest_chunks() -> None:
    chunks = chunked([msg(number, "y" * 400) for number in range(1, 201)])
    budget = chunk_tokens(chunks[-1]) + chunk_tokens(chunks[-2])
    kept, left_out = within_budget(chunks, budget)
    assert kept == chunks[-2:] and left_out == sum(len(chunk) for chunk in chunks[:-2])


def citing(model_calls: list[str], *, invent: int | None = None) -> FunctionModel:
    """A model that makes one point per chunk, about its first and last message (and an invented one)."""

    def write(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        prompt = str(messages[-1].parts[-1].content)  # type: ignore[union-attr]
        model_calls.append(prompt)
        lines = [int(found) for found in re.findall(r"^\[(\d+)\]", prompt, re.MULTILINE)]
        points = [
            {"topic": "Deploy", "summary": "Bob spoke of the deploy.", "line": lines[0]},
            {"topic": "lunch ", "summary": "Lunch came up.", "line": lines[-1]},
        ]
        if invent is not None:
            points.append({"topic": "Deploy", "summary": "Made up.", "line": invent})
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, {"points": points})])

    return FunctionModel(write)


def test_a_long_range_is_read_in_shorter_lines_before_its_oldest_messages_are_left_out() -> None:
    messages = [msg(number, "w" * 290) for number in range(1, 401)]
    whole = sum(chunk_tokens(chunk) for chunk in chunked(messages))
    chunks, cap, left_out = fitted(messages, whole)
    assert (cap, left_out) == (300, 0)
    chunks, cap, left_out = fitted(messages, whole // 2)
    assert (cap, left_out) == (100, 0) and sum(map(len, chunks)) == 400
    chunks, cap, left_out = fitted(messages, whole // 8)
    assert cap == 100 and left_out > 0 and chunks[-1][-1].message_id == 400


async def test_points_cite_only_the_range_and_a_chunk_is_summarised_once() -> None:
    calls: list[str] = []
    writer = CatchUpWriter(build_catchup_agent(citing(calls, invent=999_999)))
    messages = [msg(number, "z" * 400, author_id=BOB) for number in range(1, 121)]
    progress: list[tuple[int, int]] = []

    async def note(done: int, total: int) -> None:
        progress.append((done, total))

    usage: list[int] = []

    async def admitted() -> bool:
        return True

    options: dict[str, Any] = {"budget_tokens": 10**6, "progress": note, "admitted": admitted}
    summary = await writer.summarise(messages, on_usage=lambda u: usage.append(u.total_tokens), **options)
    chunks = len(chunked(messages))
    assert summary.chunks == chunks == len(calls) and progress == [(n, chunks) for n in range(1, chunks + 1)]
    assert {point.message_id for point in summary.points} <= {m.message_id for m in messages}
    assert len(usage) == chunks and all(tokens > 0 for tokens in usage)
    again = await writer.summarise(messages, on_usage=lambda u: usage.append(u.total_tokens), **options)
    assert len(calls) == chunks and again.reused == chunks and again.points == summary.points


async def test_a_spent_server_budget_stops_the_catch_up_and_counts_what_was_left() -> None:
    calls: list[str] = []
    writer = CatchUpWriter(build_catchup_agent(citing(calls)))
    messages = [msg(number, "z" * 400, author_id=BOB) for number in range(1, 121)]
    answers = iter([True, False])

    async def note(done: int, total: int) -> None:
        pass

    async def admitted() -> bool:
        return next(answers, False)

    summary = await writer.summarise(
        messages,
        budget_tokens=10**6,
        on_usage=lambda u: None,
        progress=note,
        admitted=admitted,
    )
    first = chunked(messages)[0]
    assert len(calls) == 1 and summary.stopped_before == len(messages) - len(first) and summary.left_out == 0


def test_the_catch_up_groups_points_by_topic_with_jump_links_and_lists_questions() -> None:
    from catchup.reading import Range
    from catchup.writing import Point, Summary

    points = [
        Point(topic="Deploy", summary="Bob moved the deploy to Friday.", message_id=11),
        Point(topic="Lunch", summary="Carol asked about *lunch*.", message_id=12),
        Point(topic="deploy", summary="Dan agreed.", message_id=13),
    ]
    question = msg(14, "alice, can you review?", author_id=BOB, mention_ids=frozenset({ALICE}))
    text = describe_catchup(
        Summary(points, chunks=1, reused=0, left_out=40),
        Range([question], more=False),
        Since(0, "3h"),
        [question],
        GUILD,
        CHANNEL,
    )
    link = f"https://discord.com/channels/{GUILD}/{CHANNEL}/"
    assert text.index("**Deploy**") < text.index("Dan agreed.") < text.index("**Lunch**")
    assert f"Bob moved the deploy to Friday. [jump]({link}11)" in text and "\\*lunch\\*" in text
    assert f"<@{BOB}>: “alice, can you review?” [jump]({link}14)" in text
    assert "The 40 oldest were left out" in text
