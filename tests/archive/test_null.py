"""archive/null.py: what the archive answers when DATABASE_URL is empty (reads find nothing, writes keep nothing)."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from archive import (
    AccessEntry,
    Archive,
    ArchivedMessage,
    ArchiveWriteFailed,
    Digest,
    MemberCounts,
    Memory,
    ProfileValue,
    Reminder,
    ReminderLimits,
    StoredConversation,
    TokenUsage,
)
from archive.knowledge_types import KnowledgeDocument, KnowledgeSection
from archive.null import NULL_ARCHIVE, NullArchive, archive_off

NOW = datetime(2026, 1, 1, tzinfo=UTC)
MESSAGE = ArchivedMessage(1, 10, 100, 7, "alice", "hello there", NOW, is_bot=False)
REMINDER = Reminder(1, 10, 100, 7, "stretch", NOW, "", post_here=False, created_at=NOW)
DIGEST = Digest(100, 10, "day", 9, 0, 0, "", 7, 0)


async def test_messages_written_to_it_are_never_found() -> None:
    archive: Archive = NullArchive()
    archive.add(MESSAGE)
    archive.edit(1, "edited", NOW)
    archive.save_conversation(100, lambda: StoredConversation(NOW, "{}"))
    archive.add_summary(100, "they talked", NOW, (1, 1))
    archive.record_usage(TokenUsage(date(2026, 1, 1), 10, 100, 7, 5, 5))
    archive.record_decision(
        channel_id=100, message_id=1, author_name="alice", excerpt="hello", responded=True, reason="named", tier="rule"
    )
    await archive.flush()
    assert archive.pending_writes == 0
    assert await archive.search(100, "hello") == []
    assert await archive.recent(100) == []
    assert await archive.messages_by_id([1]) == []
    assert await archive.newest_message_ids(100, 5) == []
    assert await archive.message_ids_between(100, 0, 10) == set()
    assert await archive.archived_channels() == {}
    assert await archive.stored_conversations() == {}
    assert await archive.summaries(100) == []
    assert await archive.usage_on(date(2026, 1, 1)) == []
    assert await archive.guild_usage(10, date(2026, 1, 1), date(2026, 1, 1)) == []
    assert await archive.recent_decisions(100) == []


async def test_its_channel_stats_count_nothing() -> None:
    stats = await NULL_ARCHIVE.stats(100, hours=24)
    assert (stats.message_count, stats.top_authors, stats.busiest_hours) == (0, [], [])
    assert stats.first_at is None and stats.last_at is None


async def test_settings_told_as_kept_are_read_back_as_never_set() -> None:
    archive = NullArchive()
    await archive.set_forget_marker(100, 10, 5)
    await archive.set_thread_setting(100, 10, True)
    await archive.set_state("catch-up", "done")
    await archive.set_profile_value(ProfileValue(100, "persona", 10, "a pirate", 7, 0))
    await archive.set_access_entry(AccessEntry(10, 100, "channel", "block", 7, 0))
    await archive.set_opted_out(10, 7, True)
    await archive.set_pins_taken(100, 10, True, set_by=7)
    await archive.set_member_model(10, 7, "fast-model")
    await archive.set_digest(DIGEST)
    assert await archive.forget_marker(100) is None
    assert await archive.all_forget_markers() == {}
    assert await archive.threads_enabled(100) is False
    assert await archive.thread_channels() == set()
    assert await archive.get_state("catch-up") is None
    assert await archive.profile_values() == []
    assert await archive.access_entries(10) == []
    assert await archive.opt_outs() == {}
    assert await archive.erasures() == {}
    assert await archive.pins_taken(100) is False
    assert await archive.pin_channels() == {}
    assert await archive.member_model(10, 7) is None
    assert await archive.digests() == []
    assert await archive.digest(100) is None


async def test_a_member_has_nothing_kept_to_export_or_erase() -> None:
    archive = NullArchive()
    assert await archive.member_message_ids(10, 7) == {}
    assert await archive.member_memories(10, 7) == []
    assert await archive.member_usage(10, 7) == []
    assert await archive.member_counts(10, 7) == MemberCounts(0, 0, 0, 0, 0)
    assert await archive.snapshot_channels(10) == []
    await archive.erase_member(10, 7, [1])
    await archive.delete_member_reminders(10, 7)


async def test_the_only_process_wins_every_claim() -> None:
    archive = NullArchive()
    assert await archive.claim_message(1, "this process", NOW) is True
    assert await archive.claim_message(1, "this process", NOW) is True
    assert await archive.claim_digest(DIGEST, 1, "this process") is True
    assert await archive.claim_reminder(REMINDER, "this process", NOW, None) is True


async def test_a_write_that_must_hand_back_what_it_made_fails_as_a_write_the_archive_could_not_keep() -> None:
    archive = NullArchive()
    document = KnowledgeDocument(10, "file:faq.md", "FAQ", [KnowledgeSection("", "text")], 7, NOW)
    with pytest.raises(ArchiveWriteFailed, match="DATABASE_URL"):
        await archive.new_memory_id()
    with pytest.raises(ArchiveWriteFailed, match="DATABASE_URL"):
        await archive.new_reminder_id()
    with pytest.raises(ArchiveWriteFailed, match="DATABASE_URL"):
        await archive.add_reminder(REMINDER, ReminderLimits(5, 50))
    with pytest.raises(ArchiveWriteFailed, match="DATABASE_URL"):
        await archive.add_knowledge(document)


async def test_memories_reminders_and_knowledge_are_never_found() -> None:
    archive = NullArchive()
    await archive.add_memory(Memory(1, 10, 100, 7, 7, 1, "likes tea", NOW))
    assert await archive.recall_memories("tea", guild_id=10, channel_id=100, member_id=7, limit=5) == []
    assert await archive.visible_memories(guild_id=10, channel_id=100, member_id=7, limit=5) == []
    assert await archive.memory(1) is None
    assert await archive.snapshots(100) == []
    assert await archive.snapshot_history(100, "before") is None
    assert await archive.reminder(1) is None
    assert await archive.member_reminders(10, 7) == []
    assert await archive.pending_reminders(10, 7) == (0, 0)
    assert await archive.due_reminders(NOW, None, 10) == []
    assert await archive.next_reminder_due(None) is None
    assert await archive.has_knowledge(10) is False
    assert await archive.knowledge_documents(10) == []
    assert await archive.search_knowledge(10, "install", limit=5, channel_ids=[100]) == []
    assert await archive.remove_knowledge(10, 1) is None


async def test_it_keeps_no_vectors() -> None:
    archive = NullArchive()
    assert await archive.vectors_available() is False
    assert await archive.vector_model() is None
    assert await archive.waiting_embeddings(10) == []
    assert await archive.nearest_sections(10, [0.1, 0.2], 5) == []


async def test_it_prunes_nothing_and_closes_more_than_once() -> None:
    archive = NullArchive()
    assert await archive.prune(NOW) == 0
    await archive.close()
    await archive.close()
    assert archive.dialect == "none"


def test_only_the_null_archive_is_off() -> None:
    assert archive_off(NULL_ARCHIVE)
    assert archive_off(NullArchive())
    assert not archive_off(object())
