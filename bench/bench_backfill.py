"""Benchmark catch-up: how fast missed messages are archived from Discord's history, and the event-loop lag meanwhile.

    python bench/bench_backfill.py [--messages 20000] [--channels 2] [--runs 3]

The fake Discord from tests/ holds `--messages` messages spread over `--channels` channels that the
archive has never seen, and serves its history 100 messages a page, as Discord does. It runs in a
child process, so the bot's process (and its GIL) carries only the bot's work. Parley's client (bot.py's
`build_client` and `run`, archive on, BACKFILL_MAX_MESSAGES as large as the backlog) connects;
catch-up starts on READY. Figures per run:

- throughput: messages archived (committed) per second, from catch-up's start to its end;
- lag: how late a 5 ms timer on the bot's event loop fires while catch-up runs (worst and p99),
  which is how long an answer's work could be held up by it.

The run with the best throughput is the figure (as `timeit` advises on a shared machine); every
run's figures are printed too.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import multiprocessing
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine
from contextlib import closing
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from pydantic import SecretStr  # noqa: E402

from bot import Parley, build_client  # noqa: E402
from config import Settings  # noqa: E402
from edge.gateway import point_at_discord  # noqa: E402
from ops.cli import run  # noqa: E402
from ops.resources import open_resources  # noqa: E402
from tests.fakes.fake_discord import ALICE_ID, BOB_ID, DEFAULT_TOKEN, FakeDiscord  # noqa: E402
from tests.fakes.fake_llm import MODEL_NAME  # noqa: E402

LAG_INTERVAL = 0.005


@dataclass(frozen=True)
class Endpoints:
    api_base_url: str
    gateway_url: str


def serve_fake(messages: int, channels: int, connection: Connection) -> None:
    """The child process: seed a fake Discord, serve it, send its endpoints, and stop when told."""

    async def serve() -> None:
        async with seeded_fake(messages, channels) as fake:
            connection.send(Endpoints(fake.api_base_url, fake.gateway_url))
            await asyncio.get_running_loop().run_in_executor(None, connection.recv)

    asyncio.run(serve())


class FakeInItsOwnProcess:
    """A seeded FakeDiscord served by a child process, so the bot's process does only the bot's work."""

    def __init__(self, messages: int, channels: int) -> None:
        self.connection, child = multiprocessing.Pipe()
        self.process = multiprocessing.Process(target=serve_fake, args=(messages, channels, child), daemon=True)

    def __enter__(self) -> Endpoints:
        self.process.start()
        endpoints: Endpoints = self.connection.recv()
        return endpoints

    def __exit__(self, *exc_info: object) -> None:
        self.connection.send("stop")
        self.process.join(30)


@dataclass(frozen=True)
class Run:
    archived: int
    seconds: float
    lags: list[float]
    done: str = "archived"  # what was done to the messages (bench_reconciliation.py: "rechecked")

    @property
    def throughput(self) -> float:
        return self.archived / self.seconds

    def describe(self) -> str:
        lags = sorted(self.lags)
        p99 = lags[int(len(lags) * 0.99)] if lags else 0.0
        return (
            f"{self.archived:,} messages in {self.seconds:.2f} s: {self.throughput:,.0f} messages/s {self.done};"
            f" event-loop lag worst {max(lags, default=0) * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms,"
            f" median {statistics.median(lags or [0]) * 1000:.2f} ms ({len(lags)} samples)"
        )


def seeded_fake(messages: int, channels: int) -> FakeDiscord:
    fake = FakeDiscord()
    for number in range(channels - len(fake.channels)):
        fake.channels[fake._next_id()] = type(fake.channels[fake.channel_id])(fake._next_id(), f"extra-{number}", 2)
    channel_ids = list(fake.channels)[:channels]
    start = datetime.now(UTC) - timedelta(hours=1)
    for number in range(messages):
        fake.add_history(
            channel_ids[number % channels],
            ALICE_ID if number % 3 else BOB_ID,
            f"message {number}: the deploy of build {number % 97} went fine, see the logs for details",
            start + timedelta(milliseconds=number),
        )
    return fake


def archived_count(database: Path) -> int:
    with closing(sqlite3.connect(database)) as db:
        ((count,),) = db.execute("SELECT count(*) FROM messages")
        return int(count)


def catching_up(client: Parley) -> bool:
    return client.coverage.catching_up


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
            while not catching_up(client):  # noqa: ASYNC110 - catch-up starts from on_ready, with no event
                await asyncio.sleep(0.001)
            started = time.perf_counter()
            while catching_up(client):
                before = time.perf_counter()
                await asyncio.sleep(LAG_INTERVAL)
                lags.append(time.perf_counter() - before - LAG_INTERVAL)
            await client.archive.flush()
            seconds = time.perf_counter() - started
    finally:
        await client.close()
        await serving
        await opened.aclose()
    return Run(archived_count(database), seconds, lags)


Measure = Callable[[Endpoints, int, Path], Coroutine[Any, Any, Run]]


def best_of_runs(description: str | None, measure: Measure, what: str) -> None:
    """The command line both history benches share: `--runs` runs of `measure` against a fake Discord in its own
    process holding `--messages` over `--channels`, each printed, then the best."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--channels", type=int, default=2)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    runs = []
    for number in range(args.runs):
        with FakeInItsOwnProcess(args.messages, args.channels) as fake, tempfile.TemporaryDirectory() as tmp:
            result = asyncio.run(measure(fake, args.messages, Path(tmp) / "parley.db"))
        print(f"run {number + 1}: {result.describe()}")
        runs.append(result)
    best = max(runs, key=lambda result: result.throughput)
    print(f"{what}, {args.channels} channel(s), 100 messages a page: {best.describe()}")


def main() -> None:
    best_of_runs(__doc__, measure, "catch-up")


if __name__ == "__main__":
    main()
