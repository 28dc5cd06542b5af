"""Promise: "However many requests arrive at once, and however many Parley processes share the database, a limit
on how much Parley keeps is never exceeded: a member keeps at most REMINDERS_PER_MEMBER reminders and a server
REMINDERS_PER_SERVER, a server KNOWLEDGE_MAX_DOCUMENTS documents, and a day's file text at most
ARCHIVE_FILE_TEXT_MEMBER_BYTES per member and ARCHIVE_FILE_TEXT_CHANNEL_BYTES per channel, and a member's reports to
the moderators at most REPORTS_PER_MEMBER_PER_HOUR an hour."

Each limit is a row, run with N requests at once on SQLite, and with N requests at once from two archives (two
processes' worth: each its own pool, writer, book and knowledge base) on one Postgres database; then the paths that
reach the reminder limits through Discord and the model, each a row.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from pydantic_ai import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from agent import build_responder, generate_reply
from archive import Archive, ArchivedAttachment, ArchivedMessage, ReminderLimits
from archive.backends import open_archive
from archive.file_text import CHANNEL_OVER, MEMBER_OVER, FileTextBudget
from archive.knowledge_types import KnowledgeDocument, KnowledgeSection
from archive.stores import StoreTables
from conversation import ChannelConversation
from knowledge.base import KnowledgeBase, KnowledgeFull
from records import MessageRecord, MessageReport
from reminders.book import ReminderBook, ReminderRefused
from tests.conftest import fresh_postgres_database
from tests.fakes.fake_discord import ALICE_ID, GUILD_ID, FakeDiscord
from tests.fakes.fake_discord_state import snowflake_at
from tests.fakes.fake_llm import FakeLLM
from tests.support.e2e_support import MEMBER, RunningBot, command_payload, option
from tests.tools.test_tool_approval import FakeApprover
from tests.tools.test_tools import deps as chat_deps
from tools.approval import Verdict

NOW = datetime(2026, 11, 25, 15, 0, tzinfo=UTC)
GUILD, CHANNEL, ALICE = 42, 500, 7
REQUESTS = 100
PER_MEMBER, PER_SERVER, DOCUMENTS, REPORTS = 3, 10, 3, 5
# Files of 10 bytes of text each, on one UTC day, against a day's budget of 60 bytes.
FILES_DAY = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
FILE_TEXT = "0123456789"
FILE_BYTES = 60


class NoOptOuts:
    def opted_out(self, guild_id: int, member_id: int) -> bool:
        return False


def book_on(archive: Archive) -> ReminderBook:
    book = ReminderBook(ReminderLimits(PER_MEMBER, PER_SERVER), ZoneInfo("UTC"), NoOptOuts(), lambda: NOW)
    book.archive = archive
    return book


async def set_reminder(archive: Archive, request: int, owner: int) -> None:
    with contextlib.suppress(ReminderRefused):
        await book_on(archive).set(
            guild_id=GUILD, channel_id=CHANNEL, owner_id=owner, owner_may_post=True, text=f"r{request}", when="1h",
            every="hourly",
            post_here=False,
        )  # fmt: skip


@dataclass(frozen=True)
class Limit:
    """A count limit: one request (the `request`th, through the process's `archive`), how many are kept, and the
    most there may be; `budget`: the file text budget the archives are opened with."""

    name: str
    request: Callable[[Archive, int], Awaitable[None]]
    kept: Callable[[Archive], Awaitable[int]]
    most: int
    budget: FileTextBudget | None = None


async def one_members_reminder(archive: Archive, request: int) -> None:
    await set_reminder(archive, request, ALICE)


async def many_members_reminder(archive: Archive, request: int) -> None:
    await set_reminder(archive, request, 1000 + request % 40)  # 40 members: 120 might fit their own limits


async def alices_reminders(archive: Archive) -> int:
    return (await archive.pending_reminders(GUILD, ALICE))[0]


async def servers_reminders(archive: Archive) -> int:
    return (await archive.pending_reminders(GUILD, ALICE))[1]


async def knowledge_document(archive: Archive, request: int) -> None:
    # A knowledge base per request stands for as many processes; each has its own lock.
    base = KnowledgeBase(archive, max_documents=DOCUMENTS)
    document = KnowledgeDocument(GUILD, f"file:{request}.md", f"{request}", [KnowledgeSection("", "text")], ALICE, NOW)
    with contextlib.suppress(KnowledgeFull):
        await base.add(document)


async def server_wide_documents(archive: Archive) -> int:
    return sum(info.channel_id is None for info in await archive.knowledge_documents(GUILD))


async def shared_file(archive: Archive, request: int, author: int, channel: int) -> None:
    """A member's message in `channel` with a file whose text is FILE_TEXT long, archived (as a process archives
    what it sees)."""
    attachment_id = snowflake_at(FILES_DAY, request)
    attachment = ArchivedAttachment(attachment_id, f"{request}.log", "text/plain", len(FILE_TEXT))
    archive.add(
        ArchivedMessage(attachment_id, GUILD, channel, author, "m", "log", FILES_DAY, False, attachments=(attachment,))
    )
    archive.set_attachment_text(attachment_id, FILE_TEXT)
    await archive.flush()


async def one_members_file(archive: Archive, request: int) -> None:
    await shared_file(archive, request, ALICE, CHANNEL + request % 2)  # a member's budget spans channels


async def many_members_file(archive: Archive, request: int) -> None:
    await shared_file(archive, request, 1000 + request, CHANNEL)


async def file_text_bytes(archive: Archive) -> int:
    assert isinstance(archive, StoreTables)
    [(kept,)] = await archive.read(
        "SELECT coalesce(sum(length(text)), 0) FROM attachments WHERE text NOT IN (?, ?)", (CHANNEL_OVER, MEMBER_OVER)
    )
    return int(kept)


async def one_members_report(archive: Archive, request: int) -> None:
    """Alice reports another message each time (moderation/desk.py files it so)."""
    report = MessageReport(GUILD, CHANNEL, 10_000 + request, 1000, "spam", ALICE, "", NOW)
    await archive.report_message(report, per_hour=REPORTS)


async def alices_reports(archive: Archive) -> int:
    return await archive.reports_in_hour(GUILD, ALICE, NOW)


LIMITS = [
    Limit("REMINDERS_PER_MEMBER", one_members_reminder, alices_reminders, PER_MEMBER),
    Limit("REMINDERS_PER_SERVER", many_members_reminder, servers_reminders, PER_SERVER),
    Limit("KNOWLEDGE_MAX_DOCUMENTS", knowledge_document, server_wide_documents, DOCUMENTS),
    Limit("REPORTS_PER_MEMBER_PER_HOUR", one_members_report, alices_reports, REPORTS),
    Limit(
        "ARCHIVE_FILE_TEXT_MEMBER_BYTES", one_members_file, file_text_bytes, FILE_BYTES, FileTextBudget(0, FILE_BYTES)
    ),
    Limit(
        "ARCHIVE_FILE_TEXT_CHANNEL_BYTES", many_members_file, file_text_bytes, FILE_BYTES, FileTextBudget(FILE_BYTES, 0)
    ),
]


async def archives(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest, budget: FileTextBudget | None
) -> list[Archive]:
    """One SQLite archive, or two archives (as two processes) on one fresh Postgres database."""
    if backend == "sqlite":
        return [await open_archive(f"sqlite:///{tmp_path / 'parley.db'}", retention_days=0, file_text_budget=budget)]
    url = await fresh_postgres_database(request.getfixturevalue("postgres_server"))
    return [await open_archive(url, retention_days=0, file_text_budget=budget) for _ in range(2)]


# Two processes on Postgres need the test Postgres server: slow, as every Postgres test (tests/conftest.py).
@pytest.mark.parametrize("backend", ["sqlite", pytest.param("two_processes_on_postgres", marks=pytest.mark.slow)])
@pytest.mark.parametrize("limit", LIMITS, ids=[limit.name for limit in LIMITS])
async def test_a_count_limit_holds_under_concurrent_requests(
    limit: Limit, backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    opened = await archives(backend, tmp_path, request, limit.budget)
    try:
        await asyncio.gather(*(limit.request(opened[i % len(opened)], i) for i in range(REQUESTS)))
        assert await limit.kept(opened[0]) == limit.most
    finally:
        for archive in opened:
            await archive.close()


# --- The paths to the reminder limits ---------------------------------------------------------------------------


@dataclass
class Paths:
    """What a path's requests are made with; `stack` closes what they opened."""

    fake: FakeDiscord
    llm: FakeLLM
    bot: RunningBot
    tmp_path: Path
    make_settings: Any
    request: pytest.FixtureRequest
    stack: contextlib.AsyncExitStack


