"""Members' answer allowances and the day's tokens, counted in a Postgres archive that several processes share.

Each member's answers are a token bucket in one row of `answer_allowances`; taking one is a single
`INSERT … ON CONFLICT DO UPDATE … WHERE` statement, so Postgres's row lock makes concurrent takers from any
process wait for each other and see each other's spending: N processes grant one burst, not N. The day's tokens
are read from `token_usage`, which every process already writes. SQLite has one process, which counts in memory
(admission/allowances.py).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from datetime import date, datetime
from typing import Any, Protocol

from archive.times import to_day, to_ms

_MS_PER_HOUR = 3_600_000

# The bucket refilled to now, as a statement's expression: $3 answers an hour, at most $4, at $5 ms. A clock
# that stepped back refills nothing rather than draining the bucket.
_REFILLED = "LEAST($4, a.tokens + GREATEST($5 - a.updated_at, 0) * $3 / 3600000.0)"

# Spend one answer if the refilled bucket holds one; a new member starts with a full bucket. No row comes back
# when none is left (the WHERE of the conflict's update leaves the row as it was).
_TAKE = f"""
    INSERT INTO answer_allowances AS a (guild_id, member_id, tokens, updated_at, warned)
    VALUES ($1, $2, $4 - 1, $5, false)
    ON CONFLICT (guild_id, member_id) DO UPDATE
        SET tokens = {_REFILLED} - 1, updated_at = GREATEST($5, a.updated_at), warned = false
        WHERE {_REFILLED} >= 1
    RETURNING 1
"""
_LEFT = "SELECT tokens, updated_at FROM answer_allowances WHERE guild_id = $1 AND member_id = $2"
_GIVE_BACK = "UPDATE answer_allowances SET tokens = LEAST($3, tokens + 1) WHERE guild_id = $1 AND member_id = $2"
# True for one refusal in a spell of them: the row's `warned` flips once, whichever process asks first.
_WARN = """
    UPDATE answer_allowances SET warned = true WHERE guild_id = $1 AND member_id = $2 AND NOT warned RETURNING 1
"""
_SERVER_TOKENS = (
    "SELECT coalesce(sum(input_tokens + output_tokens), 0) FROM token_usage WHERE guild_id = $1 AND day = $2"
)
_MEMBER_TOKENS = _SERVER_TOKENS + " AND member_id = $3"
_SERVER_IMAGES = "SELECT coalesce(sum(images), 0) FROM token_usage WHERE guild_id = $1 AND day = $2"
_MEMBER_IMAGES = _SERVER_IMAGES + " AND member_id = $3"


class AllowanceTable(Protocol):
    """What admission counts in a shared archive: members' answers (a token bucket each) and the day's tokens."""

    async def take_allowance(self, guild_id: int, member_id: int, per_hour: float, burst: int, now: datetime) -> float:
        """Spend one of the member's answers: 0.0 if one was left, else the seconds until one is back."""
        ...

    async def return_allowance(self, guild_id: int, member_id: int, burst: int) -> None: ...

    async def warn_allowance(self, guild_id: int, member_id: int) -> bool:
        """True once per spell of refusals (a spell ends when the member is admitted again), across processes."""
        ...

    async def day_tokens(self, guild_id: int, day: date, member_id: int | None = None) -> int:
        """The server's (or one of its members') committed tokens on UTC day `day`."""
        ...

    async def day_images(self, guild_id: int, day: date, member_id: int | None = None) -> int:
        """The server's (or one of its members') committed images made on UTC day `day`."""
        ...


class PostgresAllowances(ABC):
    """`AllowanceTable` for `PostgresArchive`, on its connections."""

    @abstractmethod
    async def _fetch(self, sql: str, *args: Any) -> list[tuple[Any, ...]]: ...

    async def take_allowance(self, guild_id: int, member_id: int, per_hour: float, burst: int, now: datetime) -> float:
        now_ms = to_ms(now)
        if await self._fetch(_TAKE, guild_id, member_id, per_hour, burst, now_ms):
            return 0.0
        [(tokens, updated_at)] = await self._fetch(_LEFT, guild_id, member_id)
        return _seconds_until_one(tokens, updated_at, per_hour, burst, now_ms)

    async def return_allowance(self, guild_id: int, member_id: int, burst: int) -> None:
        await self._fetch(_GIVE_BACK, guild_id, member_id, burst)

    async def warn_allowance(self, guild_id: int, member_id: int) -> bool:
        return bool(await self._fetch(_WARN, guild_id, member_id))

    async def day_tokens(self, guild_id: int, day: date, member_id: int | None = None) -> int:
        args: Sequence[int] = (guild_id, to_day(day)) if member_id is None else (guild_id, to_day(day), member_id)
        rows = await self._fetch(_SERVER_TOKENS if member_id is None else _MEMBER_TOKENS, *args)
        return int(rows[0][0])

    async def day_images(self, guild_id: int, day: date, member_id: int | None = None) -> int:
        args: Sequence[int] = (guild_id, to_day(day)) if member_id is None else (guild_id, to_day(day), member_id)
        rows = await self._fetch(_SERVER_IMAGES if member_id is None else _MEMBER_IMAGES, *args)
        return int(rows[0][0])


def _seconds_until_one(tokens: float, updated_at: int, per_hour: float, burst: int, now_ms: int) -> float:
    """When a refused member's bucket holds one answer again, from the row as it was left."""
    per_ms = per_hour / _MS_PER_HOUR
    held = min(burst, tokens + max(now_ms - updated_at, 0) * per_ms)
    return max((1 - held) / per_ms / 1000, 0.0)
