"""The message archive: one interface per concern, two backends (SQLite embedded, Postgres for several processes).

`open_archive(url)` picks the backend from ``DATABASE_URL``; the bot sees `Archive`, every other user only the
concern it needs (`MessageLog`, `MemoryTables`, ...). The record types are shared by both backends. The archive
imports nothing else of Parley: what the model is shown of its rows is rendered outside it (prompting/quoting.py).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any, NamedTuple, Protocol
from urllib.parse import urlsplit

from archive.knowledge_types import KnowledgeStore
from archive.sqlite_url import sqlite_path_from_url
from records import (
    CaseReport,
    MessageReport,
    ModerationAction,
    ModerationCase,
    ModerationSettings,
    ReportFiled,
)

__all__ = [
    "AccessEntry",
    "AccessTables",
    "Archive",
    "ArchiveWriteFailed",
    "ArchivedAttachment",
    "ArchivedMessage",
    "ChannelSettingsStore",
    "ChannelStats",
    "Claims",
    "ConversationStore",
    "ConversationSummary",
    "DatabaseUrlError",
    "DecisionStore",
    "Digest",
    "Digests",
    "Feedback",
    "FeedbackTable",
    "Lifecycle",
    "MemberCounts",
    "MemberData",
    "Memory",
    "MemoryTables",
    "MessageLog",
    "ProfileTables",
    "ProfileValue",
    "ReconciliationLog",
    "ReconciliationProgress",
    "Reminder",
    "ReminderTable",
    "Snapshot",
    "StateStore",
    "StoredConversation",
    "StoredDecision",
    "SupportDecisionRow",
    "SupportHandoff",
    "TokenUsage",
    "TopAuthor",
    "UsageStore",
    "Write",
    "check_database_url",
    "describe_database_url",
    "is_postgres_url",
    "search_words",
]

POSTGRES_SCHEMES = ("postgresql", "postgres")

# A model may paste a paragraph as a query; beyond this many words the AND
# form never matches and the OR form only gets slower.
_MAX_QUERY_TOKENS = 12
# Models phrase searches as questions ("what did we say about the deploy").
# Under AND these words only hide answers, and bm25 must count every row
# holding each query word, which for these words is most of the archive.
_STOPWORDS = frozenset(
    """
    a about after all also am an and any are as at be been but by can could did
    do does for from had has have he her him his how i if in into is it its me
    my no not of on or our she so than that the their them then there these
    they this to us was we were what when where which who why will with would
    you your
    """.split()
)
# Same notion of a word as FTS5's unicode61 tokenizer (letters and digits).
_WORD = re.compile(r"[^\W_]+")


class DatabaseUrlError(ValueError):
    """``DATABASE_URL`` is malformed, names an unknown backend, or its database cannot be reached."""


@dataclass(frozen=True, slots=True)
class Write:
    """A kind of queued write and the statements that apply a run of such ops.

    Statements use ``?`` placeholders (``?N`` for the Nth parameter); the Postgres backend numbers them
    its way. Without ``row`` each statement is run once per op (executemany). With it, ``{rows}`` in each
    statement is replaced by one ``row`` placeholder group per op, so a run of ops is one statement. That
    matters for SQLite's FTS5 triggers: SQLite opens a savepoint for every statement execution and FTS5
    writes its pending index data to disk at each savepoint, so one statement per row would leave a tiny
    index segment per message (about 2x slower).

    A count claim (a count limit checked by the same statement that inserts, `INSERT … SELECT … WHERE count < ?`)
    sets ``claim_scope``: the scope (a server's id) an op's params claim in. SQLite's one writer already runs every
    write one after another; Postgres, whose processes each have a writer, takes a transaction lock on each scope
    before the statements, so a claim's count sees every claim committed before it in that scope, whichever
    process made it.
    """

    name: str
    statements: tuple[str, ...]
    row: str | None = None
    claim_scope: Callable[[tuple[Any, ...]], int] | None = None


class StoredConversation(NamedTuple):
    """A live conversation as the archive keeps it: when it was last active, and its snapshot
    (`upkeep.conversation_snapshots.snapshot`)."""

    last_activity: datetime
    state: str


class ConversationSummary(NamedTuple):
    """The model-written summary of one of a channel's ended conversations."""

    ended_at: datetime
    summary: str


class ArchiveWriteFailed(Exception):
    """A write its caller waits for was not committed; the log has the cause."""


@dataclass(frozen=True, slots=True)
class ArchivedAttachment:
    """A file shared with an archived message: its bytes stay on Discord's CDN; `text` is what was read from it."""

    attachment_id: int
    filename: str
    content_type: str
    size: int
    text: str = ""


@dataclass(frozen=True, slots=True)
class ArchivedMessage:
    """One Discord message as archived; times are tz-aware UTC datetimes."""

    message_id: int
    guild_id: int
    channel_id: int
    author_id: int
    author_name: str
    content: str
    created_at: datetime
    is_bot: bool
    reply_to_message_id: int | None = None
    edited_at: datetime | None = None
    mention_ids: frozenset[int] = frozenset()
    reply_to_author_id: int | None = None
    mentions_everyone: bool = False
    attachments: tuple[ArchivedAttachment, ...] = ()


class TopAuthor(NamedTuple):
    """One of a channel's most active authors: their id, latest display name and message count."""

    author_id: int
    name: str
    messages: int


@dataclass(frozen=True, slots=True)
class ChannelStats:
    """Activity summary of one channel over a time window."""

    message_count: int
    top_authors: list[TopAuthor]
    busiest_hours: list[tuple[int, int]]
    first_at: datetime | None
    last_at: datetime | None


@dataclass(frozen=True, slots=True)
class StoredDecision:
    """One logged decision on whether to reply to a message."""

    id: int
    channel_id: int
    message_id: int
    author_name: str
    excerpt: str
    responded: bool
    reason: str
    tier: str
    confidence: float | None
    decided_at: datetime


@dataclass(frozen=True, slots=True)
class TokenUsage:
    """Tokens the model used on one UTC day for one member's answers in one channel."""

    day: date
    guild_id: int
    channel_id: int
    member_id: int
    input_tokens: int
    output_tokens: int
    answers: int = 1
    # Of `input_tokens`, those the provider served from its prompt cache, where it reports them.
    cached_input_tokens: int = 0
    judge_calls: int = 0
    # `provider:model` as the provider named it; '' for rows from before the archive kept it.
    model: str = ""
    # Images made (IMAGE_MODEL, or the answer model's own image tool), with the tokens the image model spent.
    images: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True, slots=True)
