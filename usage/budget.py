"""Token accounting: what the model spent today (UTC) per server, channel and member, and the server budget.

The ledger keeps the current day in memory, so the check before every answer and `/parley status`
never wait on the disk. With the archive on, every answer's tokens are also queued to it (batched
like every archive write), and a restart reads the day back; with it off, the day lasts as long as
the process. A new UTC day starts from zero.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, time, timedelta
from typing import Literal, Protocol

from archive import TokenUsage
from archive.null import NULL_ARCHIVE
from usage.costs import Totals

TOP_MEMBERS = 5
# The member a summary's tokens are counted for: it is written for a channel, not for anyone's message.
NO_MEMBER = 0
UsageKind = Literal["answer", "judge", "summary", "image"]


class UsageArchive(Protocol):
    """What the ledger needs from `archive.Archive`."""

    def record_usage(self, usage: TokenUsage) -> None: ...

    async def usage_on(self, day: date) -> list[TokenUsage]: ...

    async def guild_usage(self, guild_id: int, first: date, last: date) -> list[TokenUsage]: ...


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
        self.archive: UsageArchive = NULL_ARCHIVE  # until `attach`: the null archive keeps nothing, reads nothing
        self.day = self.today()
        self._by_place: Counter[tuple[int, int, int]] = Counter()
        self._by_server: Counter[int] = Counter()
        self._by_member: Counter[tuple[int, int]] = Counter()
        # Today's images made per server, and per server and member (IMAGES_PER_*_PER_DAY).
        self._images_by_server: Counter[int] = Counter()
        self._images_by_member: Counter[tuple[int, int]] = Counter()
        # Today's rows in full (per server, channel, member and model), for /parley-admin usage.
        self._rows: dict[tuple[int, int, int, str], TokenUsage] = {}
        # Told of every record as it is made (Logfire's metrics, when it is on).
        self.on_record: Callable[[TokenUsage], None] | None = None

    def today(self) -> date:
        return self.clock().astimezone(UTC).date()

    async def attach(self, archive: UsageArchive) -> None:
        """Keep every record in `archive` from now on, and take up today's counts where it left them."""
        self.archive = archive
        self._roll_over()
        for row in await archive.usage_on(self.day):
            self._count(row.guild_id, row.channel_id, row.member_id, row.total_tokens, row.images)
            self._add_row(row)

    def detach(self) -> None:
        """Stop writing to the archive (it is closing); counting goes on in memory."""
        self.archive = NULL_ARCHIVE

    def record(
        self,
        guild_id: int,
        channel_id: int,
        member_id: int,
        input_tokens: int,
        output_tokens: int,
        *,
        cached_input_tokens: int = 0,
        model: str = "",
        kind: UsageKind = "answer",
        images: int = 0,
    ) -> TokenUsage | None:
        """Count the tokens of one answer, judge call or summary (`kind`) for the member whose message it was about
        (`NO_MEMBER` for a summary), in that channel and server; `model` is `provider:model`. An image's (`kind`
        "image") counts its `images` too, tokens or none. The row counted (None: nothing spent, nothing counted)."""
        if input_tokens <= 0 and output_tokens <= 0 and images <= 0:
            return None
        self._roll_over()
        self._count(guild_id, channel_id, member_id, input_tokens + output_tokens, images)
        usage = TokenUsage(
            self.day,
            guild_id,
            channel_id,
            member_id,
            input_tokens,
            output_tokens,
            answers=1 if kind == "answer" else 0,
            cached_input_tokens=cached_input_tokens,
            judge_calls=1 if kind == "judge" else 0,
            model=model,
            images=images,
        )
        self._add_row(usage)
        self.archive.record_usage(usage)
        if self.on_record is not None:
            self.on_record(usage)
        return usage

    async def guild_usage(self, guild_id: int, days: int) -> list[TokenUsage]:
        """The server's rows of the last `days` UTC days, today included: today's from memory, earlier ones from
        the archive (none without it)."""
        self._roll_over()
        today = [row for key, row in self._rows.items() if key[0] == guild_id]
        if days <= 1:
            return today
        earlier = await self.archive.guild_usage(guild_id, self.day - timedelta(days=days - 1), self.day)
        return [row for row in earlier if row.day != self.day] + today

    def server_tokens(self, guild_id: int) -> int:
        """The server's tokens so far today."""
        self._roll_over()
        return self._by_server[guild_id]

    def server_images(self, guild_id: int) -> int:
        """The images made in the server so far today."""
        self._roll_over()
        return self._images_by_server[guild_id]

    def member_images(self, guild_id: int, member_id: int) -> int:
        """The images made for the member in the server so far today."""
        self._roll_over()
        return self._images_by_member[guild_id, member_id]

    def member_tokens(self, guild_id: int, member_id: int) -> int:
        """The member's tokens in the server so far today (ROLE_LIMITS' tokens a day)."""
        self._roll_over()
        return self._by_member[guild_id, member_id]

    def member_today(self, guild_id: int, member_id: int) -> Totals:
        """The member's answers, judge calls, tokens and their cost in the server so far today (`/parley status`)."""
        self._roll_over()
        totals = Totals()
        for (guild, _, member, _), row in self._rows.items():
            if guild == guild_id and member == member_id:
                totals.add(row)
        return totals

    def summary(self, guild_id: int, channel_id: int, *, top: int = TOP_MEMBERS) -> UsageSummary:
        """The server's and the channel's tokens today, and the server's `top` members by tokens."""
        self._roll_over()
        channel = 0
        members: Counter[int] = Counter()
        for (guild, place, member), tokens in self._by_place.items():
            if guild != guild_id:
                continue
            if member != NO_MEMBER:
                members[member] += tokens
            if place == channel_id:
                channel += tokens
        ranked = sorted(members.items(), key=lambda item: (-item[1], item[0]))[:top]
        return UsageSummary(self.day, self._by_server[guild_id], channel, ranked)

    def anonymise(self, guild_id: int, member_id: int) -> None:
        """Count the member's tokens today in the server as no one's (their data was erased): the totals stay."""
        for place in [place for place in self._by_place if place[0] == guild_id and place[2] == member_id]:
            self._by_place[guild_id, place[1], NO_MEMBER] += self._by_place.pop(place)
        for row in [row for key, row in self._rows.items() if key[0] == guild_id and key[2] == member_id]:
            del self._rows[row.guild_id, row.channel_id, row.member_id, row.model]
            self._add_row(replace(row, member_id=NO_MEMBER))

    def _count(self, guild_id: int, channel_id: int, member_id: int, tokens: int, images: int = 0) -> None:
        self._by_place[guild_id, channel_id, member_id] += tokens
        self._by_server[guild_id] += tokens
        self._by_member[guild_id, member_id] += tokens
        if images:
            self._images_by_server[guild_id] += images
            self._images_by_member[guild_id, member_id] += images

    def _add_row(self, usage: TokenUsage) -> None:
        key = (usage.guild_id, usage.channel_id, usage.member_id, usage.model)
        kept = self._rows.get(key)
        if kept is not None:
            usage = replace(
                kept,
                input_tokens=kept.input_tokens + usage.input_tokens,
                output_tokens=kept.output_tokens + usage.output_tokens,
                answers=kept.answers + usage.answers,
                cached_input_tokens=kept.cached_input_tokens + usage.cached_input_tokens,
                judge_calls=kept.judge_calls + usage.judge_calls,
                images=kept.images + usage.images,
            )
        self._rows[key] = usage

    def _roll_over(self) -> None:
        today = self.today()
        if today != self.day:
            self.day = today
            self._by_place.clear()
            self._by_server.clear()
            self._by_member.clear()
            self._images_by_server.clear()
            self._images_by_member.clear()
            self._rows.clear()
