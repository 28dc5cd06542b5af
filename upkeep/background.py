"""Work that runs beside the bot (summaries, catch-up, archiving a file's text), which no member waits for."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any


class BackgroundTasks:
    """Tasks started beside the bot, each kept until it ends; `cancel` stops what is still running (at close)."""

    def __init__(self) -> None:
        self._running: set[asyncio.Task[None]] = set()

    def __len__(self) -> int:
        return len(self._running)

    def start(self, work: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        """Run `work` beside the bot."""
        task = asyncio.create_task(work, name=name)
        self._running.add(task)
        task.add_done_callback(self._running.discard)
        return task

    async def wait(self) -> None:
        """Until what runs now has ended (a bench waits for summaries this way)."""
        await asyncio.gather(*list(self._running))

    async def cancel(self) -> None:
        for task in list(self._running):
            task.cancel()
        await asyncio.gather(*self._running, return_exceptions=True)