class Memory:
    """One remembered fact: what, about whom (None: about no one in particular), who said it, where and when."""

    id: int
    guild_id: int
    channel_id: int
    about_id: int | None
    said_by_id: int
    source_message_id: int
    fact: str
    created_at: datetime


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A named copy of a channel's conversation model history."""

    name: str
    saved_by: int
    saved_at: datetime
    messages: int


class ProfileValue(NamedTuple):
    """A channel's or server's profile field as set by command; `set_at` in ms since the epoch."""

    scope_id: int
    field: str
    guild_id: int
    value: str
    set_by: int
    set_at: int


class AccessEntry(NamedTuple):
    """One server's allow or block entry for a channel, category, role or member, as set by command; `set_at` in ms
    since the epoch."""

    guild_id: int
    target_id: int
    kind: str  # channel, category, role or member
    listed: str  # allow or block
    set_by: int
    set_at: int


@dataclass(frozen=True, slots=True)
class ReconciliationProgress:
    """How far the recheck of one channel's archived messages against Discord has got (upkeep/reconciliation.py).

    A pass checks the archived messages older than `upto_id` from the newest down, and has checked those from
    `reached_id` up; 0 once it reached the oldest. `again_id`: Parley was away again during the pass, so another
    pass, of what is older than it, follows this one.
    """

    channel_id: int
    guild_id: int
    upto_id: int
    reached_id: int
    again_id: int | None = None

    @property
    def done(self) -> bool:
        return self.reached_id == 0 and self.again_id is None


class SupportHandoff(NamedTuple):
    """A support forum's post the desk hands to the staff role when it is due (helpdesk/desk.py), unless a member
    answered it first: the post's first message (whose id is its thread's), its server and asker."""

    message_id: int
    guild_id: int
    asker_id: int
    due_at: datetime


class Digest(NamedTuple):
    """A channel's digest as `/parley-admin digest on` set it (upkeep/digests.py's rules): `every` daily or weekly,
    at `hour` (in TIMEZONE) on `weekday` (0 is Monday; weekly only); `last_period`: the moment (ms since the epoch)
    of the latest digest taken up, by `claimant` (a process), or of the one due before it was set; `set_at` in ms."""

    channel_id: int
    guild_id: int
    every: str
    hour: int
    weekday: int
    last_period: int
    claimant: str
    set_by: int
    set_at: int


