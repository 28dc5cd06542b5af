"""helpdesk/desk.py without Discord: support mode kept in the archive, when the desk wakes, and a question settled
when its wait is over (the end-to-end tests, tests/e2e/test_e2e_support.py, take it through Discord)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from archive import Archive, SupportHandoff
from config import Settings
from helpdesk.desk import HUMAN_FIRST, MAX_WAIT_SECONDS, SupportDesk, Waiting
from helpdesk.question import SUPPORT_NOT_SURE
from records import Decision, MessageRecord

START = datetime(2026, 11, 28, 9, 0, tzinfo=UTC)
GUILD, CHANNEL, OTHER_CHANNEL, ASKER, ADMIN = 10, 20, 21, 30, 40


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now


class Path:
    """The message's way, as the desk reaches it: the decisions it notes, and who erased what."""

    def __init__(self) -> None:
        self.decisions: list[tuple[int, Decision]] = []
        self.erased: set[int] = set()

    def decided_here(self, record: MessageRecord, decision: Decision) -> None:
        self.decisions.append((record.message_id, decision))

    def withheld(self, guild_id: int, record: MessageRecord) -> bool:
        return record.message_id in self.erased

    async def answer_from_documents(self, *args: Any) -> None:
        raise AssertionError("nothing here is answered: there are no documents")


def desk_over(archive: Any, **settings: Any) -> tuple[SupportDesk, Clock, Path]:
    clock, path = Clock(), Path()
    values: dict[str, Any] = {"discord_token": "x", **settings}
    stores: Any = SimpleNamespace(archive=archive, knowledge=None)
    desk = SupportDesk(Settings(_env_file=None, **values), stores, lambda channel_id: None, clock=clock)
    desk.path = path
    return desk, clock, path


def waiting(message_id: int, asked_at: datetime = START, channel_id: int = CHANNEL) -> Waiting:
    """A question of `channel_id` waiting on the desk, as a message brings it (only what the desk reads of it)."""
    record = MessageRecord(message_id, channel_id, ASKER, "Bob", "how do I install it?", asked_at)
    message = SimpleNamespace(
        channel=SimpleNamespace(id=channel_id), guild=None, author=SimpleNamespace(id=ASKER), content=record.content
    )
    arrival: Any = SimpleNamespace(record=record, message=message, guild_id=GUILD)
    return Waiting(arrival, False, asked_at)


async def test_support_mode_is_kept_in_the_archive_and_read_back(archive: Archive) -> None:
    desk, _, _ = desk_over(archive)
    await desk.set_support(CHANNEL, GUILD, True, set_by=ADMIN)
    assert desk.in_support(SimpleNamespace(id=CHANNEL)) and not desk.in_support(SimpleNamespace(id=OTHER_CHANNEL))
    again, _, _ = desk_over(archive)
    await again.load()
    assert again.channels == {CHANNEL: GUILD}
    await desk.set_support(CHANNEL, GUILD, False, set_by=ADMIN)
    assert desk.channels == {} and await archive.support_channels() == {}


async def test_turning_support_off_drops_the_questions_waiting_there(archive: Archive) -> None:
    desk, _, _ = desk_over(archive)
    await desk.set_support(CHANNEL, GUILD, True, set_by=ADMIN)
    await desk.set_support(OTHER_CHANNEL, GUILD, True, set_by=ADMIN)
    desk._waiting = {1: waiting(1), 2: waiting(2, channel_id=OTHER_CHANNEL)}
    await desk.set_support(CHANNEL, GUILD, False, set_by=ADMIN)
    assert list(desk._waiting) == [2]


def test_the_desk_sleeps_until_the_next_question_is_due_and_at_most_a_minute() -> None:
    desk, clock, _ = desk_over(None)
    assert desk._sleep() == MAX_WAIT_SECONDS
    desk._waiting = {1: waiting(1), 2: waiting(2, START + timedelta(seconds=30))}
    clock.now = START + timedelta(seconds=100)
    assert desk._sleep() == pytest.approx(20)  # the first is due at 120 s
    clock.now = START + timedelta(minutes=5)
    assert desk._sleep() == 0
    desk._waiting = {}
    assert desk._sleep() == MAX_WAIT_SECONDS  # forum posts left for their hand-off wait in the archive


