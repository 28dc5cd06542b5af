"""The archive when DATABASE_URL is empty: one object that answers for it, so no part checks for a missing archive.

Reads find nothing, fire-and-forget writes are dropped, and writes a caller is told about are dropped too, except
those that must hand back what they made (an id, a stored document): they raise `ArchiveWriteFailed`, as a write
the archive could not keep does. Claims are always won: without an archive this process is the only one.
What a member is told when a feature needs the archive is the part's to say; `archive_off` is how it asks.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from datetime import date, datetime
from typing import Final

from archive import (
    AccessEntry,
    Archive,
    ArchivedMessage,
    ArchiveWriteFailed,
    ChannelStats,
    ConversationSummary,
    Digest,
    Feedback,
    MemberCounts,
    Memory,
    ProfileValue,
    ReconciliationProgress,
    Reminder,
    ReminderLimits,
    Shards,
    Snapshot,
    StoredConversation,
    StoredDecision,
    SupportDecisionRow,
    SupportHandoff,
    TokenUsage,
    VectorModel,
    WaitingSection,
)
from archive.knowledge_types import KnowledgeAdded, KnowledgeDocument, KnowledgeDocumentInfo, KnowledgeHit
from records import CaseReport, MessageReport, ModerationAction, ModerationCase, ModerationSettings, ReportFiled

__all__ = ["NULL_ARCHIVE", "NullArchive", "archive_off"]

# What a write that must hand something back says: nothing was kept.
_OFF = "the archive is off (DATABASE_URL is empty)"


class NullArchive:
    """An `Archive` that keeps nothing: every read is empty, every write is dropped (see the module)."""

    dialect = "none"

    # -- Lifecycle --

    async def close(self) -> None:
        return None

    async def flush(self) -> None:
        return None

    @property
    def pending_writes(self) -> int:
        return 0

    async def prune(self, now: datetime | None = None) -> int:
        return 0

    # -- MessageLog --

    def add(self, message: ArchivedMessage) -> None:
        return None

    def set_attachment_text(self, attachment_id: int, text: str) -> None:
        return None

    def keep_attachments(self, message_id: int, attachment_ids: Iterable[int]) -> None:
        return None

    def edit(self, message_id: int, content: str, edited_at: datetime) -> None:
        return None

    def delete(self, message_ids: Iterable[int]) -> None:
        return None

    def delete_channel(self, channel_id: int) -> None:
        return None

    def delete_guild(self, guild_id: int) -> None:
        return None

    async def search(
        self, channel_id: int, query: str, *, hours: float | None = None, limit: int = 20, now: datetime | None = None
    ) -> list[ArchivedMessage]:
        return []

    async def recent(
        self,
        channel_id: int,
        *,
        limit: int = 50,
        hours: float | None = None,
        now: datetime | None = None,
        before_id: int | None = None,
        after_id: int = 0,
    ) -> list[ArchivedMessage]:
        return []

    async def newest_message_ids(self, channel_id: int, count: int, *, before_id: int = 0) -> list[int]:
        return []

    async def message_ids_between(self, channel_id: int, after_id: int, upto_id: int) -> set[int]:
        return set()

    async def stats(self, channel_id: int, *, hours: float | None = None, now: datetime | None = None) -> ChannelStats:
        return ChannelStats(0, [], [], None, None)

    async def archived_channels(self) -> dict[int, int]:
        return {}

    # -- ConversationStore --

    def save_conversation(self, channel_id: int, state: Callable[[], StoredConversation]) -> None:
        return None

    def drop_conversation(self, channel_id: int) -> None:
        return None

    def add_summary(self, channel_id: int, summary: str, ended_at: datetime, message_ids: tuple[int, int]) -> None:
        return None

    def delete_summaries(self, channel_id: int) -> None:
        return None

    async def stored_conversations(self) -> dict[int, StoredConversation]:
        return {}

    async def summaries(self, channel_id: int, limit: int = 3) -> list[ConversationSummary]:
        return []

    # -- DecisionStore --

    def record_decision(
        self,
        *,
        channel_id: int,
        message_id: int,
        author_name: str,
        excerpt: str,
        responded: bool,
        reason: str,
        tier: str,
        confidence: float | None = None,
        decided_at: datetime | None = None,
        author_id: int = 0,
    ) -> None:
        return None

    async def recent_decisions(self, channel_id: int, limit: int = 20) -> list[StoredDecision]:
        return []

    # -- UsageStore --

    def record_usage(self, usage: TokenUsage) -> None:
        return None

    async def usage_on(self, day: date) -> list[TokenUsage]:
        return []

    async def guild_usage(self, guild_id: int, first: date, last: date) -> list[TokenUsage]:
        return []

    # -- ChannelSettingsStore --

    async def set_forget_marker(self, channel_id: int, guild_id: int, after_id: int) -> None:
        return None

    async def all_forget_markers(self) -> dict[int, int]:
        return {}

    async def forget_marker(self, channel_id: int) -> int | None:
        return None

    async def set_thread_setting(self, channel_id: int, guild_id: int, threads: bool) -> None:
        return None

    async def thread_channels(self) -> set[int]:
        return set()

    async def threads_enabled(self, channel_id: int) -> bool:
        return False

    def add_own_thread(self, thread_id: int, parent_id: int, guild_id: int) -> None:
        return None

    async def own_threads(self) -> dict[int, int]:
        return {}

    async def own_thread_guild(self, thread_id: int) -> int | None:
        return None

    # -- StateStore --

    async def get_state(self, name: str) -> str | None:
        return None

    async def set_state(self, name: str, value: str) -> None:
        return None

    # -- Claims, digests' and reminders' claims included: the only process wins them all --

    async def claim_message(self, message_id: int, claimant: str, claimed_at: datetime) -> bool:
        return True

    async def release_message(self, message_id: int, claimant: str) -> None:
        return None

    # -- Digests --

    async def digests(self) -> list[Digest]:
        return []

    async def digest(self, channel_id: int) -> Digest | None:
        return None

    async def set_digest(self, digest: Digest) -> None:
        return None

    async def clear_digest(self, channel_id: int) -> None:
        return None

    async def claim_digest(self, schedule: Digest, period: int, claimant: str) -> bool:
        return True

    async def release_digest(self, schedule: Digest, period: int, claimant: str) -> None:
        return None

    # -- ReconciliationLog --

    async def reconciliation_progress(self) -> dict[int, ReconciliationProgress]:
        return {}

    async def save_reconciliation_progress(self, progress: ReconciliationProgress) -> None:
        return None

    # -- MemoryTables --

    async def new_memory_id(self) -> int:
        raise ArchiveWriteFailed(_OFF)

    async def add_memory(self, memory: Memory) -> None:
        return None

    async def recall_memories(
        self, query: str, *, guild_id: int, channel_id: int, member_id: int, limit: int
    ) -> list[Memory]:
        return []

    async def visible_memories(self, *, guild_id: int, channel_id: int, member_id: int, limit: int) -> list[Memory]:
        return []

    async def memory(self, memory_id: int) -> Memory | None:
        return None

    async def memory_ids_about(self, *, guild_id: int, member_id: int) -> list[int]:
        return []

    async def memory_ids_in_channel(self, channel_id: int) -> list[int]:
        return []

    async def forget_memories(self, memory_ids: Sequence[int]) -> None:
        return None

    async def save_snapshot(
        self, *, channel_id: int, name: str, guild_id: int, saved_by: int, saved_at: datetime, history: str
    ) -> None:
        return None

    async def snapshots(self, channel_id: int) -> list[Snapshot]:
        return []

    async def snapshot_history(self, channel_id: int, name: str) -> str | None:
        return None

    # -- MemberData --

    async def set_opted_out(
        self, guild_id: int, member_id: int, opted_out: bool, *, now: datetime | None = None
    ) -> None:
        return None

    async def opt_outs(self, member_id: int | None = None) -> dict[tuple[int, int], datetime]:
        return {}

    async def mark_erased(self, guild_id: int, member_id: int, upto_id: int, *, now: datetime | None = None) -> None:
        return None

    async def erasures(self, member_id: int | None = None) -> dict[tuple[int, int], int]:
        return {}

    async def member_message_ids(self, guild_id: int, member_id: int) -> dict[int, list[int]]:
        return {}

    async def messages_by_id(self, message_ids: Sequence[int]) -> list[ArchivedMessage]:
        return []

    async def member_memories(self, guild_id: int, member_id: int) -> list[Memory]:
        return []

    async def member_usage(self, guild_id: int, member_id: int) -> list[TokenUsage]:
        return []

    async def member_counts(self, guild_id: int, member_id: int) -> MemberCounts:
        return MemberCounts(0, 0, 0, 0, 0)

    async def member_feedback(self, guild_id: int, member_id: int) -> list[Feedback]:
        return []

    async def snapshot_channels(self, guild_id: int) -> list[int]:
        return []

    async def erase_member(self, guild_id: int, member_id: int, message_ids: Sequence[int]) -> None:
        return None

    # -- ProfileTables --

    async def profile_values(self, scope_id: int | None = None) -> list[ProfileValue]:
        return []

    async def profile_value(self, scope_id: int, name: str) -> str | None:
        return None

    async def set_profile_value(self, value: ProfileValue) -> None:
        return None

    async def reset_profile_values(self, scope_id: int, names: Sequence[str]) -> None:
        return None

    # -- AccessTables --

    async def access_entries(self, guild_id: int | None = None) -> list[AccessEntry]:
        return []

    async def set_access_entry(self, entry: AccessEntry) -> None:
        return None

    async def clear_access_entry(self, guild_id: int, target_id: int) -> None:
        return None

    # -- ReminderTable --

    async def new_reminder_id(self) -> int:
        raise ArchiveWriteFailed(_OFF)

    async def add_reminder(self, reminder: Reminder, limits: ReminderLimits) -> bool:
        raise ArchiveWriteFailed(_OFF)

    async def reminder(self, reminder_id: int) -> Reminder | None:
        return None

    async def member_reminders(self, guild_id: int, owner_id: int) -> list[Reminder]:
        return []

    async def pending_reminders(self, guild_id: int, owner_id: int, *, prompts: bool = False) -> tuple[int, int]:
        return 0, 0

    async def scheduled_prompts(self, guild_id: int) -> list[Reminder]:
        return []

    async def due_reminders(self, now: datetime, shards: Shards, limit: int) -> list[Reminder]:
        return []

    async def next_reminder_due(self, shards: Shards) -> datetime | None:
        return None

    async def claim_reminder(self, reminder: Reminder, claimant: str, now: datetime, then: datetime | None) -> bool:
        return True

    async def delete_reminder(self, reminder_id: int) -> None:
        return None

    async def delete_member_reminders(self, guild_id: int, owner_id: int) -> None:
        return None

    # -- ModerationLog: no case can be kept, so none is opened --

    async def record_action(self, action: ModerationAction) -> int:
        raise ArchiveWriteFailed(_OFF)

    async def moderation_actions(
        self, guild_id: int, *, member_id: int | None = None, limit: int = 25
    ) -> list[ModerationAction]:
        return []

    async def case_actions(self, case_id: int) -> list[ModerationAction]:
        return []

    async def report_message(self, report: MessageReport, *, per_hour: int) -> ReportFiled:
        raise ArchiveWriteFailed(_OFF)

    async def reports_in_hour(self, guild_id: int, reporter_id: int, now: datetime) -> int:
        return 0

    async def moderation_case(self, case_id: int) -> ModerationCase | None:
        return None

    async def moderation_cases(
        self, guild_id: int, *, member_id: int | None = None, limit: int = 25
    ) -> list[ModerationCase]:
        return []

    async def case_reports(self, case_id: int) -> list[CaseReport]:
        return []

    async def member_reports(self, guild_id: int, member_id: int) -> list[CaseReport]:
        return []

    async def assess_case(self, case_id: int, rule: str, confidence: float, summary: str) -> None:
        return None

    async def set_case_card(self, case_id: int, channel_id: int, message_id: int) -> None:
        return None

    async def close_case(self, case_id: int, closed_by: int, at: datetime) -> bool:
        return False

    async def erase_member_moderation(self, guild_id: int, member_id: int) -> None:
        return None

    async def moderation_settings(self, guild_id: int) -> ModerationSettings:
        return ModerationSettings(guild_id)

    async def set_moderation_settings(self, settings: ModerationSettings, *, set_by: int, now: datetime) -> None:
        return None

    async def set_watched(self, channel_id: int, guild_id: int, watched: bool, *, set_by: int, now: datetime) -> None:
        return None

    async def watched_channels(self, guild_id: int | None = None) -> dict[int, int]:
        return {}

    async def rules_document(self, guild_id: int, document_id: int) -> str | None:
        return None

    async def add_screening_tokens(self, guild_id: int, day: int, tokens: int) -> None:
        return None

    async def screening_tokens(self, guild_id: int, day: int) -> int:
        return 0

    # -- KnowledgeStore --

    async def add_knowledge(self, document: KnowledgeDocument, *, most: int = 0) -> KnowledgeAdded:
        raise ArchiveWriteFailed(_OFF)

    async def remove_knowledge(self, guild_id: int, document_id: int) -> list[int] | None:
        return None

    async def knowledge_document_id(self, guild_id: int, source: str) -> int | None:
        return None

    async def has_knowledge(self, guild_id: int) -> bool:
        return False

    async def knowledge_documents(self, guild_id: int) -> list[KnowledgeDocumentInfo]:
        return []

    async def search_knowledge(
        self, guild_id: int, query: str, *, limit: int, channel_ids: Collection[int]
    ) -> list[KnowledgeHit]:
        return []

    async def sections_by_id(
        self, section_ids: Sequence[int], *, guild_id: int, channel_ids: Collection[int]
    ) -> list[KnowledgeHit]:
        return []

    # -- VectorTable: no database, so no vectors --

    async def vectors_available(self) -> bool:
        return False

    async def vector_model(self) -> VectorModel | None:
        return None

    async def open_vectors(self, model: VectorModel) -> None:
        return None

    async def requeue_vectors(self) -> int:
        return 0

    async def queue_embeddings(self, sections: Sequence[WaitingSection]) -> None:
        return None

    async def waiting_embeddings(self, limit: int) -> list[WaitingSection]:
        return []

    async def store_vectors(self, vectors: Sequence[tuple[WaitingSection, Sequence[float]]]) -> None:
        return None

    async def forget_vectors(self, section_ids: Sequence[int]) -> None:
        return None

    async def nearest_sections(
        self, guild_id: int, vector: Sequence[float], limit: int, *, max_distance: float = 2.0
    ) -> list[int]:
        return []

    async def unembedded_sections(self) -> list[tuple[int, int, str, str]]:
        return []

    # -- PinChannelTables --

    async def set_pins_taken(
        self, channel_id: int, guild_id: int, taken: bool, *, set_by: int, now: datetime | None = None
    ) -> None:
        return None

    async def pins_taken(self, channel_id: int) -> bool:
        return False

    async def pin_channels(self, guild_id: int | None = None) -> dict[int, int]:
        return {}

    # -- MemberModelTable --

    async def set_member_model(
        self, guild_id: int, member_id: int, model: str | None, *, now: datetime | None = None
    ) -> None:
        return None

    async def member_model(self, guild_id: int, member_id: int) -> str | None:
        return None

    # -- FeedbackTable: nothing offered is kept, so no press finds its offer --

    async def offer_feedback(self, offer: Feedback) -> None:
        raise ArchiveWriteFailed(_OFF)

    async def set_feedback(
        self, question_id: int, asker_id: int, post_id: int, verdict: str, *, now: datetime | None = None
    ) -> Feedback | None:
        return None

    async def feedback(self, question_id: int) -> Feedback | None:
        return None

    async def guild_feedback(self, guild_id: int, since: datetime) -> list[Feedback]:
        return []

    async def support_decisions(
        self, guild_id: int, since: datetime, reasons: Sequence[str]
    ) -> list[SupportDecisionRow]:
        return []

    # -- SupportChannelTables --

    async def set_support(
        self, channel_id: int, guild_id: int, on: bool, *, set_by: int, now: datetime | None = None
    ) -> None:
        return None

    async def support_channels(self) -> dict[int, int]:
        return {}

    async def await_handoff(self, handoff: SupportHandoff) -> None:
        return None

    async def due_handoffs(self, now: datetime) -> list[SupportHandoff]:
        return []

    async def claim_handoff(self, message_id: int, claimant: str) -> bool:
        return True

    async def drop_handoff(self, message_id: int) -> None:
        return None


# The one null archive: it holds nothing, so every client and test may share it.
NULL_ARCHIVE: Final[Archive] = NullArchive()  # typed so: mypy checks it is a whole `Archive`


def archive_off(archive: object) -> bool:
    """Whether `archive` is the null archive: for a part that tells a member a feature needs DATABASE_URL."""
    return isinstance(archive, NullArchive)