class Feedback(NamedTuple):
    """The asker's feedback on one support answer (helpdesk/feedback.py): offered when the answer's buttons were
    posted under `post_id`, then `verdict` ("" until a press: "solved" or "not_helpful"), the latest press's."""

    question_id: int
    guild_id: int
    channel_id: int
    asker_id: int
    post_id: int
    verdict: str
    offered_at: datetime
    decided_at: datetime | None = None


class SupportDecisionRow(NamedTuple):
    """A support desk decision on a question, as the support report reads it: `listed` is False for a question by
    no one (an opted-out member's placeholder) or by a member who has opted out since, whose words are not shown."""

    channel_id: int
    message_id: int
    reason: str
    excerpt: str
    decided_at: datetime
    listed: bool


class MessageLog(Protocol):
    """The channels' messages and their files: archived as they come, edited, deleted, searched and counted.

    Writes only enqueue: ``flush()`` (`Lifecycle`) waits until everything queued before it is committed.
    """

    def add(self, message: ArchivedMessage) -> None: ...
    def set_attachment_text(self, attachment_id: int, text: str) -> None: ...
    def keep_attachments(self, message_id: int, attachment_ids: Iterable[int]) -> None: ...
    def edit(self, message_id: int, content: str, edited_at: datetime) -> None: ...
    def delete(self, message_ids: Iterable[int]) -> None: ...
    def delete_channel(self, channel_id: int) -> None: ...
    def delete_guild(self, guild_id: int) -> None: ...
    async def search(
        self, channel_id: int, query: str, *, hours: float | None = None, limit: int = 20, now: datetime | None = None
    ) -> list[ArchivedMessage]: ...
    async def recent(
        self,
        channel_id: int,
        *,
        limit: int = 50,
        hours: float | None = None,
        now: datetime | None = None,
        before_id: int | None = None,
        after_id: int = 0,
    ) -> list[ArchivedMessage]: ...
    async def newest_message_ids(self, channel_id: int, count: int, *, before_id: int = ...) -> list[int]: ...
    async def message_ids_between(self, channel_id: int, after_id: int, upto_id: int) -> set[int]: ...
    async def stats(
        self, channel_id: int, *, hours: float | None = None, now: datetime | None = None
    ) -> ChannelStats: ...
    async def archived_channels(self) -> dict[int, int]: ...


class ConversationStore(Protocol):
    """Live conversations kept across restarts, and the summaries of ended ones."""

    def save_conversation(self, channel_id: int, state: Callable[[], StoredConversation]) -> None: ...
    def drop_conversation(self, channel_id: int) -> None: ...
    def add_summary(self, channel_id: int, summary: str, ended_at: datetime, message_ids: tuple[int, int]) -> None: ...
    def delete_summaries(self, channel_id: int) -> None: ...
    async def stored_conversations(self) -> dict[int, StoredConversation]: ...
    async def summaries(self, channel_id: int, limit: int = 3) -> list[ConversationSummary]: ...


class DecisionStore(Protocol):
    """The decisions on whether to answer, for `/parley why`."""

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
    ) -> None: ...
    async def recent_decisions(self, channel_id: int, limit: int = 20) -> list[StoredDecision]: ...


class UsageStore(Protocol):
    """Tokens spent, per day, server, channel and member."""

    def record_usage(self, usage: TokenUsage) -> None: ...
    async def usage_on(self, day: date) -> list[TokenUsage]: ...
    async def guild_usage(self, guild_id: int, first: date, last: date) -> list[TokenUsage]: ...


class ChannelSettingsStore(Protocol):
    """What channels are set to, shared by every process on the archive: forget markers, threads, own threads."""

    async def set_forget_marker(self, channel_id: int, guild_id: int, after_id: int) -> None: ...
    async def all_forget_markers(self) -> dict[int, int]: ...
    async def forget_marker(self, channel_id: int) -> int | None: ...
    async def set_thread_setting(self, channel_id: int, guild_id: int, threads: bool) -> None: ...
    async def thread_channels(self) -> set[int]: ...
    async def threads_enabled(self, channel_id: int) -> bool: ...
    def add_own_thread(self, thread_id: int, parent_id: int, guild_id: int) -> None: ...
    async def own_threads(self) -> dict[int, int]: ...
    async def own_thread_guild(self, thread_id: int) -> int | None: ...


