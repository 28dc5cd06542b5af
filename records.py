"""The value types every layer speaks in: a message and its files, where a conversation happens, a channel's
mode, a decision, and where an answer was posted.

They import nothing of Parley, so the engine (conversation.py, deciding/followup.py), the files (attachments.py),
the Discord edge and the archive's callers all build on them without importing one another.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from pathlib import PurePosixPath
from typing import NamedTuple

# Where a conversation happens, which decides what in it is for Parley: in a channel (or a thread Parley did not
# open) only what the decider's tiers pick out; in a thread Parley opened for it, or a direct message, every
# message not addressed to someone else. A thread Parley opened also lasts as long as the thread is open.
CHANNEL = "channel"
OWN_THREAD = "own_thread"
DIRECT = "direct"
CONVERSATION_KINDS: tuple[str, ...] = (CHANNEL, OWN_THREAD, DIRECT)

# A channel's chattiness, set by its operators (`/parley-admin mode`); a channel not listed is normal.
MENTION_ONLY = "mention-only"
NORMAL = "normal"
CHATTY = "chatty"
CHANNEL_MODES: tuple[str, ...] = (MENTION_ONLY, NORMAL, CHATTY)


TEXT_EXTENSIONS = frozenset(
    """
    txt log md markdown rst csv tsv json jsonl yaml yml toml ini cfg conf env xml html htm css scss
    py pyi js mjs cjs ts tsx jsx java kt kts c h cc cpp hpp cs go rs rb php pl sh bash zsh fish ps1 bat
    sql lua r swift scala dart ex exs erl hs ml clj vue svelte gradle properties diff patch tex srt vtt
    """.split()
)
IMAGE_EXTENSIONS = frozenset({"png", "jpg", "jpeg", "gif", "webp"})
AUDIO_EXTENSIONS = frozenset({"ogg", "oga", "opus", "mp3", "m4a", "wav", "flac", "aac", "weba"})
VIDEO_EXTENSIONS = frozenset({"mp4", "mov", "webm", "mkv", "avi"})


class Kind(StrEnum):
    """What an attachment is, judged from its bytes (and, before download, from what it claims to be)."""

    IMAGE = "image"
    TEXT = "text"
    PDF = "pdf"
    AUDIO = "audio"
    VIDEO = "video"
    OTHER = "other"


# What Parley keeps and shows of a message from a member who opted out (admission/optout.py): nothing of who wrote
# it or what it said.
OPTED_OUT_AUTHOR = "a member who opted out"
OPTED_OUT_TEXT = "[a message from a member who opted out]"


@dataclass(frozen=True, slots=True)
class AttachmentInfo:
    """An attachment as Discord describes it; its bytes are fetched only when it is needed."""

    attachment_id: int
    filename: str
    content_type: str = ""
    size: int = 0

    @property
    def claimed_kind(self) -> Kind:
        """What the name and declared type say it is; the bytes have the last word (`detect`)."""
        declared = self.content_type.split(";")[0].strip().lower()
        extension = PurePosixPath(self.filename).suffix.lower().lstrip(".")
        for prefix, kind in (("image/", Kind.IMAGE), ("audio/", Kind.AUDIO), ("video/", Kind.VIDEO)):
            if declared.startswith(prefix):
                return kind
        if declared == "application/pdf" or extension == "pdf":
            return Kind.PDF
        for extensions, kind in (
            (IMAGE_EXTENSIONS, Kind.IMAGE),
            (AUDIO_EXTENSIONS, Kind.AUDIO),
            (VIDEO_EXTENSIONS, Kind.VIDEO),
        ):
            if extension in extensions:
                return kind
        if declared.startswith("text/") or declared in ("application/json", "application/xml"):
            return Kind.TEXT
        return Kind.TEXT if extension in TEXT_EXTENSIONS or not extension else Kind.OTHER


@dataclass(frozen=True, slots=True)
class MessageRecord:
    """One channel message, reduced to what the engine needs."""

    message_id: int
    channel_id: int
    author_id: int
    author: str
    content: str
    timestamp: datetime
    is_bot: bool = False
    mention_ids: frozenset[int] = frozenset()
    reply_to_author_id: int | None = None
    # It calls Parley by name without an @mention ("parley, what's …": addressing.py); set where it arrives.
    called_by_name: bool = False
    # Discord resolves @everyone/@here and role mentions separately from user mentions.
    mentions_everyone: bool = False
    # Files shared with the message, described; their bytes are read only when the model is shown them.
    attachments: tuple[AttachmentInfo, ...] = ()


@dataclass(frozen=True, slots=True)
class AskedAbout:
    """The message a question is about ("Ask Parley" on a message), with the conversation around it that the asker
    may read (none when the live conversation already shows it, or they may not read the channel's history)."""

    target: MessageRecord
    before: tuple[MessageRecord, ...] = ()
    after: tuple[MessageRecord, ...] = ()

    def others(self, messages: Iterable[MessageRecord]) -> list[MessageRecord]:
        """`messages` without those this shows: each message is quoted (and its files read) once in a prompt."""
        shown = {self.target.message_id, *(m.message_id for m in self.before), *(m.message_id for m in self.after)}
        return [message for message in messages if message.message_id not in shown]

    @property
    def files_first_last(self) -> list[MessageRecord]:
        """Its messages in the order the files preparer wants them, the one whose files come first last: the target's
        files are read before any around it, within the request's caps."""
        return [*self.before, *self.after, self.target]


class AnswerPosts(NamedTuple):
    """Where a conversation's latest answer is: the message it answered, and the posts it was written in, in order."""

    question_channel_id: int
    question_id: int
    post_ids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Decision:
    """One answer-or-not decision, with a short machine-readable reason and its tier."""

    respond: bool
    reason: str
    tier: str
    confidence: float | None = None
    # The judge's own words, for operators; `reason` stays a short fixed vocabulary.
    detail: str | None = None


@dataclass(frozen=True, slots=True)
class ModerationAction:
    """One thing done in a server on a member's say: a case card's button pressed, or a server action approved
    (archive/moderation.py keeps them; `/parley-admin moderation cases` lists them)."""

    guild_id: int
    channel_id: int
    action: str  # "delete" | "timeout" | "warn" | "dismiss" | "pin" | "unpin" | "thread" | "slowmode"
    actor_id: int  # who acted (pressed the button / approved)
    requested_by: int | None  # who asked (a tool's asker), None for a button
    target_member_id: int | None
    target_message_id: int | None
    detail: str  # the arguments as shown, e.g. "1 hour"
    case_id: int | None
    at: datetime


@dataclass(frozen=True, slots=True)
class MessageReport:
    """A member's report of a message to the moderators (or a watch list's flag, `reporter_id` None): the message
    as it was when reported, and why."""

    guild_id: int
    channel_id: int
    message_id: int
    author_id: int  # the member reported
    content: str
    reporter_id: int | None
    reason: str
    at: datetime


@dataclass(frozen=True, slots=True)
class ModerationCase:
    """A reported (or flagged) message under the moderators' review: one per message, however many report it.

    `content` is the message's text while the case is open, "" once it is closed (docs/limits-and-privacy.md);
    `rule`, `confidence` and `summary` are the model's reading, empty until it has read it.
    """

    id: int
    guild_id: int
    channel_id: int
    message_id: int
    author_id: int
    content: str
    source: str  # "report" | "watch"
    opened_at: datetime
    reporters: int
    rule: str = ""
    confidence: float = 0.0
    summary: str = ""
    card_channel_id: int | None = None
    card_message_id: int | None = None
    closed_at: datetime | None = None
    closed_by: int | None = None

    @property
    def is_open(self) -> bool:
        return self.closed_at is None


@dataclass(frozen=True, slots=True)
class CaseReport:
    """One member's report in a case: who, why, when."""

    case_id: int
    reporter_id: int
    reason: str
    at: datetime


@dataclass(frozen=True, slots=True)
class ModerationSettings:
    """A server's moderation settings (`/parley-admin moderation ...`): where case cards go (None: reports are not
    taken), the rules (a text set by command, or the knowledge base's document marked as the rules), and the words a
    watch list looks for."""

    guild_id: int
    channel_id: int | None = None
    rules: str = ""
    rules_document_id: int | None = None
    watch_words: tuple[str, ...] = ()


class ReportFiled(NamedTuple):
    """What became of a report: "opened" a case, "joined" an open one, "repeated" the reporter's earlier report of the
    same message (counted once), found it "reviewed" (its case is closed), or "limited" (the reporter's reports in
    the last hour are at the limit); with the message's case, None when limited."""

    outcome: str
    case: ModerationCase | None
