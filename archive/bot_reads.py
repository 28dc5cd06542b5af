"""The reads of the bot's own tables both backends share: live conversations and their summaries, thread settings,
forget markers, token usage, reply decisions and named state.

Each is written once, on the backend's `read` (SQLite-style placeholders, committed data only).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date
from typing import Any

from archive import ConversationSummary, StoredConversation, StoredDecision, TokenUsage
from archive.tables import BackendTables
from archive.times import from_day, from_ms, to_day

__all__ = ["BotReads"]

_USAGE_COLUMNS = (
    "guild_id, channel_id, member_id, input_tokens, output_tokens, answers, cached_input_tokens, judge_calls, model,"
    " images"
)
_DECISION_COLUMNS = "id, channel_id, message_id, author_name, excerpt, responded, reason, tier, confidence, decided_at"


class BotReads(BackendTables):
    """What the bot reads back of what it wrote: conversations, threads, forget markers, usage, decisions, state."""

    async def stored_conversations(self) -> dict[int, StoredConversation]:
        """Every kept live conversation, by channel id (the caller decides which are still live)."""
        rows = await self.read("SELECT channel_id, last_activity, state FROM conversations")
        return {int(channel_id): StoredConversation(from_ms(last), state) for channel_id, last, state in rows}

    async def summaries(self, channel_id: int, limit: int = 3) -> list[ConversationSummary]:
        """The channel's latest `limit` conversation summaries, newest first."""
        rows = await self.read(
            "SELECT ended_at, summary FROM conversation_summaries WHERE channel_id = ?"
            " ORDER BY ended_at DESC, id DESC LIMIT ?",
            (channel_id, limit),
        )
        return [ConversationSummary(from_ms(ended), summary) for ended, summary in rows]

    async def thread_channels(self) -> set[int]:
        """The channels where an @mention opens a thread."""
        rows = await self.read("SELECT channel_id FROM thread_settings WHERE threads")
        return {int(channel_id) for (channel_id,) in rows}

    async def own_threads(self) -> dict[int, int]:
        """The threads Parley opened, with their server's id."""
        rows = await self.read("SELECT thread_id, guild_id FROM own_threads")
        return {int(thread_id): int(guild_id) for thread_id, guild_id in rows}

    async def all_forget_markers(self) -> dict[int, int]:
        """Every channel's /parley-admin forget marker: the message id its context starts after."""
        rows = await self.read("SELECT channel_id, after_id FROM forget_markers")
        return {int(channel_id): int(after_id) for channel_id, after_id in rows}

    async def usage_on(self, day: date) -> list[TokenUsage]:
        """Every server's, channel's and member's tokens on one UTC day."""
        rows = await self.read(f"SELECT {_USAGE_COLUMNS} FROM token_usage WHERE day = ?", (to_day(day),))
        return [TokenUsage(day, *row) for row in rows]

    async def guild_usage(self, guild_id: int, first: date, last: date) -> list[TokenUsage]:
        """One server's rows from UTC day `first` to `last`, both included."""
        rows = await self.read(
            f"SELECT day, {_USAGE_COLUMNS} FROM token_usage WHERE guild_id = ? AND day BETWEEN ? AND ?",
            (guild_id, to_day(first), to_day(last)),
        )
        return [TokenUsage(from_day(day), *row) for day, *row in rows]

    async def recent_decisions(self, channel_id: int, limit: int = 20) -> list[StoredDecision]:
        """The latest ``limit`` decisions in a channel, newest first."""
        if limit <= 0:
            return []
        rows = await self.read(
            f"SELECT {_DECISION_COLUMNS} FROM decisions WHERE channel_id = ? ORDER BY decided_at DESC, id DESC LIMIT ?",
            (channel_id, limit),
        )
        return [_decision_from_row(row) for row in rows]

    async def get_state(self, name: str) -> str | None:
        """The value stored under `name` by `set_state`, or None."""
        rows = await self.read("SELECT value FROM bot_state WHERE name = ?", (name,))
        return next((str(value) for (value,) in rows), None)


def _decision_from_row(row: Sequence[Any]) -> StoredDecision:
    id_, channel_id, message_id, name, excerpt, responded, reason, tier, confidence, decided = row
    return StoredDecision(
        id=id_,
        channel_id=channel_id,
        message_id=message_id,
        author_name=name,
        excerpt=excerpt,
        responded=bool(responded),
        reason=reason,
        tier=tier,
        confidence=confidence,
        decided_at=from_ms(decided),
    )