class StateStore(Protocol):
    """Small named values the bot keeps (command sync hashes, ...)."""

    async def get_state(self, name: str) -> str | None: ...
    async def set_state(self, name: str, value: str) -> None: ...


class Claims(Protocol):
    """Which process decides a message, when several share the archive (answering/once.py)."""

    async def claim_message(self, message_id: int, claimant: str, claimed_at: datetime) -> bool: ...
    async def release_message(self, message_id: int, claimant: str) -> None: ...


class Digests(Protocol):
    """The channels' digests and the period each last posted, shared by every process (archive/digests.py)."""

    async def digests(self) -> list[Digest]: ...
    async def digest(self, channel_id: int) -> Digest | None: ...
    async def set_digest(self, digest: Digest) -> None: ...
    async def clear_digest(self, channel_id: int) -> None: ...
    async def claim_digest(self, schedule: Digest, period: int, claimant: str) -> bool: ...
    async def release_digest(self, schedule: Digest, period: int, claimant: str) -> None: ...


class ReconciliationLog(Protocol):
    """How far each channel's recheck against Discord has got, kept across restarts."""

    async def reconciliation_progress(self) -> dict[int, ReconciliationProgress]: ...
    async def save_reconciliation_progress(self, progress: ReconciliationProgress) -> None: ...


class MemoryTables(Protocol):
    """Facts members asked Parley to keep, and named copies of a channel's model history (memory/store.py's rules)."""

    async def new_memory_id(self) -> int: ...
    async def add_memory(self, memory: Memory) -> None: ...
    async def recall_memories(
        self, query: str, *, guild_id: int, channel_id: int, member_id: int, limit: int
    ) -> list[Memory]: ...
    async def visible_memories(self, *, guild_id: int, channel_id: int, member_id: int, limit: int) -> list[Memory]: ...
    async def memory(self, memory_id: int) -> Memory | None: ...
    async def memory_ids_about(self, *, guild_id: int, member_id: int) -> list[int]: ...
    async def memory_ids_in_channel(self, channel_id: int) -> list[int]: ...
    async def forget_memories(self, memory_ids: Sequence[int]) -> None: ...
    async def save_snapshot(
        self, *, channel_id: int, name: str, guild_id: int, saved_by: int, saved_at: datetime, history: str
    ) -> None: ...
    async def snapshots(self, channel_id: int) -> list[Snapshot]: ...
    async def snapshot_history(self, channel_id: int, name: str) -> str | None: ...


class MemberData(Protocol):
    """One member's data in one server: whether they opted out, what is kept of them (an export), and erasing it
    (upkeep/privacy.py's rules; the queries are archive/members.py's)."""

    async def set_opted_out(
        self, guild_id: int, member_id: int, opted_out: bool, *, now: datetime | None = None
    ) -> None: ...
    async def opt_outs(self, member_id: int | None = None) -> dict[tuple[int, int], datetime]: ...
    async def mark_erased(
        self, guild_id: int, member_id: int, upto_id: int, *, now: datetime | None = None
    ) -> None: ...
    async def erasures(self, member_id: int | None = None) -> dict[tuple[int, int], int]: ...
    async def member_message_ids(self, guild_id: int, member_id: int) -> dict[int, list[int]]: ...
    async def messages_by_id(self, message_ids: Sequence[int]) -> list[ArchivedMessage]: ...
    async def member_memories(self, guild_id: int, member_id: int) -> list[Memory]: ...
    async def member_usage(self, guild_id: int, member_id: int) -> list[TokenUsage]: ...
    async def member_counts(self, guild_id: int, member_id: int) -> MemberCounts: ...
    async def member_feedback(self, guild_id: int, member_id: int) -> list[Feedback]: ...
    async def snapshot_channels(self, guild_id: int) -> list[int]: ...
    async def erase_member(self, guild_id: int, member_id: int, message_ids: Sequence[int]) -> None: ...


class MemberCounts(NamedTuple):
    """How much the archive holds by or about a member in a server (conversation summaries: those written from
    their messages)."""

    messages: int
    attachments: int
    facts: int
    usage_rows: int
    summaries: int
    # Their feedback on the support answers to their questions (archive/support_feedback.py).
    feedback: int = 0


