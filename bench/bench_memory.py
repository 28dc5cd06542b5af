"""Benchmark memory recall: latency with many memories in one server, and the cost of remembering.

Usage: python bench/bench_memory.py [--memories N] [--channels C] [--members M] [--queries Q] [--seed S]

Fills a throwaway archive with N synthetic facts in one server (Zipf-distributed vocabulary, channel
activity and members, as bench_history.py's chat), a third of them told by members about themselves,
then times `MemoryStore.recall` as the remember/recall tools call it: a random member in a random
channel, asking about topic words, questions, and a very common word. Also times `remember`, which
returns only once the fact is committed.

Then the memory the bot holds for conversations that have ended: the real client (`build_client`,
its archive open, not connected) keeps `--ended` conversations of 20 messages and a two-turn model
history each, as the archive's `conversations` rows; then they all time out, each is summarised (by a
stand-in model that answers at once) into the archive, and the process's resident memory is read
again (after `gc` and `malloc_trim`, so freed pages are really returned).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sqlite3
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_engine import resident_bytes
from bench_history import (
    QUESTIONS,
    TOPIC_RANK_START,
    ZIPF_EXPONENT,
    build_vocabulary,
    latency_row,
    percentile,
    row,
    zipf_cumulative,
)
from pydantic import SecretStr
from pydantic_ai import Agent, ModelResponse, TextPart
from pydantic_ai.messages import ModelMessage, ModelRequest, UserPromptPart
from pydantic_ai.models.function import FunctionModel

from archive.sqlite import SQLiteArchive
from archive.stores import StoreTables
from bot import Parley, build_client
from config import Settings
from memory.store import MemoryStore
from ops.resources import open_resources
from prompting.context import Summarizer
from records import MessageRecord

GUILD_ID = 900_000_000_000_000_000
FIRST_CHANNEL = 1_100_000_000_000_000_000
FIRST_MEMBER = 2_000_000_000_000_000_000
DAY_MS = 86_400_000


def fill(path: Path, args: argparse.Namespace, vocabulary: list[str], rng: random.Random) -> None:
    """Write the synthetic memories straight into the file, in one transaction (the triggers index them)."""
    word_weights = zipf_cumulative(len(vocabulary), ZIPF_EXPONENT)
    channel_weights = zipf_cumulative(args.channels, 0.8)
    member_weights = zipf_cumulative(args.members, 0.9)
    now_ms = int(time.time() * 1000)
    rows = []
    for memory_id in range(1, args.memories + 1):
        member = FIRST_MEMBER + rng.choices(range(args.members), cum_weights=member_weights)[0]
        channel = FIRST_CHANNEL + rng.choices(range(args.channels), cum_weights=channel_weights)[0]
        words = rng.choices(vocabulary, cum_weights=word_weights, k=rng.randint(4, 14))
        about = member if rng.random() < 1 / 3 else None
        created = now_ms - rng.randrange(30 * DAY_MS)
        rows.append((memory_id, GUILD_ID, channel, about, member, memory_id, " ".join(words), created))
    with sqlite3.connect(path) as db:
        db.executemany(
            "INSERT INTO memories (id, guild_id, channel_id, about_id, said_by_id, source_message_id, fact,"
            " created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )
    # The same pages a running bot would have cached after its first recalls.


async def time_recall(
    store: MemoryStore, queries: list[str], args: argparse.Namespace, rng: random.Random
) -> tuple[list[float], int]:
    latencies: list[float] = []
    hits = 0
    for query in queries:
        channel = FIRST_CHANNEL + rng.randrange(args.channels)
        member = FIRST_MEMBER + rng.randrange(args.members)
        started = time.perf_counter()
        found = await store.recall(query, guild_id=GUILD_ID, channel_id=channel, member_id=member)
        latencies.append((time.perf_counter() - started) * 1000)
        hits += bool(found)
    return latencies, hits


async def time_remember(store: MemoryStore, count: int) -> list[float]:
    latencies = []
    for n in range(count):
        started = time.perf_counter()
        await store.remember(
            guild_id=GUILD_ID,
            channel_id=FIRST_CHANNEL,
            said_by_id=FIRST_MEMBER,
            source_message_id=10**12 + n,
            fact=f"bench fact number {n}",
            about_speaker=True,
        )
        latencies.append((time.perf_counter() - started) * 1000)
    return latencies


async def run(args: argparse.Namespace) -> None:
    rng = random.Random(args.seed)
    vocabulary = build_vocabulary(rng)
    topics = [
        " ".join(rng.sample(vocabulary[TOPIC_RANK_START : TOPIC_RANK_START + 1500], rng.randint(1, 3)))
        for _ in range(args.queries)
    ]
    questions = [rng.choice(QUESTIONS).format(topic) for topic in topics]
    common = [rng.choice(vocabulary[:20]) for _ in range(args.queries)]
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp:
        path = Path(tmp) / "bench.db"
        await (await SQLiteArchive.open(path)).close()  # creates the schema
        started = time.perf_counter()
        fill(path, args, vocabulary, rng)
        print(f"stored {args.memories:,} memories in {time.perf_counter() - started:.1f} s", flush=True)
        archive = await SQLiteArchive.open(path)
        try:
            store = await MemoryStore.open(archive)
            await time_recall(store, topics[:20], args, rng)  # warm the page cache
            topic = await time_recall(store, topics, args, rng)
            question = await time_recall(store, questions, args, rng)
            frequent = await time_recall(store, common, args, rng)
            remember = await time_remember(store, args.queries)
        finally:
            await archive.close()
        size_mb = sum(f.stat().st_size for f in Path(tmp).iterdir()) / 1e6  # noqa: ASYNC240 - after the timing

    print()
    print(row("metric", "value", "target"))
    print(row("memories in the server / channels / members", f"{args.memories:,} / {args.channels} / {args.members}"))
    print(row("database file size", f"{size_mb:,.0f} MB"))
    print(latency_row("recall: 1-3 topic words", *topic, "p95 <= 10 ms"))
    print(latency_row("recall: same topics as questions", *question, "p95 <= 10 ms"))
    print(latency_row("recall: one top-20 word (the, you, ...)", *frequent))
    remembered = f"{sorted(remember)[len(remember) // 2]:.2f} / {percentile(remember, 0.95):.2f} ms"
    print(row("remember (committed before it returns), median / p95", remembered))

    with tempfile.TemporaryDirectory(prefix="bench-ended-") as tmp:
        before, live, ended, kept = await ended_conversations(args.ended, Path(tmp))
    mib = 1024 * 1024
    print(row("resident memory before the conversations", f"{before / mib:,.1f} MiB"))
    print(row(f"with {args.ended:,} conversations live", f"{live / mib:,.1f} MiB"))
    growth = (ended - before) / before * 100
    print(row(f"once all have ended ({kept:,} summaries in the archive)", f"{ended / mib:,.1f} MiB ({growth:+.1f}%)"))


async def ended_conversations(count: int, folder: Path) -> tuple[int, int, int, int]:
    """Resident memory before, with `count` live conversations, and once they have ended; and the summaries kept."""
    settings = Settings(
        discord_token=SecretStr("bench"),
        database_url=f"sqlite:///{folder / 'parley.db'}",
        llm_base_url="http://127.0.0.1:9/v1",
        conversation_timeout_seconds=120,
    )
    async with open_resources(settings) as resources:
        return await _ended_conversations(count, build_client(settings, resources))


async def _ended_conversations(count: int, client: Parley) -> tuple[int, int, int, int]:
    client.summarizer = Summarizer(Agent(FunctionModel(lambda messages, info: ModelResponse([TextPart("summary")]))))
    await client.take_up_archive()  # setup_hook's first step: the conversations' listeners among it
    start = datetime(2026, 1, 1, tzinfo=UTC)
    client.manager.clock = lambda: start
    try:
        # One summary first: pydantic-ai builds its run machinery once per process, which is not the conversations'.
        await client.summarizer.summarize([ModelRequest(parts=[UserPromptPart("warm up")])], 0)
        before = resident_bytes()
        for channel in range(count):
            channel_id = FIRST_CHANNEL + channel
            client.manager.start(channel_id)
            for number in range(20):
                message_id = (channel_id << 8) + number
                record = MessageRecord(message_id, channel_id, 1000 + number % 4, "member", f"message {number}", start)
                client.manager.record_message(channel_id, record)
            history: list[ModelMessage] = [
                ModelRequest(parts=[UserPromptPart("the question " * 20)]),
                ModelResponse(parts=[TextPart("the answer " * 20)]),
            ]
            client.manager.record_bot_response(channel_id, history, answered_id=message_id)
        await client.archive.flush()
        live = resident_bytes()
        client.manager.clock = lambda: start + timedelta(hours=1)
        client.manager.evict_expired()
        while client.background:
            await client.background.wait()
        await client.archive.flush()
        ended = resident_bytes()
        assert isinstance(client.archive, StoreTables)  # a backend: its tables, beyond what the interface shows
        summaries = await client.archive.read("SELECT count(*) FROM conversation_summaries", ())
        return before, live, ended, summaries[0][0]
    finally:
        await client.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--channels", type=int, default=200)
    parser.add_argument("--members", type=int, default=5_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--ended", type=int, default=10_000, help="conversations that end, for the memory figure")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
