"""Where members' answers and the day's tokens are counted: in this process, or in a Postgres archive every process
shares, so that N shard processes grant one allowance between them, not N.

A member's answers are a token bucket (limits.py): a burst, then a steady rate. That is what members had in one
process already, so moving to Postgres changes no notice ("again in 2 minutes" stays exact), and taking one is
one conditional update of one row. A fixed window would be as cheap but would let a member have two bursts
across a window's edge. Tokens are counted a UTC day at a time, the day the budgets reset.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Protocol

from archive.allowances import AllowanceTable
from limits import Admission, Rate, TokenBucket
from usage.budget import UsageLedger

_ADMITTED = Admission(True)


class Allowances(Protocol):
    """Members' answers per server (spent before a model call, given back if none follows) and the day's tokens."""

    clock: Callable[[], datetime]

    async def take(self, guild_id: int, member_id: int, rate: Rate) -> Admission:
        """Spend one of the member's answers at `rate`, if they have one; a refusal says when one is back."""
        ...

    async def give_back(self, guild_id: int, member_id: int, rate: Rate) -> None:
        """Return an answer taken for a model call that was not made after all."""
        ...

    async def first_warning(self, guild_id: int, member_id: int, rate: Rate) -> bool:
        """True for the first refusal of a spell (it deserves a word), False for the rest (silence)."""
        ...

    async def server_tokens(self, guild_id: int) -> int:
        """The server's tokens so far today (UTC)."""
        ...

    async def member_tokens(self, guild_id: int, member_id: int) -> int:
        """The member's tokens in the server so far today (UTC)."""
        ...


class LocalAllowances:
    """Counted in this process's memory: one bucket per member and rate (a rate is the defaults' or a role's), and
    the usage ledger's tokens. What a SQLite archive (one process) or no archive uses."""

    def __init__(self, usage: UsageLedger, clock: Callable[[], datetime]) -> None:
        self.usage = usage
        self.clock = clock
        self._buckets: dict[Rate, TokenBucket] = {}

    def _bucket(self, rate: Rate) -> TokenBucket:
        bucket = self._buckets.get(rate)
        if bucket is None:
            # The bucket reads this object's clock at each call, so a test (or a replay) may move it.
            bucket = self._buckets[rate] = TokenBucket(rate.per_hour, rate.burst, clock=lambda: self.clock())
        return bucket

    async def take(self, guild_id: int, member_id: int, rate: Rate) -> Admission:
        return self._bucket(rate).take((guild_id, member_id))

    async def give_back(self, guild_id: int, member_id: int, rate: Rate) -> None:
        self._bucket(rate).give_back((guild_id, member_id))

    async def first_warning(self, guild_id: int, member_id: int, rate: Rate) -> bool:
        return self._bucket(rate).first_warning((guild_id, member_id))

    async def server_tokens(self, guild_id: int) -> int:
        return self.usage.server_tokens(guild_id)

    async def member_tokens(self, guild_id: int, member_id: int) -> int:
        return self.usage.member_tokens(guild_id, member_id)


class SharedAllowances:
    """Counted in a Postgres archive: each member's bucket is a row every process updates atomically, and the day's
    tokens are what every process recorded in `token_usage`.

    This process's own tokens reach the table within the archive's flush interval (half a second); until then the
    ledger's count, which has them, is the larger and is used. Like in one process, tokens are counted after the
    call that spent them, and every model call asks before it runs (admission/spending.py), so an operation under
    way when a budget runs out overshoots it by one call at most (other operations under way at once add theirs).
    """

    def __init__(self, table: AllowanceTable, usage: UsageLedger, clock: Callable[[], datetime]) -> None:
        self.table = table
        self.usage = usage
        self.clock = clock

    async def take(self, guild_id: int, member_id: int, rate: Rate) -> Admission:
        now = self.clock()
        wait = await self.table.take_allowance(guild_id, member_id, rate.per_hour, rate.burst, now)
        return _ADMITTED if wait == 0 else Admission(False, now + timedelta(seconds=wait))

    async def give_back(self, guild_id: int, member_id: int, rate: Rate) -> None:
        await self.table.return_allowance(guild_id, member_id, rate.burst)

    async def first_warning(self, guild_id: int, member_id: int, rate: Rate) -> bool:
        return await self.table.warn_allowance(guild_id, member_id)

    async def server_tokens(self, guild_id: int) -> int:
        counted = await self.table.day_tokens(guild_id, self.usage.today())
        return max(counted, self.usage.server_tokens(guild_id))

    async def member_tokens(self, guild_id: int, member_id: int) -> int:
        counted = await self.table.day_tokens(guild_id, self.usage.today(), member_id)
        return max(counted, self.usage.member_tokens(guild_id, member_id))