class ProfileTables(Protocol):
    """Profile values set by command (profiles/channels.py's rules)."""

    async def profile_values(self, scope_id: int | None = None) -> list[ProfileValue]: ...
    async def profile_value(self, scope_id: int, name: str) -> str | None: ...
    async def set_profile_value(self, value: ProfileValue) -> None: ...
    async def reset_profile_values(self, scope_id: int, names: Sequence[str]) -> None: ...


class AccessTables(Protocol):
    """The servers' access lists as set by command (admission/access_lists.py's rules)."""

    async def access_entries(self, guild_id: int | None = None) -> list[AccessEntry]: ...
    async def set_access_entry(self, entry: AccessEntry) -> None: ...
    async def clear_access_entry(self, guild_id: int, target_id: int) -> None: ...


@dataclass(frozen=True, slots=True)
class Reminder:
    """A reminder or timed post (reminders/ has the rules): posted in `channel_id` at `due_at`, then again at each
    time `every` says (its recurrence as reminders/when.py writes it; '' for once). `post_here`: a timed post to the
    channel that pings no one; else a reminder that pings its owner."""

    id: int
    guild_id: int  # 0: a direct message
    channel_id: int
    owner_id: int
    text: str
    due_at: datetime
    every: str
    post_here: bool
    created_at: datetime
    # A scheduled prompt (`/parley-admin schedule`): `text` is what Parley is asked at each time, and the post is its
    # answer, pinging no one (`post_here` is then True).
    prompt: bool = False


@dataclass(frozen=True, slots=True)
class ReminderLimits:
    """REMINDERS_PER_MEMBER and REMINDERS_PER_SERVER: reminders still to come, each member's and each server's."""

    per_member: int
    per_server: int


# A process's shards: (SHARD_COUNT, the shards it runs); None: it runs every shard.
Shards = tuple[int, frozenset[int]] | None


class ReminderTable(Protocol):
    """Reminders waiting for their time, and the claim that lets one process alone post each (archive/reminders.py)."""

    async def new_reminder_id(self) -> int: ...
    async def add_reminder(self, reminder: Reminder, limits: ReminderLimits) -> bool: ...
    async def reminder(self, reminder_id: int) -> Reminder | None: ...
    async def member_reminders(self, guild_id: int, owner_id: int) -> list[Reminder]: ...
    async def pending_reminders(self, guild_id: int, owner_id: int, *, prompts: bool = False) -> tuple[int, int]: ...
    async def scheduled_prompts(self, guild_id: int) -> list[Reminder]: ...
    async def due_reminders(self, now: datetime, shards: Shards, limit: int) -> list[Reminder]: ...
    async def next_reminder_due(self, shards: Shards) -> datetime | None: ...
    async def claim_reminder(self, reminder: Reminder, claimant: str, now: datetime, then: datetime | None) -> bool: ...
    async def delete_reminder(self, reminder_id: int) -> None: ...
    async def delete_member_reminders(self, guild_id: int, owner_id: int) -> None: ...


class VectorModel(NamedTuple):
    """The embedding model the stored vectors were made by, and their dimension."""

    name: str
    dimensions: int


class WaitingSection(NamedTuple):
    """A section the queue holds until it has an embedding."""

    section_id: int
    guild_id: int
    text: str


class VectorTable(Protocol):
    """What the knowledge base's vectors (knowledge/vectors.py) keep in the archive; both backends offer it."""

    async def vectors_available(self) -> bool:
        """Whether this database can keep vectors (sqlite-vec loads; pgvector is installed or installable)."""
        ...

    async def vector_model(self) -> VectorModel | None:
        """The model the stored vectors were made by; None before the first."""
        ...

    async def open_vectors(self, model: VectorModel) -> None:
        """Make the vector table for `model`'s vectors (kept if it is already `model`'s)."""
        ...

    async def requeue_vectors(self) -> int:
        """Put every embedded section back in the queue and drop the vectors (a new model); how many."""
        ...

    async def unembedded_sections(self) -> list[tuple[int, int, str, str]]:
        """(section id, server, heading, text) of each knowledge section neither embedded nor queued, by id: the
        sections added while there was no embedding model."""
        ...

    async def queue_embeddings(self, sections: Sequence[WaitingSection]) -> None:
        """Queue sections for embedding (a queued section's text is replaced); returns once committed."""
        ...

    async def waiting_embeddings(self, limit: int) -> list[WaitingSection]:
        """Up to `limit` queued sections, oldest id first."""
        ...

    async def store_vectors(self, vectors: Sequence[tuple[WaitingSection, Sequence[float]]]) -> None:
        """Keep each section's vector (replacing any) and take it off the queue; `open_vectors` first."""
        ...

    async def forget_vectors(self, section_ids: Sequence[int]) -> None:
        """Drop the sections' vectors and queued texts; returns once committed."""
        ...

    async def nearest_sections(
        self, guild_id: int, vector: Sequence[float], limit: int, *, max_distance: float = 2.0
    ) -> list[int]:
        """The server's `limit` sections nearest `vector` (cosine distance, at most `max_distance`), nearest first."""
        ...


