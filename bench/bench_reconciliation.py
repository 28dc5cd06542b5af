"""Benchmark the recheck of the archive against Discord after downtime: its pace, and the event-loop lag meanwhile.

    python bench/bench_reconciliation.py [--messages 20000] [--channels 2] [--runs 3]

The fake Discord of bench_backfill.py (in a child process) holds `--messages` messages over `--channels` channels.
Parley's client connects with the archive on, catch-up archives them all, and the recheck
(upkeep/reconciliation.py) then walks them back, 100 a page, with RECONCILE_PAGE_PAUSE_SECONDS=0 so that what is
measured is its own cost rather than the pause. Figures per run:

- pace: archived messages rechecked per second, from the recheck's start to its end;
- lag: how late a 5 ms timer on the bot's event loop fires while the recheck runs (worst and p99), which is how
  long an answer's work could be held up by it.

The run with the best pace is the figure; every run's figures are printed too.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time
from pathlib import Path

from bench_backfill import LAG_INTERVAL, Endpoints, Run, archived_count, best_of_runs
from pydantic import SecretStr

from bot import Parley, build_client
from config import Settings
from edge.gateway import point_at_discord
from ops.cli import run
from ops.resources import open_resources
from tests.fakes.fake_discord import DEFAULT_TOKEN
from tests.fakes.fake_llm import MODEL_NAME


def rechecking(client: Parley) -> bool:
    return client.coverage.reconciliation.running


async def measure(fake: Endpoints, messages: int, database: Path) -> Run:
    settings = Settings(
        _env_file=None,
        discord_token=SecretStr(DEFAULT_TOKEN),
        llm_model=MODEL_NAME,
        llm_base_url="http://127.0.0.1:9/v1",  # never called: nobody addresses the bot
        database_url=f"sqlite:///{database}",
        discord_api_base_url=fake.api_base_url,
        discord_gateway_url=fake.gateway_url,
        backfill_max_messages=messages,
        reconcile_page_pause_seconds=0,
        log_level="WARNING",
    )
    point_at_discord(settings)
    opened = contextlib.AsyncExitStack()  # the archive, opened before the client and closed after it, as serve does
    resources = await opened.enter_async_context(open_resources(settings))
    client = build_client(settings, resources, guild_ready_timeout=0.05)
    gc.freeze()  # as bot.main does
    serving = asyncio.create_task(run(client, DEFAULT_TOKEN))
    lags: list[float] = []
    try:
        async with asyncio.timeout(600):
            while not rechecking(client):  # noqa: ASYNC110 - the recheck starts once catch-up ends, with no event
                await asyncio.sleep(0.001)
            started = time.perf_counter()
            while rechecking(client):
                before = time.perf_counter()
                await asyncio.sleep(LAG_INTERVAL)
                lags.append(time.perf_counter() - before - LAG_INTERVAL)
            seconds = time.perf_counter() - started
    finally:
        await client.close()
        await serving
        await opened.aclose()
    return Run(archived_count(database), seconds, lags, done="rechecked")


def main() -> None:
    best_of_runs(__doc__, measure, "recheck")


if __name__ == "__main__":
    main()
