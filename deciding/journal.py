"""The decisions `/parley why` shows: the latest of each recently active channel, kept in memory."""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from operator import attrgetter

from archive import StoredDecision
from records import Decision, MessageRecord

# The most `/parley why` shows, and so what each channel keeps of its conversations' decisions.
KEPT_PER_CHANNEL = 25
# "No conversation" is most of a busy channel's decisions; a few answer "why was it silent?".
IDLE_DECISIONS_KEPT = 5
JOURNAL_MAX_CHANNELS = 1_000
EXCERPT_CHARS = 60
# The reason the decider gives a message outside any conversation.
IDLE_REASON = "no_conversation"


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    """`text` on one line of at most `limit` characters, with an ellipsis where it was cut."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


@dataclass(frozen=True, slots=True)
class LoggedDecision:
    """A decision as `/parley why` shows it: whose message, its first words, what was decided and why."""

    message_id: int
    author: str
    excerpt: str
    respond: bool
    reason: str
    tier: str
    confidence: float | None = None
    # Who wrote it, so an erasure finds the decisions on their questions asked by command (no archived message).
    author_id: int = 0

    @classmethod
    def of(cls, message: MessageRecord, decision: Decision) -> LoggedDecision:
        return cls(
            message.message_id,
            message.author,
            excerpt(message.content),
            decision.respond,
            decision.reason,
            decision.tier,
            decision.confidence,
            message.author_id,
        )

    @classmethod
    def from_archive(cls, row: StoredDecision) -> LoggedDecision:
        return cls(row.message_id, row.author_name, row.excerpt, row.responded, row.reason, row.tier, row.confidence)


@dataclass(slots=True)
class _ChannelJournal:
    in_conversation: deque[LoggedDecision]
    idle: deque[LoggedDecision]


class DecisionJournal:
    """The latest decisions of the most recently active channels, in memory, for `/parley why`.

    Bounded twice: per channel, the last `per_channel` decisions made inside a conversation plus
    the last `idle_per_channel` "no conversation" ones; and at most `max_channels` channels, the
    least recently active forgotten first. The idle decisions have their own short buffer because
    they are most of a busy channel's traffic and would push out the conversation asked about.
    """

    def __init__(
        self,
        *,
        per_channel: int = KEPT_PER_CHANNEL,
        idle_per_channel: int = IDLE_DECISIONS_KEPT,
        max_channels: int = JOURNAL_MAX_CHANNELS,
    ) -> None:
        self.per_channel = per_channel
        self.idle_per_channel = idle_per_channel
        self.max_channels = max_channels
        self._channels: OrderedDict[int, _ChannelJournal] = OrderedDict()

    def __len__(self) -> int:
        return len(self._channels)

    def add(self, channel_id: int, entry: LoggedDecision) -> None:
        journal = self._channels.get(channel_id)
        if journal is None:
            journal = _ChannelJournal(deque(maxlen=self.per_channel), deque(maxlen=self.idle_per_channel))
            self._channels[channel_id] = journal
            if len(self._channels) > self.max_channels:
                self._channels.popitem(last=False)
        else:
            self._channels.move_to_end(channel_id)
        entries = journal.idle if entry.reason == IDLE_REASON else journal.in_conversation
        if entries and entries[-1].message_id == entry.message_id:
            # A later verdict on the same message (a budget overruling an answer) replaces the first.
            entries[-1] = entry
        else:
            entries.append(entry)

    def recent(self, channel_id: int) -> list[LoggedDecision]:
        """The channel's kept decisions, newest first."""
        journal = self._channels.get(channel_id)
        if journal is None:
            return []
        return newest_first([*journal.in_conversation, *journal.idle])

    def forget_messages(self, channel_id: int, message_ids: Iterable[int]) -> None:
        """Drop the decisions about deleted messages: their excerpts are copies of the text."""
        journal = self._channels.get(channel_id)
        if journal is None:
            return
        gone = set(message_ids)
        journal.in_conversation = _without(journal.in_conversation, gone)
        journal.idle = _without(journal.idle, gone)

    def forget_author(self, author_id: int, channel_ids: Callable[[int], bool]) -> None:
        """Drop the decisions about what `author_id` wrote in the channels `channel_ids` says are theirs to erase
        (a server's): their excerpts are copies of it."""
        for channel_id, journal in self._channels.items():
            if channel_ids(channel_id):
                journal.in_conversation = _not_by(journal.in_conversation, author_id)
                journal.idle = _not_by(journal.idle, author_id)

    def drop_channel(self, channel_id: int) -> None:
        self._channels.pop(channel_id, None)


def newest_first(entries: Iterable[LoggedDecision]) -> list[LoggedDecision]:
    return sorted(entries, key=attrgetter("message_id"), reverse=True)


def _not_by(entries: deque[LoggedDecision], author_id: int) -> deque[LoggedDecision]:
    return deque((entry for entry in entries if entry.author_id != author_id), maxlen=entries.maxlen)


def _without(entries: deque[LoggedDecision], message_ids: set[int]) -> deque[LoggedDecision]:
    return deque((entry for entry in entries if entry.message_id not in message_ids), maxlen=entries.maxlen)
