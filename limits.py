"""Admission limits: how often a member may be answered (by default or by role), how many triggers may wait in a
channel.

Pure bookkeeping, no Discord and no asyncio: time comes from an injected clock (the engine's, see
conversation.py), so tests (freezegun or a hand-moved clock) and replays drive it.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable, Collection, Hashable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import NamedTuple


@dataclass(frozen=True, slots=True)
class Admission:
    """The answer to "may this key spend one more?"."""

    admitted: bool
    # When refused: the moment one token is back, so the refusal can say when to try again.
    retry_at: datetime | None = None


_ADMITTED = Admission(True)


@dataclass(slots=True)
class _Bucket:
    tokens: float
    updated_at: datetime
    warned: bool = False


class TokenBucket:
    """Per-key token buckets: up to `burst` at once, refilled at `per_hour` an hour.

    A key untouched for as long as a full refill takes holds a full bucket, which is the same as
    holding none, so such keys are dropped (oldest first, amortised O(1)) and memory stays bounded
    by the keys active within that time.
    """

    def __init__(self, per_hour: float, burst: int, *, clock: Callable[[], datetime]) -> None:
        if per_hour <= 0 or burst < 1:
            raise ValueError("a token bucket needs a positive rate and a burst of at least 1")
        self.burst = burst
        self.per_second = per_hour / 3600
        self.clock = clock
        self._full_after = timedelta(seconds=burst / self.per_second)
        self._buckets: OrderedDict[Hashable, _Bucket] = OrderedDict()

    def __len__(self) -> int:
        return len(self._buckets)

    def take(self, key: Hashable) -> Admission:
        """Spend one token of `key`'s bucket if it has one."""
        now = self.clock()
        self._drop_full(now)
        bucket = self._refilled(key, now)
        if bucket.tokens >= 1:
            bucket.tokens -= 1
            bucket.warned = False
            return _ADMITTED
        return Admission(False, self._when_one_is_back(bucket, now))

    def first_warning(self, key: Hashable) -> bool:
        """True once per spell of refusals: the refusal that deserves a word, the rest get silence.

        A spell ends when `key` is admitted again.
        """
        bucket = self._buckets.get(key)
        if bucket is None or bucket.warned:
            return False
        bucket.warned = True
        return True

    def give_back(self, key: Hashable) -> None:
        """Return a token taken for something that did not happen after all."""
        bucket = self._buckets.get(key)
        if bucket is not None:
            bucket.tokens = min(self.burst, bucket.tokens + 1)

    def _refilled(self, key: Hashable, now: datetime) -> _Bucket:
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = _Bucket(float(self.burst), now)
            return bucket
        # A clock that stepped back refills nothing rather than draining the bucket.
        elapsed = max((now - bucket.updated_at).total_seconds(), 0.0)
        bucket.tokens = min(self.burst, bucket.tokens + elapsed * self.per_second)
        bucket.updated_at = max(now, bucket.updated_at)
        self._buckets.move_to_end(key)
        return bucket

    def _when_one_is_back(self, bucket: _Bucket, now: datetime) -> datetime:
        return now + timedelta(seconds=(1 - bucket.tokens) / self.per_second)

    def _drop_full(self, now: datetime) -> None:
        buckets = self._buckets
        while buckets:
            oldest = next(iter(buckets.values()))
            if now - oldest.updated_at < self._full_after:
                return
            buckets.popitem(last=False)


class Rate(NamedTuple):
    """A member's answers: `per_hour` after a `burst`; a `per_hour` of 0 is no limit."""

    per_hour: float
    burst: int


@dataclass(frozen=True, slots=True)
class RoleLimit:
    """One ROLE_LIMITS rule: the members with the role get `answers_per_hour` and `tokens_per_day` (0: no limit)."""

    role_id: int
    answers_per_hour: float
    tokens_per_day: int


@dataclass(frozen=True, slots=True)
class MemberLimits:
    """What one member may have: their answers' rate and their tokens a UTC day (0: no limit), by a role's rule
    (`by_role`) or the member defaults."""

    rate: Rate
    tokens_per_day: int = 0
    by_role: bool = False


