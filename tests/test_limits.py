"""Tests for limits.py: the per-member token bucket and a channel's line of waiting mentions."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from freezegun import freeze_time

from conversation import utc_now
from limits import MemberLimits, Rate, RoleLimit, TokenBucket, WaitingLine, limits_for, parse_role_limits

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
ALICE, BOB = ("guild", 10), ("guild", 11)


def takes(bucket: TokenBucket, key: object, times: int) -> list[bool]:
    return [bucket.take(key).admitted for _ in range(times)]


def test_a_burst_is_admitted_then_refused_with_when_one_is_back() -> None:
    """30 an hour with a burst of 5: five at once pass, the sixth is told a token is back in 2 minutes."""
    with freeze_time(T0):
        bucket = TokenBucket(30, 5, clock=utc_now)
        assert takes(bucket, ALICE, 5) == [True] * 5
        refusal = bucket.take(ALICE)
        assert not refusal.admitted and refusal.retry_at == T0 + timedelta(minutes=2)


def test_tokens_come_back_at_the_hourly_rate() -> None:
    """After the burst, one more is admitted every 2 minutes (30 an hour), never sooner."""
    with freeze_time(T0) as frozen:
        bucket = TokenBucket(30, 5, clock=utc_now)
        takes(bucket, ALICE, 5)
        frozen.tick(timedelta(seconds=119))
        refusal = bucket.take(ALICE)
        assert not refusal.admitted and refusal.retry_at == T0 + timedelta(minutes=2)
        frozen.tick(timedelta(seconds=1))
        assert takes(bucket, ALICE, 2) == [True, False]


def test_a_bucket_refills_to_its_burst_and_no_further() -> None:
    """A day of quiet gives back the burst of 5, not a day's worth of answers."""
    with freeze_time(T0) as frozen:
        bucket = TokenBucket(30, 5, clock=utc_now)
        takes(bucket, ALICE, 5)
        frozen.tick(timedelta(days=1))
        assert takes(bucket, ALICE, 6) == [True] * 5 + [False]


def test_each_member_has_their_own_bucket() -> None:
    """One member spending their burst leaves another's untouched."""
    clock = lambda: T0  # noqa: E731 - a clock that never moves
    bucket = TokenBucket(30, 2, clock=clock)
    assert takes(bucket, ALICE, 3) == [True, True, False]
    assert takes(bucket, BOB, 2) == [True, True]


def test_a_spell_of_refusals_warns_once() -> None:
    """Only the first refusal since the member was last admitted is warned; after a refill, again once."""
    with freeze_time(T0) as frozen:
        bucket = TokenBucket(60, 1, clock=utc_now)
        bucket.take(ALICE)
        warnings = [bucket.first_warning(ALICE) for _ in range(3) if not bucket.take(ALICE).admitted]
        assert warnings == [True, False, False]
        frozen.tick(timedelta(minutes=1))
        assert bucket.take(ALICE).admitted
        assert not bucket.take(ALICE).admitted and bucket.first_warning(ALICE)


def test_a_token_given_back_can_be_spent_again() -> None:
    """A token taken for an answer that did not happen returns; giving back never exceeds the burst."""
    clock = lambda: T0  # noqa: E731 - a clock that never moves
    bucket = TokenBucket(30, 2, clock=clock)
    takes(bucket, ALICE, 2)
    bucket.give_back(ALICE)
    bucket.give_back(ALICE)
    bucket.give_back(ALICE)
    assert takes(bucket, ALICE, 3) == [True, True, False]


def test_idle_members_are_forgotten() -> None:
    """A bucket untouched for a full refill is dropped: memory follows the members active lately."""
    with freeze_time(T0) as frozen:
        bucket = TokenBucket(30, 5, clock=utc_now)
        for member in range(1000):
            bucket.take(("guild", member))
        frozen.tick(timedelta(minutes=10))  # 5 tokens at 30 an hour
        bucket.take(ALICE)
        assert len(bucket) == 1


