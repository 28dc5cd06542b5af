"""One behaviour suite for both `Allowances`: counted in this process, and counted in a shared Postgres archive."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from admission.allowances import Allowances, LocalAllowances, SharedAllowances
from archive.backends import open_archive
from archive.postgres import PostgresArchive
from limits import Rate
from tests.conftest import fresh_postgres_database
from usage.budget import UsageLedger

T0 = datetime(2026, 11, 25, 10, 0, tzinfo=UTC)
GUILD, CHANNEL, ALICE, BOB = 11, 22, 33, 44
TAKER = Path(__file__).resolve().parents[1] / "support" / "allowance_taker.py"
# 30 an hour: one answer back every 2 minutes.
RATE = Rate(30, 3)


Counted = tuple[Allowances, UsageLedger]


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture(params=["in_process", "postgres"])
async def counted(request: pytest.FixtureRequest, clock: Clock) -> AsyncIterator[Counted]:
    """Each implementation in turn, with the usage ledger whose records it counts."""
    usage = UsageLedger(clock)
    if request.param == "in_process":
        yield LocalAllowances(usage, clock), usage
        return
    archive = await open_archive(await fresh_postgres_database(request.getfixturevalue("postgres_server")))
    assert isinstance(archive, PostgresArchive)
    await usage.attach(archive)
    try:
        yield SharedAllowances(archive, usage, clock), usage
    finally:
        usage.detach()
        await archive.close()


async def takes(allowances: Allowances, times: int, member: int = ALICE, rate: Rate = RATE) -> list[bool]:
    return [(await allowances.take(GUILD, member, rate)).admitted for _ in range(times)]


async def test_a_burst_then_a_refusal_that_says_when_one_is_back(counted: Counted, clock: Clock) -> None:
    allowances, _ = counted
    assert await takes(allowances, 3) == [True] * 3
    clock.now = T0 + timedelta(seconds=30)
    refusal = await allowances.take(GUILD, ALICE, RATE)
    assert not refusal.admitted
    assert refusal.retry_at is not None
    assert abs((refusal.retry_at - (T0 + timedelta(minutes=2))).total_seconds()) < 0.01


async def test_answers_come_back_at_the_rate_and_members_are_apart(counted: Counted, clock: Clock) -> None:
    allowances, _ = counted
    assert await takes(allowances, 4) == [True] * 3 + [False]
    assert await takes(allowances, 1, member=BOB) == [True]  # Bob's bucket is his own
    assert (await allowances.take(GUILD + 1, ALICE, RATE)).admitted  # and Alice's in another server is apart
    clock.now = T0 + timedelta(seconds=121)
    assert await takes(allowances, 2) == [True, False]
    clock.now = T0 - timedelta(hours=1)  # a clock stepping back refills nothing
    assert await takes(allowances, 1) == [False]


async def test_an_answer_given_back_can_be_taken_again_but_never_beyond_the_burst(counted: Counted) -> None:
    allowances, _ = counted
    assert await takes(allowances, 3) == [True] * 3
    await allowances.give_back(GUILD, ALICE, RATE)
    assert await takes(allowances, 2) == [True, False]
    for _ in range(5):
        await allowances.give_back(GUILD, ALICE, RATE)
    assert await takes(allowances, 4) == [True] * 3 + [False]


async def test_the_first_refusal_of_a_spell_is_warned_once(counted: Counted, clock: Clock) -> None:
    allowances, _ = counted
    await takes(allowances, 4)
    assert [await allowances.first_warning(GUILD, ALICE, RATE) for _ in range(3)] == [True, False, False]
    clock.now = T0 + timedelta(minutes=3)
    assert await takes(allowances, 2) == [True, False]  # admitted again: a new spell begins
    assert await allowances.first_warning(GUILD, ALICE, RATE)


async def test_the_days_tokens_by_server_and_member(counted: Counted, clock: Clock) -> None:
    allowances, usage = counted
    usage.record(GUILD, CHANNEL, ALICE, 100, 20, model="test:model")
    usage.record(GUILD, CHANNEL + 1, ALICE, 5, 5, model="test:model")
    usage.record(GUILD, CHANNEL, BOB, 7, 0, model="test:model")
    usage.record(GUILD + 1, CHANNEL, ALICE, 1000, 0, model="test:model")
    assert await allowances.server_tokens(GUILD) == 137
    assert await allowances.member_tokens(GUILD, ALICE) == 130
    assert await allowances.member_tokens(GUILD, BOB) == 7
    clock.now = T0 + timedelta(days=1)
    assert await allowances.server_tokens(GUILD) == 0
    assert await allowances.member_tokens(GUILD, ALICE) == 0


@contextlib.asynccontextmanager
async def two_processes(postgres_server: str, clock: Clock) -> AsyncIterator[tuple[UsageLedger, Any, SharedAllowances]]:
    """Two ledgers on one Postgres archive, as two processes have: the other's ledger and archive, and this one's
    allowances (over a ledger of its own)."""
    url = await fresh_postgres_database(postgres_server)
    first, second = await open_archive(url), await open_archive(url)
    assert isinstance(second, PostgresArchive)
    here, there = UsageLedger(clock), UsageLedger(clock)
    try:
        await there.attach(first)
        yield there, first, SharedAllowances(second, here, clock)
    finally:
        there.detach()
        await first.close()
        await second.close()


async def test_tokens_another_process_recorded_are_counted(postgres_server: str, clock: Clock) -> None:
    """Each process sees the other's committed tokens."""
    async with two_processes(postgres_server, clock) as (there, archive, allowances):
        there.record(GUILD, CHANNEL, ALICE, 40, 2, model="test:model")
        await archive.flush()
        assert await allowances.server_tokens(GUILD) == 42
        assert await allowances.member_tokens(GUILD, ALICE) == 42
        assert allowances.usage.server_tokens(GUILD) == 0  # nothing of it in this process's own count


