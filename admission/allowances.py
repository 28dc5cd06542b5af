"""Where members' answers and the day's tokens are counted: in this process, or in a Postgres archive every process
shares, so that N shard processes grant one allowance between them, not N.

A member's answers are a token bucket (limits.py): a burst, then a steady rate. That is what members had in one
process already, so moving to Postgres changes no notice ("again in 2 minutes" stays exact), and taking one is
one conditional update of one row. A fixed window would be as cheap but would let a member have two bursts
across a window's edge. Tokens are counted a UTC day at a time, the day the budgets reset.

Images made are counted a UTC day at a time too, per member and per server (IMAGES_PER_MEMBER_PER_DAY,
IMAGES_PER_SERVER_PER_DAY), and each is claimed before the image model is called: the claims under way count as made,
and a claim checks and takes in one step with no wait between (in a Postgres archive, under a lock, after reading
the day's images the other processes recorded), so two requests at the limit cannot both pass in one process.
Between processes, an image another one is making and has not recorded yet is not seen: each may make one more.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Literal, Protocol

from archive.allowances import AllowanceTable
from limits import Admission, Rate, TokenBucket
from usage.budget import UsageLedger

_ADMITTED = Admission(True)

# Which daily image limit refused a claim.
ImageLimit = Literal["member", "server"]


class ImageClaims:
    """The images being made now (claimed, not yet recorded), per member and per server, and the claim's one check."""

    def __init__(self) -> None:
        self._by_member: Counter[tuple[int, int]] = Counter()
        self._by_server: Counter[int] = Counter()

    def claim(self, guild_id: int, member_id: int, made: tuple[int, int], limits: tuple[int, int]) -> ImageLimit | None:
        """Take one if the member's and the server's images `made` today, with the claims under way, stay within
        `limits` (member's, server's); else the limit that refuses it. No await: one step for the event loop."""
        member_made, server_made = made
        per_member, per_server = limits
        if server_made + self._by_server[guild_id] >= per_server:
            return "server"
        if member_made + self._by_member[guild_id, member_id] >= per_member:
            return "member"
        self._by_member[guild_id, member_id] += 1
        self._by_server[guild_id] += 1
        return None

    def release(self, guild_id: int, member_id: int) -> None:
        """End a claim: its image was recorded (or none was made)."""
        self._by_member[guild_id, member_id] -= 1
        self._by_server[guild_id] -= 1
        if self._by_member[guild_id, member_id] <= 0:
            del self._by_member[guild_id, member_id]
        if self._by_server[guild_id] <= 0:
            del self._by_server[guild_id]


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

    async def claim_image(self, guild_id: int, member_id: int, per_member: int, per_server: int) -> ImageLimit | None:
        """Claim one of today's images for the member: None, or the daily limit that refuses it."""
        ...

    def release_image(self, guild_id: int, member_id: int) -> None:
        """End a claim once its image is recorded in the usage ledger, or none was made."""
        ...


class LocalAllowances:
    """Counted in this process's memory: one bucket per member and rate (a rate is the defaults' or a role's), and
    the usage ledger's tokens. What a SQLite archive (one process) or no archive uses."""

    def __init__(self, usage: UsageLedger, clock: Callable[[], datetime]) -> None:
        self.usage = usage
        self.clock = clock
        self._buckets: dict[Rate, TokenBucket] = {}
        self._images = ImageClaims()

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

    async def claim_image(self, guild_id: int, member_id: int, per_member: int, per_server: int) -> ImageLimit | None:
        made = (self.usage.member_images(guild_id, member_id), self.usage.server_images(guild_id))
        return self._images.claim(guild_id, member_id, made, (per_member, per_server))

    def release_image(self, guild_id: int, member_id: int) -> None:
        self._images.release(guild_id, member_id)


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
        self._images = ImageClaims()
        # A claim reads the day's images from the table first: one claim at a time, so none reads before another
        # has taken its image.
        self._claiming = asyncio.Lock()

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

    async def claim_image(self, guild_id: int, member_id: int, per_member: int, per_server: int) -> ImageLimit | None:
        async with self._claiming:
            today = self.usage.today()
            member = await self.table.day_images(guild_id, today, member_id)
            server = await self.table.day_images(guild_id, today)
            made = (
                max(member, self.usage.member_images(guild_id, member_id)),
                max(server, self.usage.server_images(guild_id)),
            )
            return self._images.claim(guild_id, member_id, made, (per_member, per_server))

    def release_image(self, guild_id: int, member_id: int) -> None:
        self._images.release(guild_id, member_id)
