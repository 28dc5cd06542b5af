"""The responder's tools and their dependencies: the channel archive and memory, read for the member asking.

Every tool takes its channel, guild and member from `ChatDeps`, which the bot fills in per answer, never from
the model's arguments; what a tool returns is quoted data for the model, and a failure is a short line it can
relay, never a failed answer.
"""

# No `from __future__ import annotations`: pydantic-ai reads the tool functions' annotations on every request.
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from pydantic_ai import RunContext

from history import ArchivedMessage, ChannelStats, format_messages, format_stats
from memory import MemoryStore, format_memories

log = logging.getLogger("parley.tools")

SEARCH_LIMIT_MAX = 50
RECENT_LIMIT_MAX = 100
HOURS_MAX = 24 * 366.0


class MessageArchive(Protocol):
    """What the tools need from `history.HistoryArchive`."""

    async def search(
        self, channel_id: int, query: str, *, hours: float | None = None, limit: int = 20
    ) -> Sequence[ArchivedMessage]: ...

    async def recent(
        self, channel_id: int, *, limit: int = 50, hours: float | None = None
    ) -> Sequence[ArchivedMessage]: ...

    async def stats(self, channel_id: int, *, hours: float | None = None) -> ChannelStats: ...

    async def flush(self) -> None: ...


@dataclass
class ChatDeps:
    """Per-answer dependencies; tools read the channel and guild from here, never from the model.

    The names are whatever members and moderators called things; they reach the model only as quoted data.
    """

    bot_name: str
    bot_user_id: int
    guild_id: int
    guild_name: str
    channel_id: int
    channel_name: str
    archive: MessageArchive | None
    requester_id: int
    # Discord's Read Message History for the person asking, in this channel: the tools read for them.
    requester_can_read_history: bool
    # Set when the answer's limits withdraw the tools, to the limit that did (`wind_down_reason`); they stay withdrawn.
    wound_down: str | None = None
    # The remember/recall tools' store (None: they say memory is off), and the message being answered,
    # which a remembered fact records as its source.
    memory: MemoryStore | None = None
    message_id: int = 0
    # The tool sets the channel's profile offers (profiles.py); None: every one that is on.
    tool_sets: frozenset[str] | None = None


# --- Archive tools ----------------------------------------------------------------------------


async def search_history(ctx: RunContext[ChatDeps], query: str, hours: float | None = None, limit: int = 20) -> str:
    """Search this channel's archived messages for words or a phrase.

    Args:
        query: The words to look for, e.g. `release date` or `deploy failed`.
        hours: Only search messages from the last this many hours; leave empty to search all of them.
        limit: How many matching messages to return, 1 to 50.
    """

    async def read(archive: MessageArchive) -> str:
        found = await archive.search(
            ctx.deps.channel_id, query, hours=_hours(hours), limit=_clamp(limit, 1, SEARCH_LIMIT_MAX)
        )
        return _messages_text(found, ctx.deps.bot_user_id)

    return await _read_archive(ctx, "search_history", read)


async def get_recent_messages(ctx: RunContext[ChatDeps], limit: int = 50, hours: float | None = None) -> str:
    """Read this channel's latest archived messages, oldest first, including ones from before this conversation.

    Args:
        limit: How many messages to return, 1 to 100.
        hours: Only messages from the last this many hours; leave empty for no time limit.
    """

    async def read(archive: MessageArchive) -> str:
        found = await archive.recent(ctx.deps.channel_id, limit=_clamp(limit, 1, RECENT_LIMIT_MAX), hours=_hours(hours))
        return _messages_text(found, ctx.deps.bot_user_id, keep_newest=True)

    return await _read_archive(ctx, "get_recent_messages", read)


async def get_channel_stats(ctx: RunContext[ChatDeps], hours: float | None = None) -> str:
    """Count this channel's archived messages: how many, from whom, and over what period.

    Args:
        hours: Only count messages from the last this many hours; leave empty to count all of them.
    """

    async def read(archive: MessageArchive) -> str:
        stats = await archive.stats(ctx.deps.channel_id, hours=_hours(hours))
        return format_stats(stats, bot_user_id=ctx.deps.bot_user_id)

    return await _read_archive(ctx, "get_channel_stats", read)


ARCHIVE_TOOLS = (search_history, get_recent_messages, get_channel_stats)


