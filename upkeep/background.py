"""Work that runs beside the bot (summaries, catch-up, archiving a file's text), which no member waits for."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any


class BackgroundTasks:
    """Tasks started beside the bot, each kept until it ends; `close` stops what is still running (at close)."""

    def __init__(self) -> None:
        self._running: set[asyncio.Task[None]] = set()
        self._closed = False

    def __len__(self) -> int:
        return len(self._running)

    def start(self, work: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        """Run `work` beside the bot; once `close` has begun, it is cancelled before it starts."""
        task = asyncio.create_task(work, name=name)
        if self._closed:
            task.cancel()
            return task
        self._running.add(task)
        task.add_done_callback(self._running.discard)
        return task

    async def wait(self) -> None:
        """Until what runs now has ended (a bench waits for summaries this way)."""
        await asyncio.gather(*list(self._running))

    async def close(self) -> None:
        """Cancel what runs and whatever starts from now on: at close, an event handler still under way (a new
        session's catch-up) must not start work that reads through connections about to close."""
        self._closed = True
        for task in list(self._running):
            task.cancel()
        await asyncio.gather(*self._running, return_exceptions=True)
