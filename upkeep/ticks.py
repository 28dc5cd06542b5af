"""A background task that works in ticks (the support desk; the digests, whose ticks the reminders' scheduler runs): a
tick, then a sleep until the next one is due or until woken. A test moves the task's clock, then awaits `next_tick`
instead of sleeping."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger("parley")


class Ticks:
    """The loop of a task that ticks, and the tick count a test waits on.

    A task whose ticks another loop runs (the digests, on the reminders' scheduler: one scheduler for every timed
    post) counts each with `tick_once` and gives `waker`, which wakes that loop."""

    def __init__(self, name: str, *, longest: float, waker: Callable[[], None] | None = None) -> None:
        self.name = name
        # The longest sleep, and the sleep after a failed tick.
        self.longest = longest
        self.waker = waker
        self._wake = asyncio.Event()
        self._ticked = asyncio.Condition()
        self._started = self._finished = 0

    def wake(self) -> None:
        """Tick now rather than when the next tick is due."""
        self._wake.set()
        if self.waker is not None:
            self.waker()

    async def next_tick(self) -> None:
        """Wake the task and wait until a tick that began after this call has finished."""
        target = self._started + 1
        self.wake()
        async with self._ticked:
            await self._ticked.wait_for(lambda: self._finished >= target)

    async def run(self, tick: Callable[[], Awaitable[float]]) -> None:
        """For ever: `tick`, which says how many seconds may pass before the next one (at most `longest`), then sleep
        that long or until woken."""
        while True:
            wait = await self.tick_once(tick)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), max(wait, 0.0))

    async def tick_once(self, tick: Callable[[], Awaitable[float]]) -> float:
        """One tick, counted: how many seconds may pass before the next one (`longest` after a failure)."""
        self._wake.clear()
        self._started += 1
        wait = self.longest
        try:
            wait = min(await tick(), self.longest)
        except Exception:
            # A background task's failure would otherwise go unseen, and end its ticks until a restart.
            log.exception("%s: a tick failed", self.name)
        finally:
            self._finished += 1
            async with self._ticked:
                self._ticked.notify_all()
        return wait