ROLE_LIMITS_EXAMPLE = "123456789012345678:10:20000,234567890123456789:60:0"


def parse_role_limits(text: str) -> tuple[RoleLimit, ...]:
    """ROLE_LIMITS: `role_id:answers_per_hour:tokens_per_day` rules, comma-separated; ValueError naming the first
    bad rule otherwise."""
    rules: dict[int, RoleLimit] = {}
    for item in text.replace(" ", "").split(","):
        if not item:
            continue
        rule = _role_limit(item)
        if rule.role_id in rules:
            raise ValueError(f"role {rule.role_id} has two rules; give each role one")
        rules[rule.role_id] = rule
    return tuple(rules.values())


def _role_limit(item: str) -> RoleLimit:
    parts = item.split(":")
    shape = f"must be role_id:answers_per_hour:tokens_per_day rules separated by commas, e.g. {ROLE_LIMITS_EXAMPLE}"
    if len(parts) != 3 or not (parts[0].isascii() and parts[0].isdigit() and parts[2].isascii() and parts[2].isdigit()):
        raise ValueError(f"{shape}; {item!r} is not one")
    try:
        per_hour = float(parts[1])
    except ValueError:
        raise ValueError(f"{shape}; {item!r} is not one") from None
    if not math.isfinite(per_hour) or per_hour < 0:
        raise ValueError(f"answers per hour must be 0 (no limit) or more; {item!r} has {parts[1]}")
    return RoleLimit(int(parts[0]), per_hour, int(parts[2]))


def limits_for(role_ids: Collection[int], default: Rate, rules: Iterable[RoleLimit]) -> MemberLimits:
    """A member's limits from their roles: the member defaults unless a ROLE_LIMITS rule names one of their roles.

    A role's rule is more specific than the defaults, so it replaces them, tighter or looser. A member with several
    limited roles gets the most generous of them, each limit on its own (as Discord's permissions add up: a role
    can give more, never take away what another gave); 0, no limit, is the most generous. A role's burst is the
    default burst, but never more than its hour's answers, so a role of 2 an hour is stopped after 2.
    """
    mine = [rule for rule in rules if rule.role_id in role_ids]
    if not mine:
        return MemberLimits(default)
    widest = max(mine, key=lambda rule: _generosity(rule.answers_per_hour))
    per_hour = widest.answers_per_hour
    tokens = max(mine, key=lambda rule: _generosity(rule.tokens_per_day)).tokens_per_day
    burst = default.burst if per_hour == 0 else max(1, min(default.burst, math.floor(per_hour)))
    return MemberLimits(Rate(per_hour, burst), tokens, by_role=True)


def _generosity(limit: float) -> float:
    return math.inf if limit == 0 else limit


@dataclass(frozen=True, slots=True)
class PlaceInLine:
    """The outcome of joining a channel's line of waiting triggers."""

    admitted: bool
    # The same member's earlier waiting trigger that this one replaces, if any.
    superseded: int | None = None


@dataclass(slots=True)
class WaitingLine:
    """The triggers (mentions of the bot, replies to it) waiting for their turn in one channel.

    A member has at most one: a newer trigger supersedes their earlier waiting one, whose answer
    would be stale by the time it came. At most `limit` members' triggers wait; beyond that a new
    one is turned away.
    """

    limit: int
    _by_author: dict[int, int] = field(default_factory=dict)
    _author_of: dict[int, int] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self._by_author)

    def join(self, message_id: int, author_id: int) -> PlaceInLine:
        """Queue `message_id`; refused when the line is full and its author has nothing in it."""
        earlier = self._by_author.get(author_id)
        if earlier is None and len(self._by_author) >= self.limit:
            return PlaceInLine(False)
        if earlier is not None:
            del self._author_of[earlier]
        self._by_author[author_id] = message_id
        self._author_of[message_id] = author_id
        return PlaceInLine(True, earlier)

    def leave(self, message_id: int) -> bool:
        """Take `message_id` out of the line for its turn; False if it was superseded meanwhile."""
        author_id = self._author_of.pop(message_id, None)
        if author_id is None:
            return False
        del self._by_author[author_id]
        return True