def test_a_clock_stepping_back_refills_nothing() -> None:
    """Time going backwards neither refills a bucket nor drains it."""
    clock_time = [T0]
    bucket = TokenBucket(30, 1, clock=lambda: clock_time[0])
    assert bucket.take(ALICE).admitted
    clock_time[0] = T0 - timedelta(hours=1)
    assert not bucket.take(ALICE).admitted
    clock_time[0] = T0 + timedelta(minutes=2)
    assert bucket.take(ALICE).admitted


@pytest.mark.parametrize(("per_hour", "burst"), [(0, 5), (30, 0), (-1, 5)])
def test_a_bucket_needs_a_rate_and_a_burst(per_hour: float, burst: int) -> None:
    """A rate of zero or less, or an empty burst, is a programming error, not a silent "never"."""
    with pytest.raises(ValueError, match="positive rate"):
        TokenBucket(per_hour, burst, clock=utc_now)


def test_a_members_newer_mention_supersedes_their_waiting_one() -> None:
    """The earlier waiting mention is named as superseded and no longer gets its turn; the line does not grow."""
    line = WaitingLine(limit=2)
    assert line.join(1, author_id=10).superseded is None
    place = line.join(2, author_id=10)
    assert place.admitted and place.superseded == 1
    assert len(line) == 1
    assert line.leave(1) is False
    assert line.leave(2) is True
    assert len(line) == 0


def test_a_full_line_turns_newcomers_away_but_not_its_members() -> None:
    """Past the limit another member's mention is refused, while a waiting member may still replace theirs."""
    line = WaitingLine(limit=2)
    line.join(1, author_id=10)
    line.join(2, author_id=11)
    assert not line.join(3, author_id=12).admitted
    assert line.join(4, author_id=11).admitted
    assert line.leave(1)
    assert line.join(5, author_id=12).admitted


DEFAULT = Rate(30, 5)
NEWCOMERS, REGULARS, TRUSTED = 1, 2, 3
RULES = (RoleLimit(NEWCOMERS, 2, 5000), RoleLimit(REGULARS, 60, 0), RoleLimit(TRUSTED, 0, 20000))


def test_a_member_without_a_limited_role_has_the_defaults() -> None:
    assert limits_for({99}, DEFAULT, RULES) == MemberLimits(DEFAULT)
    assert limits_for(set(), DEFAULT, ()) == MemberLimits(DEFAULT)


def test_a_roles_rule_replaces_the_defaults_tighter_or_looser() -> None:
    """Newcomers get 2 an hour, and a burst of no more than that; regulars 60 an hour with the default burst."""
    assert limits_for({NEWCOMERS, 99}, DEFAULT, RULES) == MemberLimits(Rate(2, 2), 5000, by_role=True)
    assert limits_for({REGULARS}, DEFAULT, RULES) == MemberLimits(Rate(60, 5), 0, by_role=True)
    assert limits_for({NEWCOMERS}, DEFAULT, (RoleLimit(NEWCOMERS, 0.5, 0),)).rate == Rate(0.5, 1)


def test_several_limited_roles_give_the_most_generous_of_each_limit() -> None:
    """A newcomer who is also trusted: no limit on answers (trusted's 0), and trusted's 20000 tokens a day; a
    newcomer and regular: the regular's rate, and no token limit (the regular's 0)."""
    assert limits_for({NEWCOMERS, TRUSTED}, DEFAULT, RULES) == MemberLimits(Rate(0, 5), 20000, by_role=True)
    assert limits_for({NEWCOMERS, REGULARS}, DEFAULT, RULES) == MemberLimits(Rate(60, 5), 0, by_role=True)


def test_role_limits_are_parsed_from_their_setting() -> None:
    assert parse_role_limits("") == ()
    assert parse_role_limits(" 1:2:3 ,4:0:0") == (RoleLimit(1, 2, 3), RoleLimit(4, 0, 0))
    with pytest.raises(ValueError, match="role_id:answers_per_hour:tokens_per_day"):
        parse_role_limits("1:2")