class FeedbackTable(Protocol):
    """The support answers' feedback (archive/support_feedback.py) and the support decisions the report reads."""

    async def offer_feedback(self, offer: Feedback) -> None: ...
    async def set_feedback(
        self, question_id: int, asker_id: int, post_id: int, verdict: str, *, now: datetime | None = None
    ) -> Feedback | None: ...
    async def feedback(self, question_id: int) -> Feedback | None: ...
    async def guild_feedback(self, guild_id: int, since: datetime) -> list[Feedback]: ...
    async def support_decisions(
        self, guild_id: int, since: datetime, reasons: Sequence[str]
    ) -> list[SupportDecisionRow]: ...


class PinChannelTables(Protocol):
    """The channels whose pinned messages are taken into the knowledge base (edge/pins.py's rules)."""

    async def set_pins_taken(
        self, channel_id: int, guild_id: int, taken: bool, *, set_by: int, now: datetime | None = None
    ) -> None: ...
    async def pins_taken(self, channel_id: int) -> bool: ...
    async def pin_channels(self, guild_id: int | None = None) -> dict[int, int]: ...


class MemberModelTable(Protocol):
    """The model each member chose for the answers to them in a server (profiles/member_models.py's rules)."""

    async def set_member_model(
        self, guild_id: int, member_id: int, model: str | None, *, now: datetime | None = None
    ) -> None: ...
    async def member_model(self, guild_id: int, member_id: int) -> str | None: ...


class ModerationLog(Protocol):
    """Moderation: the cases and reports, the actions taken on a member's say, each server's settings, watched
    channels and screening tokens (archive/moderation.py; moderation/ has the rules)."""

    async def record_action(self, action: ModerationAction) -> int: ...
    async def moderation_actions(
        self, guild_id: int, *, member_id: int | None = None, limit: int = 25
    ) -> list[ModerationAction]: ...
    async def case_actions(self, case_id: int) -> list[ModerationAction]: ...
    async def report_message(self, report: MessageReport, *, per_hour: int) -> ReportFiled: ...
    async def reports_in_hour(self, guild_id: int, reporter_id: int, now: datetime) -> int: ...
    async def moderation_case(self, case_id: int) -> ModerationCase | None: ...
    async def moderation_cases(
        self, guild_id: int, *, member_id: int | None = None, limit: int = 25
    ) -> list[ModerationCase]: ...
    async def case_reports(self, case_id: int) -> list[CaseReport]: ...
    async def member_reports(self, guild_id: int, member_id: int) -> list[CaseReport]: ...
    async def assess_case(self, case_id: int, rule: str, confidence: float, summary: str) -> None: ...
    async def set_case_card(self, case_id: int, channel_id: int, message_id: int) -> None: ...
    async def close_case(self, case_id: int, closed_by: int, at: datetime) -> bool: ...
    async def erase_member_moderation(self, guild_id: int, member_id: int) -> None: ...
    async def moderation_settings(self, guild_id: int) -> ModerationSettings: ...
    async def set_moderation_settings(self, settings: ModerationSettings, *, set_by: int, now: datetime) -> None: ...
    async def set_watched(
        self, channel_id: int, guild_id: int, watched: bool, *, set_by: int, now: datetime
    ) -> None: ...
    async def watched_channels(self, guild_id: int | None = None) -> dict[int, int]: ...
    async def rules_document(self, guild_id: int, document_id: int) -> str | None: ...
    async def add_screening_tokens(self, guild_id: int, day: int, tokens: int) -> None: ...
    async def screening_tokens(self, guild_id: int, day: int) -> int: ...


