"""Processes sharing one Postgres archive: a setting one of them changes reaches the others' memory, no restart."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import asyncpg
import pytest

from admission.access import Lists
from admission.access_lists import AccessLists
from admission.optout import OptOuts
from archive import Archive
from archive.backends import open_archive
from archive.changes import ChangeListener
from archive.knowledge_types import KnowledgeDocument, KnowledgeSection
from config import Settings
from knowledge.base import KnowledgeBase
from ops.shared import SharedSettings, follow_other_processes
from profiles.channels import Profiles
from tests.conftest import fresh_postgres_database

GUILD, CHANNEL, THREAD, ALICE = 1000, 2000, 2500, 3000


@pytest.fixture
def settings(make_settings: Callable[..., Settings]) -> Settings:
    return make_settings(llm_model="base-model", llm_base_url="http://127.0.0.1:9/v1")


@dataclass
class Process:
    """What one bot process keeps of the shared settings, following the others through its own listener."""

    archive: Archive
    profiles: Profiles
    access: AccessLists
    knowledge: KnowledgeBase
    forget_markers: dict[int, int] = field(default_factory=dict)
    thread_channels: set[int] = field(default_factory=set)
    own_threads: dict[int, int] = field(default_factory=dict)
    forgotten: list[int] = field(default_factory=list)
    opt_outs: OptOuts = field(default_factory=OptOuts)
    listener: ChangeListener | None = None

    def shared(self) -> SharedSettings:
        return SharedSettings(
            self.archive,
            self.profiles,
            self.forget_markers,
            self.thread_channels,
            self.own_threads,
            self.forgotten.append,
            self.opt_outs,
            self.access,
            self.knowledge,
        )


async def start_process(url: str, settings: Settings) -> Process:
    archive = await open_archive(url, retention_days=0, flush_interval=0.01)
    process = Process(archive, Profiles(settings), AccessLists(settings), KnowledgeBase(archive))
    process.listener = await follow_other_processes(url, archive, process.shared())
    await process.profiles.attach(archive)
    await process.opt_outs.attach(archive)
    await process.access.attach(archive)
    return process


async def stop_process(process: Process) -> None:
    if process.listener is not None:
        await process.listener.close()
    await process.archive.close()


@pytest.fixture
async def postgres_url(postgres_server: str) -> str:
    return await fresh_postgres_database(postgres_server)


@pytest.fixture
async def two_processes(postgres_url: str, settings: Settings) -> AsyncIterator[tuple[Process, Process]]:
    first = await start_process(postgres_url, settings)
    second = await start_process(postgres_url, settings)
    yield first, second
    await stop_process(first)
    await stop_process(second)


async def until(predicate: Callable[[], bool]) -> None:
    """Wait for the other process to take the change up (notifications arrive on their own schedule)."""
    async with asyncio.timeout(10):
        while not predicate():  # noqa: ASYNC110 - the process's memory has no event to wait on
            await asyncio.sleep(0.01)


async def test_a_mode_set_in_one_process_is_the_others_mode(two_processes: tuple[Process, Process]) -> None:
    """A channel mode and a server persona set through one process are what the other resolves; a reset too."""
    first, second = two_processes
    await first.profiles.set_value("channel", GUILD, CHANNEL, "mode", "chatty", ALICE)
    await first.profiles.set_value("server", GUILD, CHANNEL, "persona", "a pirate", ALICE)
    await until(lambda: second.profiles.resolve(GUILD, CHANNEL).persona == "a pirate")
    await until(lambda: second.profiles.resolve(GUILD, CHANNEL).mode == "chatty")
    await first.profiles.reset_values("channel", GUILD, CHANNEL, ["mode"])
    await until(lambda: second.profiles.resolve(GUILD, CHANNEL).mode == "normal")


async def test_forget_markers_and_threads_reach_the_other_process(two_processes: tuple[Process, Process]) -> None:
    """A forget marker (which ends the channel's conversation there), a thread setting and an opened thread made
    through one process are in the other's memory."""
    first, second = two_processes
    await first.archive.set_forget_marker(CHANNEL, GUILD, 123)
    await first.archive.set_thread_setting(CHANNEL, GUILD, True)
    first.archive.add_own_thread(THREAD, CHANNEL, GUILD)
    await first.archive.flush()
    await until(lambda: second.forget_markers == {CHANNEL: 123})
    assert second.forgotten == [CHANNEL]
    await until(lambda: second.thread_channels == {CHANNEL} and second.own_threads == {THREAD: GUILD})
    await first.archive.set_thread_setting(CHANNEL, GUILD, False)
    first.archive.delete_channel(THREAD)
    await first.archive.flush()
    await until(lambda: not second.thread_channels and not second.own_threads)


async def test_an_opt_out_through_one_process_holds_in_the_other(two_processes: tuple[Process, Process]) -> None:
    """A member who opts out (and back in) through one process is opted out (and in) in the other's memory, which
    is what its message path reads."""
    first, second = two_processes
    await first.opt_outs.set(GUILD, ALICE, True)
    await until(lambda: second.opt_outs.opted_out(GUILD, ALICE))
    assert not second.opt_outs.opted_out(GUILD + 1, ALICE)
    await first.opt_outs.set(GUILD, ALICE, False)
    await until(lambda: not second.opt_outs.opted_out(GUILD, ALICE))


async def test_an_erasure_through_one_process_holds_in_the_other(two_processes: tuple[Process, Process]) -> None:
    """A member's erasure kept through one process withholds what they wrote up to it in the other's memory too,
    which catch-up, the gap, edits and pins read there."""
    first, second = two_processes
    await first.opt_outs.mark_erased(GUILD, ALICE, 500)
    await until(lambda: second.opt_outs.withheld(GUILD, ALICE, 500))
    assert not second.opt_outs.withheld(GUILD, ALICE, 501) and not second.opt_outs.withheld(GUILD + 1, ALICE, 5)


async def test_access_entries_reach_the_other_process(two_processes: tuple[Process, Process]) -> None:
    """A member blocked and a channel allowed through one process are in the other's lists; a clear too."""
    first, second = two_processes
    await first.access.put(GUILD, ALICE, "member", "block", 1)
    await first.access.put(GUILD, CHANNEL, "channel", "allow", 1)
    await until(lambda: second.access.lists_for(GUILD).blocked_members == {ALICE})
    await until(lambda: second.access.lists_for(GUILD).allowed_channels == {CHANNEL})
    await first.access.clear(GUILD, ALICE)
    await until(lambda: not second.access.lists_for(GUILD).blocked_members)


async def write_unannounced(url: str, *statements: str) -> None:
    """Change the shared tables without notifying anyone (triggers off for this session), as changes made while a
    process was not listening are, for it."""
    connection = await asyncpg.connect(url)
    try:
        await connection.execute("SET session_replication_role = replica")
        for statement in statements:
            await connection.execute(statement)
    finally:
        await connection.close()


async def until_documents(process: Process, expected: bool) -> None:
    """Wait for the process's answers to see whether the server has documents as `expected`."""
    async with asyncio.timeout(10):
        while await process.knowledge.has_documents(GUILD) != expected:  # noqa: ASYNC110 - a read, no event
            await asyncio.sleep(0.01)


async def test_a_document_added_or_removed_through_one_process_is_known_to_the_other(
    two_processes: tuple[Process, Process],
) -> None:
    """The other process keeps whether the server has documents (its answers offer the search tool only then), and
    takes up a document added, then removed, through the first."""
    first, second = two_processes
    assert not await second.knowledge.has_documents(GUILD)  # kept
    faq = KnowledgeDocument(
        GUILD, "file:faq.md", "faq.md", [KnowledgeSection("Ports", "8080")], ALICE, datetime.now(UTC)
    )
    document_id = await first.knowledge.add(faq)
    await until_documents(second, True)
    assert await first.knowledge.remove(GUILD, document_id)
    await until_documents(second, False)


async def test_everything_is_read_again_after_the_listening_connection_is_lost(
    two_processes: tuple[Process, Process], postgres_url: str
) -> None:
    """Cut off from the database, the listener listens again, the process reads what it missed, and later changes
    reach it as before."""
    first, second = two_processes
    await first.profiles.set_value("channel", GUILD, CHANNEL, "mode", "chatty", ALICE)
    await until(lambda: second.profiles.resolve(GUILD, CHANNEL).mode == "chatty")
    await write_unannounced(
        postgres_url, f"UPDATE profile_settings SET value = 'mention-only' WHERE scope_id = {CHANNEL}"
    )
    listener = second.listener
    assert listener is not None and listener.connection is not None
    cut = listener.connection.get_server_pid()
    connection = await asyncpg.connect(postgres_url)
    try:
        assert await connection.fetchval("SELECT pg_terminate_backend($1)", cut)
    finally:
        await connection.close()
    await until(lambda: second.profiles.resolve(GUILD, CHANNEL).mode == "mention-only")
    assert listener.connection is not None and listener.connection.get_server_pid() != cut
    await first.profiles.set_value("channel", GUILD, CHANNEL, "mode", "normal", ALICE)
    await until(
        lambda: (
            second.profiles.resolve(GUILD, CHANNEL)["mode"].set_by == ALICE
            and second.profiles.resolve(GUILD, CHANNEL).mode == "normal"
        )
    )


async def test_reading_everything_again_takes_up_missed_changes(
    two_processes: tuple[Process, Process], postgres_url: str
) -> None:
    """What changed while a process did not listen is in its memory once it reads everything again."""
    first, second = two_processes
    await first.profiles.set_value("channel", GUILD, CHANNEL, "mode", "chatty", ALICE)
    await first.archive.set_forget_marker(CHANNEL, GUILD, 7)
    await first.access.put(GUILD, ALICE, "member", "block", 1)
    first.archive.add_own_thread(THREAD, CHANNEL, GUILD)
    await first.archive.flush()
    await until(lambda: second.forget_markers == {CHANNEL: 7} and second.own_threads == {THREAD: GUILD})
    await until(lambda: second.access.lists_for(GUILD).blocked_members == {ALICE})
    assert not await second.knowledge.has_documents(GUILD)
    await write_unannounced(
        postgres_url,
        "DELETE FROM forget_markers",
        "DELETE FROM profile_settings",
        "DELETE FROM own_threads",
        "DELETE FROM access_entries",
        f"INSERT INTO access_entries VALUES ({GUILD}, {CHANNEL}, 'channel', 'block', 1, 0)",
        f"INSERT INTO thread_settings VALUES ({CHANNEL}, {GUILD}, TRUE, 0)",
        f"INSERT INTO opt_outs VALUES ({GUILD}, {ALICE}, 0)",
        f"INSERT INTO erasures VALUES ({GUILD + 1}, {ALICE}, 9, 0)",
        f"INSERT INTO knowledge_documents (guild_id, source, title, added_by, added_at)"
        f" VALUES ({GUILD}, 'file:faq.md', 'faq.md', {ALICE}, 0)",
    )
    assert not await second.knowledge.has_documents(GUILD)  # kept from before
    await second.shared().reread_all()
    assert await second.knowledge.has_documents(GUILD)
    assert (second.forget_markers, second.thread_channels, second.own_threads) == ({}, {CHANNEL}, {})
    assert second.opt_outs.opted_out(GUILD, ALICE) and second.opt_outs.withheld(GUILD + 1, ALICE, 9)
    assert second.profiles.resolve(GUILD, CHANNEL).mode == "normal"
    assert second.access.lists_for(GUILD) == Lists(blocked_channels=frozenset({CHANNEL}))


async def test_one_process_on_sqlite_listens_for_nothing(settings: Settings, tmp_path: Path) -> None:
    """With SQLite there is one process: nothing listens."""
    archive = await open_archive(f"sqlite:///{tmp_path / 'parley.db'}", retention_days=0)
    try:
        process = Process(archive, Profiles(settings), AccessLists(settings), KnowledgeBase(archive))
        assert await follow_other_processes("sqlite:///x", archive, process.shared()) is None
    finally:
        await archive.close()
