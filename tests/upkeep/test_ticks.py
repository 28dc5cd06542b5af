"""upkeep/ticks.py: a task's ticks, woken for a test, and a failed tick logged without ending the task."""

from __future__ import annotations

import asyncio
import logging

import pytest

from upkeep.ticks import Ticks


async def test_a_failed_tick_is_logged_and_the_next_one_comes() -> None:
    ticks = Ticks("the test task", longest=3600)
    results: list[float | Exception] = [RuntimeError("broke"), 5.0]
    done: list[float] = []

    async def tick() -> float:
        result = results.pop(0) if results else 3600.0
        if isinstance(result, Exception):
            raise result
        done.append(result)
        return result

    task = asyncio.create_task(ticks.run(tick))
    try:
        await ticks.next_tick()  # the first tick, which failed: the task sleeps an hour, but wakes for the test
        await ticks.next_tick()
        assert done == [5.0]
    finally:
        task.cancel()


async def test_a_failure_is_logged_with_the_tasks_name(caplog: pytest.LogCaptureFixture) -> None:
    ticks = Ticks("the test task", longest=3600)

    async def broken() -> float:
        raise RuntimeError("broke")

    task = asyncio.create_task(ticks.run(broken))
    try:
        with caplog.at_level(logging.ERROR, "parley"):
            await ticks.next_tick()
        assert "the test task: a tick failed" in caplog.text
    finally:
        task.cancel()
