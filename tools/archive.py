"""The archive's tools: the channel's history, read for the member asking as far as they may read it."""

# No `from __future__ import annotations`: pydantic-ai reads the tool functions' annotations on every request.
import logging
from collections.abc import Awaitable, Callable, Sequence

from pydantic_ai import RunContext

from archive import ArchivedMessage
from prompting.quoting import format_messages, format_stats
from tools.deps import ChatDeps, MessageArchive, log_tool_call
from tools.registry import GET_CHANNEL_STATS, GET_RECENT_MESSAGES, SEARCH_HISTORY

log = logging.getLogger("parley.tools")


SEARCH_LIMIT_MAX = 50
RECENT_LIMIT_MAX = 100
HOURS_MAX = 24 * 366.0


async def search_history(ctx: RunContext[ChatDeps], query: str, hours: float | None = None, limit: int = 20) -> str:
    """Search this channel's archived messages for words or a phrase.

    Args:
        query: The words to look for, e.g. `deploy failed`.
        hours: Only the last this many hours; empty for all.
        limit: How many to return, 1 to 50.
    """

    async def read(archive: MessageArchive) -> str:
        found = await archive.search(
            ctx.deps.channel_id, query, hours=_hours(hours), limit=_clamp(limit, 1, SEARCH_LIMIT_MAX)
        )
        return _messages_text(found, ctx.deps.bot_user_id)

    return await _read_archive(ctx, SEARCH_HISTORY.name, read)


async def get_recent_messages(ctx: RunContext[ChatDeps], limit: int = 50, hours: float | None = None) -> str:
    """Read this channel's latest archived messages, oldest first, from before this conversation too.

    Args:
        limit: How many to return, 1 to 100.
        hours: Only the last this many hours; empty for all.
    """

    async def read(archive: MessageArchive) -> str:
        found = await archive.recent(ctx.deps.channel_id, limit=_clamp(limit, 1, RECENT_LIMIT_MAX), hours=_hours(hours))
        return _messages_text(found, ctx.deps.bot_user_id, keep_newest=True)

    return await _read_archive(ctx, GET_RECENT_MESSAGES.name, read)


async def get_channel_stats(ctx: RunContext[ChatDeps], hours: float | None = None) -> str:
    """Count this channel's archived messages: how many, from whom, over what period.

    Args:
        hours: Only the last this many hours; empty for all.
    """

    async def read(archive: MessageArchive) -> str:
        stats = await archive.stats(ctx.deps.channel_id, hours=_hours(hours))
        return format_stats(stats, bot_user_id=ctx.deps.bot_user_id)

    return await _read_archive(ctx, GET_CHANNEL_STATS.name, read)


ARCHIVE_TOOLS = (
    SEARCH_HISTORY.tool(search_history),
    GET_RECENT_MESSAGES.tool(get_recent_messages),
    GET_CHANNEL_STATS.tool(get_channel_stats),
)


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
    log_tool_call(ctx, tool)
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
