"""End-to-end: one `python bot.py` per archive (and per shard on Postgres), against the fake Discord.

A second process on the same archive says so in one line and exits 2 while the first keeps serving; once the
first is gone, even by kill -9, the next one starts.
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import pytest

from tests.conftest import fresh_postgres_database
from tests.fakes.fake_discord import ALICE_ID, BOT_ID, FakeDiscord
from tests.fakes.fake_llm import FakeLLM
from tests.support.e2e_support import bot_environment, run_bot_py, say, start_bot_py

PROCESS_TIMEOUT = 60.0


async def stop(process: asyncio.subprocess.Process, how: signal.Signals = signal.SIGTERM) -> int:
    """Send `how` and wait for the exit code."""
    if process.returncode is None:
        process.send_signal(how)
    return await asyncio.wait_for(process.wait(), PROCESS_TIMEOUT)


async def answers(fake: FakeDiscord, question: str) -> None:
    """Alice mentions Parley; returns once it has answered."""
    posts = len(fake.bot_posts)
    await say(fake, ALICE_ID, f"<@{BOT_ID}> {question}")
    await fake.wait_for_posts(posts + 1, timeout=PROCESS_TIMEOUT)


@pytest.mark.slow
async def test_a_second_bot_py_on_the_same_sqlite_file_exits_2_and_a_new_one_starts_after_kill_9(
    fake: FakeDiscord, llm: FakeLLM, tmp_path: Path
) -> None:
    """The second process exits 2 with one line naming the file and the first's process id; the first answers on;
    killed with SIGKILL (no clean-up of its own), it leaves nothing that stops the next start."""
    database = tmp_path / "data" / "parley.db"
    env = bot_environment(fake, llm, database)
    first = await start_bot_py(env, tmp_path, output=asyncio.subprocess.DEVNULL)
    try:
        await fake.wait_for_ready(timeout=PROCESS_TIMEOUT)
        code, stderr = await run_bot_py({**env, "ARCHIVE_LOCK_WAIT_SECONDS": "0"}, tmp_path)
        assert (code, stderr.splitlines()) == (
            2,
            [
                f"Not started: {database} is in use by another Parley process (process {first.pid});"
                " one process per archive (per shard on Postgres)"
            ],
        )
        assert len(fake.identifies) == 1  # refused before it reached Discord
        await answers(fake, "still there?")
        assert await stop(first, signal.SIGKILL) == -signal.SIGKILL
        second = await start_bot_py(env, tmp_path, output=asyncio.subprocess.DEVNULL)
        try:
            await fake.wait_for_ready(timeout=PROCESS_TIMEOUT, sessions=2)
            await answers(fake, "and now?")
        finally:
            assert await stop(second) == 0
    finally:
        if first.returncode is None:
            await stop(first, signal.SIGKILL)


@pytest.mark.slow
async def test_a_second_bot_py_on_a_postgres_shard_already_run_exits_2_naming_it(
    fake: FakeDiscord, llm: FakeLLM, tmp_path: Path, postgres_server: str
) -> None:
    """SHARD_IDS=0 runs; a process for shards 0 and 1 on the same database waits ARCHIVE_LOCK_WAIT_SECONDS, saying
    so, then exits 2 naming shard 0; after the first is killed with SIGKILL, the server ends its session and its
    lock, and the second starts."""
    database_url = await fresh_postgres_database(postgres_server)
    env = {**bot_environment(fake, llm, tmp_path / "unused.db", SHARD_COUNT="2"), "DATABASE_URL": database_url}
    first = await start_bot_py({**env, "SHARD_IDS": "0"}, tmp_path, output=asyncio.subprocess.DEVNULL)
    try:
        await fake.wait_for_shard(0, PROCESS_TIMEOUT)
        code, stderr = await run_bot_py({**env, "SHARD_IDS": "0,1", "ARCHIVE_LOCK_WAIT_SECONDS": "1"}, tmp_path)
        assert code == 2
        waiting, line = stderr.splitlines()
        assert waiting.endswith("(running shard 0): waiting up to 1 s for it to stop")
        assert line.startswith("Not started: Postgres ") and "(running shard 0)" in line
        await answers(fake, "still there?")
        assert await stop(first, signal.SIGKILL) == -signal.SIGKILL
        second = await start_bot_py({**env, "SHARD_IDS": "0,1"}, tmp_path, output=asyncio.subprocess.DEVNULL)
        try:
            await fake.wait_for_shard(1, PROCESS_TIMEOUT)
        finally:
            assert await stop(second) == 0
    finally:
        if first.returncode is None:
            await stop(first, signal.SIGKILL)
