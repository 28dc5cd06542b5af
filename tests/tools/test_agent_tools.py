"""Tests for the responder's archive tools: channel from deps, limits, trouble, permissions."""

from __future__ import annotations

from dataclasses import replace

import pytest
from pydantic_ai import (
    ModelMessage,
    ModelResponse,
    TextPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from agent import build_responder, generate_reply
from archive.sqlite import SQLiteArchive
from prompting.quoting import format_messages, format_stats
from tests.support.agent_test_support import (
    ALICE,
    ARCHIVED,
    BOT,
    CAROL,
    CHANNEL,
    HOSTILE,
    STATS,
    FakeArchive,
    calls,
    conversation_of,
    deps,
    msg,
    reply_to,
    scripted,
    tool_returns,
)
from tools import HISTORY_NOT_PERMITTED, HOURS_MAX


async def test_tools_take_the_channel_from_deps_not_from_the_model(make_settings):
    """A channel_id the model slips in is rejected; the hostile query goes verbatim to deps' channel."""
    archive = FakeArchive()
    model, offered = scripted(
        calls(("search_history", {"query": HOSTILE, "channel_id": 999})),
        calls(("search_history", {"query": HOSTILE})),
    )
    new = msg(ALICE, "Alice", "when is the release?", 0)
    reply = await reply_to(new, make_settings(), model, archive=archive, archive_enabled=True)

    search = next(t for t in offered[0].function_tools if t.name == "search_history")
    assert set(search.parameters_json_schema["properties"]) == {"query", "hours", "limit"}
    rejected, answered = tool_returns(reply.messages)
    assert rejected.outcome == "retried"
    assert archive.calls == [("search", CHANNEL, HOSTILE, None, 20)]
    assert answered.content == format_messages([ARCHIVED], bot_user_id=BOT)


async def test_tools_work_with_the_real_archive(make_settings, tmp_path):
    """Against archive.sqlite.SQLiteArchive, the tools read this channel's messages and never another channel's."""
    archive = await SQLiteArchive.open(tmp_path / "archive.db", retention_days=0)
    try:
        archive.add(ARCHIVED)
        archive.add(replace(ARCHIVED, message_id=2, channel_id=CHANNEL + 1, content="the release is secret"))
        await archive.flush()
        model, _ = scripted(calls(("get_recent_messages", {"limit": 10}), ("get_channel_stats", {})))
        new = msg(ALICE, "Alice", "when is the release?", 0)
        reply = await reply_to(new, make_settings(), model, archive=archive, archive_enabled=True)
    finally:
        await archive.close()

    found, stats = (r.model_response_str() for r in tool_returns(reply.messages))
    assert "the release is on Friday" in found and "secret" not in found
    assert stats.startswith('<channel_stats message_count="1"')


async def test_tool_results_tell_the_bot_from_a_member_named_like_it(make_settings, tmp_path):
    """In every tool result from a real archive only the bot's own messages carry by_ai, not a member named "Parley"."""
    impostor = replace(ARCHIVED, message_id=1, author_id=CAROL, author_name="Parley", content="Parley here: deploy now")
    own = replace(ARCHIVED, message_id=2, author_id=BOT, author_name="Parley", content="deploy is Friday", is_bot=True)
    archive = await SQLiteArchive.open(tmp_path / "archive.db", retention_days=0)
    try:
        archive.add(impostor)
        archive.add(own)
        model, _ = scripted(
            calls(("search_history", {"query": "deploy"}), ("get_recent_messages", {}), ("get_channel_stats", {}))
        )
        new = msg(ALICE, "Alice", "what did Parley say about the deploy?", 0)
        reply = await reply_to(new, make_settings(), model, archive=archive, archive_enabled=True)
    finally:
        await archive.close()

    found, recent, stats = (r.model_response_str() for r in tool_returns(reply.messages))
    for result in (found, recent):
        assert result.startswith('<archived_messages shown="2">') and result.endswith("</archived_messages>")
        assert f'<archived_message author="Parley" author_id="{CAROL}" time_utc=' in result
        assert f'<archived_message author="Parley" author_id="{BOT}" by_ai="true" time_utc=' in result
        assert result.count("by_ai") == 1
    assert f'<top_author author="Parley" author_id="{CAROL}" messages="1">' in stats
    assert f'<top_author author="Parley" author_id="{BOT}" by_ai="true" messages="1">' in stats


async def test_tool_limits_and_windows_are_clamped(make_settings):
    """Out-of-range limits and hours from the model are brought into range before the archive sees them."""
    archive = FakeArchive()
    model, _ = scripted(
        calls(
            ("search_history", {"query": "a", "limit": 10_000, "hours": -3}),
            ("search_history", {"query": "b", "limit": 0, "hours": 1e12}),
            ("get_recent_messages", {"limit": 5000, "hours": 2}),
            ("get_recent_messages", {"limit": -1}),
            ("get_channel_stats", {"hours": 0}),
        )
    )
    new = msg(ALICE, "Alice", "stats?", 0)
    reply = await reply_to(new, make_settings(), model, archive=archive, archive_enabled=True)

    assert format_stats(STATS, bot_user_id=BOT) in [r.content for r in tool_returns(reply.messages)]
    assert sorted(archive.calls, key=str) == sorted(
        [
            ("search", CHANNEL, "a", None, 50),
            ("search", CHANNEL, "b", HOURS_MAX, 1),
            ("recent", CHANNEL, 100, 2),
            ("recent", CHANNEL, 1, None),
            ("stats", CHANNEL, None),
        ],
        key=str,
    )


@pytest.mark.parametrize(
    ("archive", "expected"),
    [
        (FakeArchive(error=RuntimeError("database is locked")), "The message archive could not be read just now."),
        (FakeArchive(messages=[]), "No messages found."),
        (None, "The message archive is not available."),
    ],
)
async def test_tool_trouble_is_a_short_text_result(make_settings, archive, expected):
    """An archive error, an empty result or a missing archive is a line for the model, not a failed answer."""
    model, _ = scripted(calls(("get_recent_messages", {})))
    settings = make_settings()
    new = msg(ALICE, "Alice", "what did I miss?", 0)
    reply = await reply_to(new, settings, model, archive=archive, archive_enabled=True)
    assert tool_returns(reply.messages)[0].content == expected
    assert reply.text == "done"


async def test_tools_read_nothing_for_a_member_without_read_message_history(make_settings):
    """Without Read Message History, every tool says so and the archive is never read."""
    archive = FakeArchive()
    model, _ = scripted(
        calls(("search_history", {"query": "release"}), ("get_recent_messages", {}), ("get_channel_stats", {}))
    )
    settings = make_settings()
    new = msg(ALICE, "Alice", "what did I miss?", 0)
    agent = build_responder(settings, model=model, archive_enabled=True)
    reply = await generate_reply(agent, conversation_of(new), new, deps(archive, can_read_history=False))
    assert [r.content for r in tool_returns(reply.messages)] == [HISTORY_NOT_PERMITTED] * 3
    assert archive.calls == []


async def test_no_tools_when_the_archive_is_off(make_settings):
    """With the archive off the model is offered no tools; `archive_enabled=False` withdraws the archive's alone."""
    offered: list[list[str]] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        offered.append([t.name for t in info.function_tools])
        return ModelResponse(parts=[TextPart("ok")])

    new = msg(ALICE, "Alice", "hi", 0)
    cases = [(make_settings(database_url=""), None), (make_settings(), False), (make_settings(), None)]
    for settings, enabled in cases:
        await reply_to(new, settings, FunctionModel(model), archive_enabled=enabled)
    with_the_archive = ["remember", "recall", "remind"]
    assert offered == [
        [],
        with_the_archive,
        ["search_history", "get_recent_messages", "get_channel_stats", *with_the_archive],
    ]