# --- Memory tools -----------------------------------------------------------------------------

RECALL_LIMIT = 10


async def remember(ctx: RunContext[ChatDeps], fact: str, about_the_speaker: bool = True) -> str:
    """Save a fact for later conversations. Use it when someone asks you to remember something, and only then.

    The fact is on disk when this returns "Remembered"; say it was noted only after that.

    Args:
        fact: The fact as one short sentence naming who it is about, e.g. `Alice deploys on Fridays`.
        about_the_speaker: True if the fact is about the person asking you to remember it (you will then
            also recall it when they talk to you in this server's other channels); false for a fact about
            the channel, a project or someone else.
    """
    deps = ctx.deps
    if deps.memory is None:
        return "Memory is off here, so nothing was saved."
    if not fact.strip():
        return "Nothing was saved: the fact was empty."
    try:
        memory = await deps.memory.remember(
            guild_id=deps.guild_id,
            channel_id=deps.channel_id,
            said_by_id=deps.requester_id,
            source_message_id=deps.message_id,
            fact=fact,
            about_speaker=about_the_speaker,
        )
    except Exception:
        log.exception("remember failed in channel %s", deps.channel_id)
        return "The memory could not be saved just now; nothing was remembered."
    log.info(
        "remembered fact %s in channel %s for user %s",
        memory.id,
        deps.channel_id,
        deps.requester_id,
        extra={"tool": "remember", "channel_id": deps.channel_id, "requester_id": deps.requester_id},
    )
    return f"Remembered (memory {memory.id})."


async def recall(ctx: RunContext[ChatDeps], query: str) -> str:
    """Look up facts people asked you to remember: this channel's, and those the person asking told about themselves.

    Args:
        query: Words the fact would contain, e.g. `deploy Friday` or `favourite editor`.
    """
    deps = ctx.deps
    if deps.memory is None:
        return "Memory is off here."
    try:
        found = await deps.memory.recall(
            query,
            guild_id=deps.guild_id,
            channel_id=deps.channel_id,
            member_id=deps.requester_id,
            limit=RECALL_LIMIT,
            # The channel's facts are copies of its history, which this member may not read.
            channel_facts=deps.requester_can_read_history,
        )
    except Exception:
        log.exception("recall failed in channel %s", deps.channel_id)
        return "Memories could not be read just now."
    return format_memories(found, speaker_id=deps.requester_id)


MEMORY_TOOLS = (remember, recall)
HISTORY_NOT_PERMITTED = (
    "The person asking lacks the Read Message History permission in this channel, so its history cannot be"
    " read for them."
)


async def _read_archive(ctx: RunContext[ChatDeps], tool: str, read: Callable[[MessageArchive], Awaitable[str]]) -> str:
    """Run one tool's archive read; a failure becomes a short line the model can relay, not a failed answer."""
    archive = ctx.deps.archive
    if archive is None:
        return "The message archive is not available."
    if not ctx.deps.requester_can_read_history:
        log.info(
            "%s refused in channel %s: user %s cannot read its history",
            tool,
            ctx.deps.channel_id,
            ctx.deps.requester_id,
        )
        return HISTORY_NOT_PERMITTED
    log.info(
        "%s in channel %s for user %s",
        tool,
        ctx.deps.channel_id,
        ctx.deps.requester_id,
        extra={"tool": tool, "channel_id": ctx.deps.channel_id, "requester_id": ctx.deps.requester_id},
    )
    try:
        # The archive commits in batches; what was said a moment ago belongs in the answer too.
        await archive.flush()
        return await read(archive)
    except Exception:
        log.exception("%s failed in channel %s", tool, ctx.deps.channel_id)
        return "The message archive could not be read just now."


def _messages_text(messages: Sequence[ArchivedMessage], bot_user_id: int, *, keep_newest: bool = False) -> str:
    if not messages:
        return "No messages found."
    return format_messages(messages, bot_user_id=bot_user_id, keep_newest=keep_newest)


def _clamp(value: int, low: int, high: int) -> int:
    return max(low, min(high, value))


def _hours(hours: float | None) -> float | None:
    """A model's time window: nothing or a non-positive number means no window; capped at about a year."""
    if hours is None or hours <= 0:
        return None
    return min(hours, HOURS_MAX)