async def claims(allowances: Allowances, times: int, member: int = ALICE, limits: tuple[int, int] = (2, 3)) -> list:
    return [await allowances.claim_image(GUILD, member, *limits) for _ in range(times)]


async def test_images_are_claimed_up_to_the_members_then_the_servers_daily_limit(counted: Counted) -> None:
    allowances, usage = counted
    assert await claims(allowances, 3) == [None, None, "member"]
    # Claims under way count as made; recorded, the images count in their stead.
    for _ in range(2):
        usage.record(GUILD, CHANNEL, ALICE, 10, 0, model="test:image", kind="image", images=1)
        allowances.release_image(GUILD, ALICE)
    assert await claims(allowances, 1) == ["member"]
    assert await claims(allowances, 2, member=BOB) == [None, "server"]  # the server's third, then none left
    assert await allowances.claim_image(GUILD + 1, ALICE, 2, 3) is None  # another server counts apart


async def test_an_image_claimed_and_not_made_is_claimable_again(counted: Counted) -> None:
    allowances, _ = counted
    assert await claims(allowances, 3) == [None, None, "member"]
    allowances.release_image(GUILD, ALICE)
    assert await claims(allowances, 2) == [None, "member"]


async def test_two_requests_racing_at_the_limit_get_one_image(counted: Counted) -> None:
    allowances, usage = counted
    usage.record(GUILD, CHANNEL, ALICE, 10, 0, model="test:image", kind="image", images=1)
    racing = await asyncio.gather(*(allowances.claim_image(GUILD, ALICE, 2, 10) for _ in range(2)))
    assert sorted(racing, key=str) == [None, "member"]


async def test_a_new_day_brings_new_images(counted: Counted, clock: Clock) -> None:
    allowances, usage = counted
    usage.record(GUILD, CHANNEL, ALICE, 0, 0, model="test:image", kind="image", images=2)
    assert await claims(allowances, 1) == ["member"]
    clock.now = T0 + timedelta(days=1)
    assert await claims(allowances, 1) == [None]


async def test_images_another_process_recorded_are_counted(postgres_server: str, clock: Clock) -> None:
    async with two_processes(postgres_server, clock) as (there, archive, allowances):
        there.record(GUILD, CHANNEL, BOB, 0, 0, model="test:image", kind="image", images=2)
        await archive.flush()
        assert await allowances.claim_image(GUILD, ALICE, 2, 3) is None
        assert await allowances.claim_image(GUILD, ALICE, 2, 3) == "server"


@pytest.mark.slow
async def test_two_processes_on_one_postgres_grant_a_members_burst_once(postgres_server: str, tmp_path: Path) -> None:
    """Two OS processes, each a Gatekeeper on its own connections to one Postgres archive, try 10 answers each for
    the same member at the same moment: 5 (the burst) are granted in all, where counting in each process's memory
    grants 5 each."""
    url = await fresh_postgres_database(postgres_server)
    takers = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            str(TAKER),
            url,
            "10",
            T0.isoformat(),
            cwd=tmp_path,  # no .env of Parley's folder
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        for _ in range(2)
    ]
    async with asyncio.timeout(60):
        for taker in takers:
            assert taker.stdout is not None
            assert await taker.stdout.readline() == b"ready\n"
        for taker in takers:  # both are open: let them take together
            assert taker.stdin is not None
            taker.stdin.write(b"go\n")
            await taker.stdin.drain()
        granted = [int((await taker.communicate())[0]) for taker in takers]
    assert [taker.returncode for taker in takers] == [0, 0]
    assert sum(granted) == 5, granted
