"""Delivering a post to Discord under a deadline: server errors and timeouts retried with backoff, then given up.

discord.py's HTTP client (discord/http.py, `HTTPClient.request`) already waits out 429s and retries 500, 502, 504
and 524 itself, up to five attempts 1 + 2 * attempt seconds apart, but raises `DiscordServerError` at once on a 503
and other 5xx, and knows no timeout of its own beyond aiohttp's. Discord's docs call a 5xx its own server error
and say of a 502 "wait a bit and retry" (https://discord.com/developers/docs/topics/opcodes-and-status-codes#http).
So an answer's post is tried again here, each try bounded (which also ends discord.py's own long sleeps between its
tries), with growing waits, until it is posted or the deadline has passed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import aiohttp
import discord

log = logging.getLogger("parley")

T = TypeVar("T")

# The first wait between tries is this share of the deadline, doubling up to MAX_WAIT_SHARE of it: with the
# default 30 seconds, 1, 2, 4, 7.5, 7.5... seconds.
FIRST_WAIT_SHARE = 1 / 30
MAX_WAIT_SHARE = 1 / 4
# One try may take this share of the answer's deadline: past it, the try is ended (mostly inside discord.py's own
# 1, 3, 5... second sleeps between its retries of a 500) and made again, so several tries fit in the deadline.
TRY_SHARE = 1 / 3


def is_transient(error: BaseException) -> bool:
    """A failure worth trying again: a 5xx from Discord, a timeout, a broken connection. A 4xx is an answer."""
    if isinstance(error, discord.HTTPException):
        return error.status >= 500
    return isinstance(error, (TimeoutError, aiohttp.ClientError, OSError))


class Delivery:
    """Tries a post until it succeeds or `seconds` have passed; `clock` is monotonic seconds (injected in tests)."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds = seconds
        self.clock = clock

    async def attempt(self, send: Callable[[], Awaitable[T]], what: str, seconds: float | None = None) -> T | None:
        """`send()`'s result, tried again on a transient failure until posted or the deadline (`seconds`, else the
        delivery's) has passed; None then, or at once on a failure that trying again cannot mend (logged)."""
        budget = self.seconds if seconds is None else seconds
        deadline = self.clock() + budget
        # The waits follow the answer's deadline even when `seconds` is longer (the "lost" line's patience).
        wait = self.seconds * FIRST_WAIT_SHARE
        while True:
            left = deadline - self.clock()
            try:
                async with asyncio.timeout(max(min(left, self.seconds * TRY_SHARE), 0.001)):
                    return await send()
            except (discord.HTTPException, TimeoutError, aiohttp.ClientError, OSError) as error:
                left = deadline - self.clock()
                if not is_transient(error) or left <= 0:
                    log.error("could not post %s: %s", what, error or type(error).__name__)
                    return None
                log.warning("posting %s failed (%s); trying again", what, error or type(error).__name__)
            await asyncio.sleep(min(wait, left))
            wait = min(wait * 2, self.seconds * MAX_WAIT_SHARE)
