"""Token accounting: what the model spent today (UTC) per server, channel and member, and the server budget.

The ledger keeps the current day in memory, so the check before every answer and `/parley status`
never wait on the disk. With the archive on, every answer's tokens are also queued to it (batched
like every archive write), and a restart reads the day back; with it off, the day lasts as long as
the process. A new UTC day starts from zero.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Protocol

from archive.sqlite import TokenUsage

TOP_MEMBERS = 5


class UsageArchive(Protocol):
    """What the ledger needs from `archive.Archive`."""

    def record_usage(self, usage: TokenUsage) -> None: ...

    async def usage_on(self, day: date) -> list[TokenUsage]: ...


@dataclass(frozen=True, slots=True)
class UsageSummary:
    """A server's tokens today, for `/parley status`: its total, one channel's, and its top members'."""

    day: date
    server_tokens: int
    channel_tokens: int
    top_members: list[tuple[int, int]]


def next_utc_midnight(day: date) -> datetime:
    """When the day after `day` begins, in UTC: when a daily budget resets."""
    return datetime.combine(day + timedelta(days=1), time(), UTC)


class UsageLedger:
    """Today's tokens per (server, channel, member), in memory and, when attached, in the archive."""

    def __init__(self, clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self.clock = clock
        self.archive: UsageArchive | None = None
        self.day = self.today()
        self._by_place: Counter[tuple[int, int, int]] = Counter()
        self._by_server: Counter[int] = Counter()

    def today(self) -> date:
        return self.clock().astimezone(UTC).date()

    async def attach(self, archive: UsageArchive) -> None:
        """Keep every record in `archive` from now on, and take up today's counts where it left them."""
        self.archive = archive
        self._roll_over()
        for row in await archive.usage_on(self.day):
            self._count(row.guild_id, row.channel_id, row.member_id, row.total_tokens)

    def detach(self) -> None:
        """Stop writing to the archive (it is closing); counting goes on in memory."""
        self.archive = None

    def record(self, guild_id: int, channel_id: int, member_id: int, input_tokens: int, output_tokens: int) -> None:
        """Count one answer's tokens for the member who asked, in that channel and server."""
        if input_tokens <= 0 and output_tokens <= 0:
            return
        self._roll_over()
        self._count(guild_id, channel_id, member_id, input_tokens + output_tokens)
        if self.archive is not None:
            self.archive.record_usage(
                TokenUsage(self.day, guild_id, channel_id, member_id, input_tokens, output_tokens)
            )

    def server_tokens(self, guild_id: int) -> int:
        """The server's tokens so far today."""
        self._roll_over()
        return self._by_server[guild_id]

    def summary(self, guild_id: int, channel_id: int, *, top: int = TOP_MEMBERS) -> UsageSummary:
        """The server's and the channel's tokens today, and the server's `top` members by tokens."""
        self._roll_over()
        channel = 0
        members: Counter[int] = Counter()
        for (guild, place, member), tokens in self._by_place.items():
            if guild != guild_id:
                continue
            members[member] += tokens
            if place == channel_id:
                channel += tokens
        ranked = sorted(members.items(), key=lambda item: (-item[1], item[0]))[:top]
        return UsageSummary(self.day, self._by_server[guild_id], channel, ranked)

    def _count(self, guild_id: int, channel_id: int, member_id: int, tokens: int) -> None:
        self._by_place[guild_id, channel_id, member_id] += tokens
        self._by_server[guild_id] += tokens

    def _roll_over(self) -> None:
        today = self.today()
        if today != self.day:
            self.day = today
            self._by_place.clear()
            self._by_server.clear()
