"""answering/once.py: the claim every delivery of a message passes before it is decided."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Any

import pytest

from answering import once
from answering.once import REMEMBERED, Claimed, MessageClaims
from archive import ArchiveWriteFailed
from archive.null import NULL_ARCHIVE
from conversation import utc_now

CHANNEL, OTHER_CHANNEL = 10, 11


class SharedClaims:
    """The archive's claims as several processes see them: the first claimant of a message holds it."""

    def __init__(self) -> None:
        self.held: dict[int, str] = {}
        self.slow: dict[int, asyncio.Event] = {}  # claims that wait for their event before they commit

    async def claim_message(self, message_id: int, claimant: str, claimed_at: datetime) -> bool:
        if message_id in self.slow:
            await self.slow[message_id].wait()
        return self.held.setdefault(message_id, claimant) == claimant

    async def release_message(self, message_id: int, claimant: str) -> None:
        if self.held.get(message_id) == claimant:
            del self.held[message_id]


class Holder:
    def __init__(self, archive: Any) -> None:
        self.archive = archive


async def test_a_second_delivery_here_is_recognised_and_another_process_s_claim_stands() -> None:
    shared = SharedClaims()
    here, there = MessageClaims(Holder(shared)), MessageClaims(Holder(shared))
    assert await here.claim(1, channel_id=CHANNEL, answerable=True) is Claimed.FIRST
    assert await here.claim(1, channel_id=CHANNEL, answerable=True) is Claimed.AGAIN
    assert await there.claim(1, channel_id=CHANNEL, answerable=True) is Claimed.ELSEWHERE
    assert (
        await there.claim(1, channel_id=CHANNEL, answerable=True) is Claimed.AGAIN
    )  # there, it is decided (not) already


async def test_a_claim_given_back_is_the_next_delivery_s() -> None:
    shared = SharedClaims()
    here, there = MessageClaims(Holder(shared)), MessageClaims(Holder(shared))
    assert await here.claim(1, channel_id=CHANNEL, answerable=True) is Claimed.FIRST
    await here.give_back(1)
    assert await there.claim(1, channel_id=CHANNEL, answerable=True) is Claimed.FIRST


async def test_a_message_that_could_not_be_answered_is_not_claimed() -> None:
    shared = SharedClaims()
    claims = MessageClaims(Holder(shared))
    assert await claims.claim(1, channel_id=CHANNEL, answerable=False) is Claimed.FIRST
    assert (
        await claims.claim(1, channel_id=CHANNEL, answerable=True) is Claimed.FIRST
    )  # a conversation began since: decided once
    assert shared.held == {1: claims.claimant}


async def test_a_claim_the_archive_cannot_store_leaves_the_message_for_its_next_delivery(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    shared = SharedClaims()
    claims = MessageClaims(Holder(shared))

    async def unstored(*args: Any) -> bool:
        raise ArchiveWriteFailed("the database is down")

    monkeypatch.setattr(shared, "claim_message", unstored)
    assert await claims.claim(1, channel_id=CHANNEL, answerable=True) is Claimed.UNSTORED
    monkeypatch.undo()
    assert await claims.claim(1, channel_id=CHANNEL, answerable=True) is Claimed.FIRST


async def test_without_an_archive_this_process_alone_remembers() -> None:
    claims = MessageClaims(Holder(NULL_ARCHIVE))
    assert await claims.claim(1, channel_id=CHANNEL, answerable=True) is Claimed.FIRST
    assert await claims.claim(1, channel_id=CHANNEL, answerable=True) is Claimed.AGAIN


async def test_deliveries_leave_in_the_order_they_came_however_long_a_claim_takes() -> None:
    """A later message's claim (or one needing none) never overtakes an earlier one waiting for the archive."""
    shared = SharedClaims()
    shared.slow[1] = asyncio.Event()
    claims = MessageClaims(Holder(shared))
    left: list[int] = []

    async def deliver(message_id: int, answerable: bool) -> None:
        await claims.claim(message_id, channel_id=CHANNEL, answerable=answerable)
        left.append(message_id)

    first = asyncio.create_task(deliver(1, True))
    await asyncio.sleep(0)  # the first is waiting for the archive
    later = [asyncio.create_task(deliver(2, True)), asyncio.create_task(deliver(3, False))]
    await asyncio.sleep(0)
    assert left == []
    shared.slow[1].set()
    await asyncio.gather(first, *later)
    assert left == [1, 2, 3]


async def test_a_claim_is_remembered_here_for_a_day_from_when_it_was_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    """However old the message (a mention from long ago, logged too old by catch-up); then it is forgotten here."""
    claims = MessageClaims(Holder(NULL_ARCHIVE))
    start = utc_now()
    monkeypatch.setattr(once, "utc_now", lambda: start)
    assert await claims.claim(1, channel_id=CHANNEL, answerable=True) is Claimed.FIRST
    monkeypatch.setattr(once, "utc_now", lambda: start + REMEMBERED)
    assert await claims.claim(1, channel_id=CHANNEL, answerable=True) is Claimed.AGAIN
    monkeypatch.setattr(once, "utc_now", lambda: start + REMEMBERED + timedelta(seconds=1))
    assert await claims.claim(2, channel_id=CHANNEL, answerable=True) is Claimed.FIRST
    assert await claims.claim(1, channel_id=CHANNEL, answerable=True) is Claimed.FIRST


async def test_another_channels_claim_does_not_wait_for_a_slow_one() -> None:
    """Order is kept within a channel (its messages take their turns in order); a channel never waits for another's
    archive round trip, and a channel's ordering is dropped once no claim in it is under way."""
    shared = SharedClaims()
    shared.slow[1] = asyncio.Event()
    claims = MessageClaims(Holder(shared))
    slow = asyncio.create_task(claims.claim(1, channel_id=CHANNEL, answerable=True))
    await asyncio.sleep(0)  # message 1 waits for the archive
    async with asyncio.timeout(1):  # with one order for every channel, it would wait for message 1's archive
        assert await claims.claim(2, channel_id=OTHER_CHANNEL, answerable=True) is Claimed.FIRST
    assert not slow.done()
    shared.slow[1].set()
    assert await slow is Claimed.FIRST
    assert claims._in_order == {}
