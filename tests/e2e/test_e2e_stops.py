"""End-to-end: a stop request (SIGTERM, as a redeploy sends) while bot.py starts is a clean exit 0 in one line."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import pytest

from tests.fakes.fake_discord import FakeDiscord
from tests.fakes.fake_llm import FakeLLM
from tests.support.e2e_support import bot_environment, start_bot_py


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "held_route"),
    [
        pytest.param((), "GET /users/@me", id="during-login"),
        pytest.param(("--sync",), "PUT /applications/{application_id}/commands", id="during-command-sync"),
    ],
)
async def test_sigterm_while_starting_exits_0_in_one_line(
    fake: FakeDiscord, llm: FakeLLM, tmp_path: Path, args: tuple[str, ...], held_route: str
) -> None:
    """Discord holds the start at `held_route`; SIGTERM there ends bot.py with exit 0 and "Parley stopped." alone."""
    fake.held_routes.add(held_route)
    process = await start_bot_py(bot_environment(fake, llm, tmp_path / "parley.db"), tmp_path, *args)
    try:
        await fake.wait_for(lambda: held_route in fake.reached_held_routes, 30, held_route)
        process.send_signal(signal.SIGTERM)
        _, stderr = await asyncio.wait_for(process.communicate(), 15)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    output = stderr.decode()
    assert process.returncode == 0, output
    assert output.splitlines()[-1] == "Parley stopped.", output
    assert output.count("Parley stopped.") == 1
    for crash in ("Traceback", "Could not reach Discord", "Session is closed", "Connector is closed"):
        assert crash not in output