async def test_a_question_is_settled_when_its_wait_is_over_not_before(archive: Archive) -> None:
    """Without documents a question due is left (`support_not_sure`, a score of 0), once; one not due yet waits, and
    one whose author erased it meanwhile goes without a decision."""
    desk, clock, path = desk_over(archive)
    await desk.set_support(CHANNEL, GUILD, True, set_by=ADMIN)
    desk._waiting = {1: waiting(1), 2: waiting(2, START + timedelta(seconds=60)), 3: waiting(3)}
    path.erased.add(3)
    task = asyncio.create_task(desk.run())
    try:
        clock.now = START + timedelta(seconds=121)
        await desk.ticks.next_tick()
        assert path.decisions == [(1, Decision(False, SUPPORT_NOT_SURE, "support", confidence=0.0))]
        assert list(desk._waiting) == [2]
        clock.now = START + timedelta(seconds=181)
        await desk.ticks.next_tick()
        assert [message_id for message_id, _ in path.decisions] == [1, 2] and desk._waiting == {}
    finally:
        task.cancel()


def test_a_members_answer_that_overtook_its_question_leaves_the_question_to_them() -> None:
    """A reply can reach the desk before the question it answers (their ways run side by side): the question is then
    left to the member as soon as it is taken."""
    desk, _, path = desk_over(None)
    desk._answered[1] = {ASKER, ASKER + 1}  # the asker and another member replied to message 1
    desk._answered[2] = {ASKER}  # the asker replied to their own message 2: no answer
    for message_id in (1, 2):
        arrival: Any = waiting(message_id).arrival
        arrival.message.created_at = START
        desk.take(arrival, candidate=True)
    assert path.decisions == [(1, HUMAN_FIRST)] and list(desk._waiting) == [2]


class BrokenKnowledge:
    """A knowledge base whose search fails, as a database that went away does."""

    def __init__(self) -> None:
        self.consulted = 0

    async def has_documents(self, guild_id: int) -> bool:
        return True

    async def consult(self, *args: Any, **options: Any) -> Any:
        self.consulted += 1
        raise RuntimeError("the database went away")


async def test_a_question_whose_search_fails_is_logged_once_and_left(
    archive: Archive, caplog: pytest.LogCaptureFixture
) -> None:
    desk, clock, path = desk_over(archive)
    knowledge = BrokenKnowledge()
    desk.stores.knowledge = knowledge  # type: ignore[misc]
    await desk.set_support(CHANNEL, GUILD, True, set_by=ADMIN)
    desk._waiting = {1: waiting(1)}
    task = asyncio.create_task(desk.run())
    try:
        clock.now = START + timedelta(seconds=121)
        await desk.ticks.next_tick()
        await desk.ticks.next_tick()
    finally:
        task.cancel()
    assert knowledge.consulted == 1 and desk._waiting == {} and path.decisions == []
    assert caplog.text.count("a question could not be settled") == 1


async def test_a_hand_off_whose_post_no_process_finds_is_dropped_a_day_after_it_was_due(archive: Archive) -> None:
    """Its thread is another process's (or not cached yet) until a day past due: looked for again at each tick; then
    its post is taken as gone."""
    desk, clock, path = desk_over(archive)
    await archive.await_handoff(SupportHandoff(7, GUILD, ASKER, START))
    task = asyncio.create_task(desk.run())
    try:
        clock.now = START + timedelta(hours=23)
        await desk.ticks.next_tick()
        assert [handoff.message_id for handoff in await archive.due_handoffs(clock.now)] == [7]
        clock.now = START + timedelta(days=1, minutes=1)
        await desk.ticks.next_tick()
        assert await archive.due_handoffs(clock.now) == [] and path.decisions == []
    finally:
        task.cancel()