async def remind_sets(fake: FakeDiscord, dispatch: Callable[[int, dict[str, Any]], Awaitable[None]]) -> None:
    """100 `/remind set … every:hourly` from one member at once, the `i`th sent by `dispatch(i, payload)`; returns
    once each is answered."""
    options = [option("when", "1h"), option("what", "ping"), option("every", "hourly")]
    payloads = [command_payload(fake, "set", options, group="remind", permissions=MEMBER) for _ in range(REQUESTS)]
    await asyncio.gather(*(dispatch(i, payload) for i, payload in enumerate(payloads)))
    tokens = {payload["token"] for payload in payloads}

    def answered() -> bool:
        return len({token for token in tokens for call in fake.interaction_calls if f"/{token}" in call.path}) == len(
            tokens
        )

    await fake.wait_for(answered, what="every /remind set answered")


async def remind_set_at_once(paths: Paths) -> Archive:
    """Through the fake Discord, to one process on SQLite."""
    client = await paths.bot.start(reminders_per_member=PER_MEMBER, reminders_per_server=PER_SERVER)
    await remind_sets(paths.fake, lambda i, payload: paths.fake.dispatch("INTERACTION_CREATE", payload))
    assert client.archive is not None
    return client.archive


async def remind_set_at_once_on_two_processes(paths: Paths) -> Archive:
    """Through the fake Discord, half to each of two processes serving the server on one Postgres database (as
    across a reshard: shard 0 of 2 beside shard 1 of 7)."""
    fake = paths.fake
    url = await fresh_postgres_database(paths.request.getfixturevalue("postgres_server"))
    shards = [(2, 0), (7, 1)]
    assert all(fake.shard_of(GUILD_ID, count) == shard for count, shard in shards)
    clients, sessions = [], []
    for name, (count, shard) in zip(("first", "second"), shards, strict=True):
        process = RunningBot(fake, paths.llm, paths.tmp_path / name)
        paths.stack.push_async_callback(process.stop)
        clients.append(
            await process.start(
                database_url=url, shard_count=count, shard_ids=frozenset({shard}),
                reminders_per_member=PER_MEMBER, reminders_per_server=PER_SERVER,
            )
        )  # fmt: skip
        sessions.append(fake.session_of(shard))
    await remind_sets(fake, lambda i, payload: fake.dispatch_on(sessions[i % 2], "INTERACTION_CREATE", payload))
    archive = clients[0].archive
    assert archive is not None
    return archive


