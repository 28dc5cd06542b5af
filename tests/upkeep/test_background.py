"""Tests for upkeep/background.py: work beside the bot, and what closing does to it."""

from __future__ import annotations

import asyncio

import pytest

from upkeep.background import BackgroundTasks


async def test_close_cancels_what_runs_and_what_starts_afterwards() -> None:
    """At close, running work is cancelled, and work an event handler starts afterwards never runs."""
    tasks = BackgroundTasks()
    ran: list[str] = []

    async def forever() -> None:
        await asyncio.Event().wait()

    async def note() -> None:
        ran.append("late")

    running = tasks.start(forever(), "forever")
    await tasks.close()
    assert running.cancelled() and len(tasks) == 0
    late = tasks.start(note(), "late")
    with pytest.raises(asyncio.CancelledError):
        await late
    assert ran == []
