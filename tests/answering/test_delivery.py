"""answering.delivery: what is tried again, and for how long."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import discord

from answering.delivery import Delivery, is_transient


def http_error(status: int) -> discord.HTTPException:
    response: Any = SimpleNamespace(status=status, reason="scripted")
    if status >= 500:
        return discord.DiscordServerError(response, "scripted")
    return discord.Forbidden(response, "scripted") if status == 403 else discord.HTTPException(response, "scripted")


class Script:
    """A send that fails with the scripted errors in turn, then returns "posted"; it counts its calls."""

    def __init__(self, *failures: BaseException | None) -> None:
        self.failures = list(failures)
        self.calls = 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.failures:
            failure = self.failures.pop(0)
            if failure is None:
                await asyncio.Event().wait()  # hangs: a POST Discord never answers
            else:
                raise failure
        return "posted"


def test_server_errors_timeouts_and_broken_connections_are_transient_and_4xx_are_not() -> None:
    assert is_transient(http_error(503)) and is_transient(http_error(500))
    assert is_transient(TimeoutError()) and is_transient(ConnectionResetError())
    assert not is_transient(http_error(403)) and not is_transient(http_error(400))


async def test_a_503_and_a_timeout_are_tried_again_until_posted() -> None:
    send = Script(http_error(503), None, http_error(502))
    assert await Delivery(0.6).attempt(send, "a test post") == "posted"
    assert send.calls == 4


async def test_a_refusal_is_not_tried_again() -> None:
    send = Script(http_error(403))
    assert await Delivery(5).attempt(send, "a test post") is None
    assert send.calls == 1


async def test_a_failure_that_lasts_past_the_deadline_gives_up_at_the_deadline() -> None:
    send = Script(*[http_error(503)] * 1000)
    loop = asyncio.get_running_loop()
    started = loop.time()
    assert await Delivery(0.3).attempt(send, "a test post") is None
    assert 0.3 <= loop.time() - started < 1.0
    assert 3 <= send.calls < 20  # tried again with backoff, not in a tight loop