async def remind_tool_in_parallel(paths: Paths) -> Archive:
    """One answer whose model calls `remind` 8 times in parallel."""
    archive = await open_archive(f"sqlite:///{paths.tmp_path / 'tool.db'}", retention_days=0)
    paths.stack.push_async_callback(archive.close)

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if any(isinstance(p, ToolReturnPart) for m in messages for p in m.parts):
            return ModelResponse(parts=[TextPart("done")])
        calls = [ToolCallPart("remind", {"when": "1h", "text": f"r{i}", "every": "hourly"}, tool_call_id=f"r{i}")
                 for i in range(8)]  # fmt: skip
        return ModelResponse(parts=calls)

    settings = paths.make_settings(llm_base_url="http://127.0.0.1:9/v1")
    agent = build_responder(
        settings, model=FunctionModel(model), archive_enabled=False, memory_enabled=False, reminders_enabled=True
    )
    message = MessageRecord(900, CHANNEL, ALICE, "Alice", "remind me of 8 things every hour", NOW)
    conversation = ChannelConversation(CHANNEL, NOW, NOW, deque([message]))
    book = book_on(archive)
    # Alice may post in the channel and approves each call (the tool asks first: its entry in tools/registry.py).
    deps = chat_deps(reminders=book, requester_may_post=True, approver=FakeApprover(Verdict.APPROVED))
    await generate_reply(agent, conversation, message, deps)
    return archive


PATHS: list[tuple[str, Callable[[Paths], Awaitable[Archive]], tuple[int, int]]] = [
    ("/remind set", remind_set_at_once, (GUILD_ID, ALICE_ID)),
    ("/remind set, two processes on one Postgres", remind_set_at_once_on_two_processes, (GUILD_ID, ALICE_ID)),
    ("remind tool, 8 calls in parallel", remind_tool_in_parallel, (GUILD, ALICE)),
]


@pytest.mark.parametrize(
    ("requests", "member"),
    # A path on Postgres needs the test Postgres server: slow, as every Postgres test (tests/conftest.py).
    [pytest.param(p, m, id=name, marks=[pytest.mark.slow] if "Postgres" in name else []) for name, p, m in PATHS],
)
async def test_a_member_reaching_the_reminder_limit_at_once_keeps_exactly_the_limit(
    requests: Callable[[Paths], Awaitable[Archive]],
    member: tuple[int, int],
    fake: FakeDiscord,
    llm: FakeLLM,
    bot: RunningBot,
    tmp_path: Path,
    make_settings: Any,
    request: pytest.FixtureRequest,
) -> None:
    async with contextlib.AsyncExitStack() as stack:
        archive = await requests(Paths(fake, llm, bot, tmp_path, make_settings, request, stack))
        assert await archive.pending_reminders(*member) == (PER_MEMBER, PER_MEMBER)
