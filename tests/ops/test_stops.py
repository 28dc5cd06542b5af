"""ops.cli.until_stopped: a stop request undoes the start-up or serving work in any phase, and says it was a stop."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest

from ops.cli import StopRequested, until_stopped


class Phase:
    """A phase of start-up that waits on Discord for ever, and records whether it was left through its cleanup."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.cleaned_up = False

    async def wait_for_discord(self) -> None:
        self.entered.set()
        try:
            await asyncio.Event().wait()
        finally:
            self.cleaned_up = True


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
async def test_a_signal_cancels_the_work_through_its_cleanup_and_is_a_stop(signum: signal.Signals) -> None:
    phase = Phase()
    stopping = asyncio.create_task(until_stopped(phase.wait_for_discord()))
    await phase.entered.wait()
    os.kill(os.getpid(), signum)
    with pytest.raises(StopRequested):
        await asyncio.wait_for(stopping, 5)
    assert phase.cleaned_up
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the loop's handlers are gone again


async def test_work_that_ends_or_fails_on_its_own_is_no_stop() -> None:
    async def serve_until_discord_disconnects() -> None:
        return None

    async def fail_to_log_in() -> None:
        raise ConnectionResetError("the network is down")

    await until_stopped(serve_until_discord_disconnects())
    with pytest.raises(ConnectionResetError):
        await until_stopped(fail_to_log_in())