class SupportChannelTables(Protocol):
    """The channels in support mode (helpdesk/'s rules), where unaddressed questions are answered from the documents,
    and the forum posts waiting for their hand-off to the staff role, handed off once across processes and restarts."""

    async def set_support(
        self, channel_id: int, guild_id: int, on: bool, *, set_by: int, now: datetime | None = None
    ) -> None: ...
    async def support_channels(self) -> dict[int, int]: ...
    async def await_handoff(self, handoff: SupportHandoff) -> None: ...
    async def due_handoffs(self, now: datetime) -> list[SupportHandoff]: ...
    async def claim_handoff(self, message_id: int, claimant: str) -> bool: ...
    async def drop_handoff(self, message_id: int) -> None: ...


class Lifecycle(Protocol):
    """Opening is `open_archive`'s; then writes are flushed, old rows pruned, and the archive closed.

    ``dialect`` ("sqlite" or "postgres") tells whether other processes may share it.
    """

    dialect: str

    async def close(self) -> None: ...
    async def flush(self) -> None: ...
    @property
    def pending_writes(self) -> int: ...
    async def prune(self, now: datetime | None = None) -> int: ...


class Archive(
    Lifecycle,
    MessageLog,
    ConversationStore,
    DecisionStore,
    UsageStore,
    ChannelSettingsStore,
    StateStore,
    Claims,
    Digests,
    ReconciliationLog,
    MemoryTables,
    ProfileTables,
    MemberData,
    AccessTables,
    ReminderTable,
    KnowledgeStore,
    VectorTable,
    PinChannelTables,
    MemberModelTable,
    FeedbackTable,
    ModerationLog,
    SupportChannelTables,
    Protocol,
):
    """Everything both backends offer, for the composition root; every other user takes the concern it needs.

    Fire-and-forget writes only enqueue; ``flush()`` waits until everything queued before it is committed.
    Writes a caller is told about (markers, settings, state, memories) return once committed and raise
    `ArchiveWriteFailed` otherwise.
    """


def is_postgres_url(url: str) -> bool:
    """Whether ``url`` asks for the Postgres backend (``postgresql://`` or Railway's ``postgres://``)."""
    return url.split("://", 1)[0].lower() in POSTGRES_SCHEMES


def describe_database_url(url: str) -> str:
    """Where ``url`` points, for messages and logs: the SQLite file, or the Postgres host and database, never
    the user or password."""
    if not is_postgres_url(url):
        return str(sqlite_path_from_url(url))
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = None
    host = parts.hostname or "localhost"
    return f"Postgres {host}{'' if port is None else f':{port}'}/{parts.path.strip('/')}"


def check_database_url(url: str) -> None:
    """Raise `DatabaseUrlError`, with a one-line reason, if ``url`` is neither a SQLite nor a Postgres URL."""
    if not is_postgres_url(url):
        try:
            sqlite_path_from_url(url)
        except ValueError as exc:
            raise DatabaseUrlError(str(exc)) from None
        return
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  (reading it validates it)
    except ValueError as exc:
        raise DatabaseUrlError(f"DATABASE_URL is not a valid Postgres URL ({exc})") from None
    if not (parts.hostname or "host=" in parts.query) or not parts.path.strip("/"):
        raise DatabaseUrlError("DATABASE_URL must be postgresql://user:password@host:port/database")


def search_words(query: str) -> list[str]:
    """The distinct words of free text, the way both backends search them: letters and digits only, so no
    search syntax survives; stopwords dropped unless nothing else is left; at most 12."""
    words = list(dict.fromkeys(_WORD.findall(query)))
    words = [word for word in words if word.lower() not in _STOPWORDS] or words
    return words[:_MAX_QUERY_TOKENS]


def folded_words(text: str) -> str:
    """``text``'s words lowercased and without diacritics, space-separated: what Postgres indexes and searches,
    the same folding as FTS5's ``unicode61 remove_diacritics 2`` tokenizer."""
    if text.isascii():  # most messages: nothing to decompose
        return " ".join(_WORD.findall(text.lower()))
    decomposed = unicodedata.normalize("NFKD", text.lower())
    stripped = "".join(char for char in decomposed if not unicodedata.combining(char))
    return " ".join(_WORD.findall(stripped))
