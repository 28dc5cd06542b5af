"""Admission limits: how often a member may be answered, how many triggers may wait in a channel.

Pure bookkeeping, no Discord and no asyncio: time comes from an injected clock (the engine's, see
conversation.py), so tests (freezegun or a hand-moved clock) and replays drive it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from datetime import datetime, timedelta


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


@dataclass(frozen=True, slots=True)
class Place:
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

    def join(self, message_id: int, author_id: int) -> Place:
        """Queue `message_id`; refused when the line is full and its author has nothing in it."""
        earlier = self._by_author.get(author_id)
        if earlier is None and len(self._by_author) >= self.limit:
            return Place(False)
        if earlier is not None:
            del self._author_of[earlier]
        self._by_author[author_id] = message_id
        self._author_of[message_id] = author_id
        return Place(True, earlier)

    def leave(self, message_id: int) -> bool:
        """Take `message_id` out of the line for its turn; False if it was superseded meanwhile."""
        author_id = self._author_of.pop(message_id, None)
        if author_id is None:
            return False
        del self._by_author[author_id]
        return True
