"""Benchmark the conversation engine: record-and-decide throughput and memory.

    python bench/bench_engine.py [--messages 1000000] [--channels 10000] [--runs 5]

Throughput: messages per second through the bot's per-message path, as in bot.py's `handle`
(record_message; on a trigger, start; decide_now, awaiting only a judge's call; the bot's reply
recorded after each answer) on one core, over pre-built `MessageRecord`s, with decision logging at
its production default (one INFO record per decision, here with no handler attached below WARNING,
as when the console level is WARNING). The best of several runs is the figure, as `timeit` advises:
on a shared machine a slower run measures the neighbours, not the code; the median and the slowest
are printed too.
Memory: a second pass that builds
messages lazily, so only the engine holds them: the process's resident memory at the start, with
every conversation live, and once every conversation has expired (after `gc` and `malloc_trim`, so
freed pages are really returned).
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import gc
import itertools
import random
import resource
import statistics
import sys
import time
from collections.abc import Coroutine, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from conversation import ConversationManager
from deciding.decider import ResponseDecider
from deciding.followup import SHIPPED_MODEL, load_model
from records import Decision, MessageRecord

BOT_ID = 1
FIRST_USER = 1_000
USERS_PER_CHANNEL = 12
START = datetime(2026, 1, 1, tzinfo=UTC)
WORDS = "the a to is it how do i install ubuntu disk mount why what kernel driver works thanks ok".split()


class SimulatedClock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now


def message_stream(count: int, channels: int, seed: int = 7) -> Iterator[MessageRecord]:
    """People's messages, one a millisecond: mostly chatter, some mentions of the bot or of others,
    some replies. Channel activity follows Zipf's law, as in real servers: a few busy channels,
    a long tail of quiet ones. The bot's own posts are not here: `process` records them after the
    messages it answers, as bot.py does.
    """
    rng = random.Random(seed)
    popularity = list(itertools.accumulate(1 / rank for rank in range(1, channels + 1)))
    step = timedelta(milliseconds=1)
    for index in range(count):
        [channel] = rng.choices(range(channels), cum_weights=popularity)
        author = FIRST_USER + channel * USERS_PER_CHANNEL + rng.randrange(USERS_PER_CHANNEL)
        roll = rng.random()
        mentions: frozenset[int] = frozenset()
        reply_to = None
        if roll < 0.02:
            mentions = frozenset({BOT_ID})
        elif roll < 0.06:
            mentions = frozenset({author + 1})
        elif roll < 0.08:
            reply_to = author + 1
        yield MessageRecord(
            message_id=2 * index,
            channel_id=channel,
            author_id=author,
            author=f"user{author}",
            content=" ".join(rng.choices(WORDS, k=rng.randint(2, 14))) + ("?" if roll > 0.8 else ""),
            timestamp=START + step * index,
            mention_ids=mentions,
            reply_to_author_id=reply_to,
        )


def bot_reply(message: MessageRecord, record_type: type[MessageRecord] = MessageRecord) -> MessageRecord:
    return record_type(
        message_id=message.message_id + 1,
        channel_id=message.channel_id,
        author_id=BOT_ID,
        author="Parley",
        content="Sure.",
        timestamp=message.timestamp,
        is_bot=True,
        reply_to_author_id=message.author_id,
    )


async def process(
    messages,
    manager: ConversationManager,
    decider: ResponseDecider,
    clock: SimulatedClock,
    *,
    decision_type: type[Decision] = Decision,
    record_type: type[MessageRecord] = MessageRecord,
) -> int:
    """The bot's per-message path, as in bot.py's `handle`; returns how many were answered.

    `decision_type` and `record_type` are those of the engine's own version (`bench_engine_ab.py` runs two).
    """
    answered = 0
    start, record, should_start, decide_now = (
        manager.start,
        manager.record_message,
        decider.should_start_conversation,
        decider.decide_now,
    )
    for message in messages:
        clock.now = message.timestamp
        channel_id = message.channel_id
        conversation = record(channel_id, message)
        if conversation is None:
            if not should_start(message, BOT_ID)[0]:
                continue
            conversation = start(channel_id, ())
            record(channel_id, message)
        decision = decide_now(message, conversation, BOT_ID)
        if not isinstance(decision, decision_type):
            # The judge's call (the bench configures no judge); a type held in a variable does not narrow for mypy.
            decision = await cast("Coroutine[Any, Any, Decision]", decision)
        if decision.respond:
            answered += 1
            record(channel_id, bot_reply(message, record_type))
    return answered


def build_engine(clock: SimulatedClock) -> tuple[ConversationManager, ResponseDecider]:
    # The bot's decider as it ships: the learned follow-up tier scores what the follow-up rules decide.
    return ConversationManager(timeout_seconds=120, clock=clock), ResponseDecider(
        followup_window_seconds=60, clock=clock, learned=load_model(SHIPPED_MODEL)
    )


async def throughput(count: int, channels: int, runs: int) -> tuple[list[float], int, int]:
    """Messages per second of `runs` fresh engines over the same messages (a shared machine is noisy)."""
    messages = list(message_stream(count, channels))
    # The pre-built input is not the engine's: keep the collector from rescanning it all run long.
    gc.collect()
    gc.freeze()
    rates = []
    for _ in range(runs):
        clock = SimulatedClock()
        manager, decider = build_engine(clock)
        began = time.perf_counter()
        answered = await process(messages, manager, decider, clock)
        rates.append(count / (time.perf_counter() - began))
    gc.unfreeze()
    return rates, answered, len(manager)


def resident_bytes() -> int:
    """Current resident set size, after returning freed heap pages to the OS."""
    gc.collect()
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    return int(Path("/proc/self/statm").read_text().split()[1]) * resource.getpagesize()


async def memory(count: int, channels: int) -> tuple[int, int, int, int]:
    """Resident memory before, at the peak of and after a run whose messages only the engine holds."""
    clock = SimulatedClock()
    manager, decider = build_engine(clock)
    started = resident_bytes()
    await process(message_stream(count, channels), manager, decider, clock)
    live = len(manager)
    peak = resident_bytes()
    clock.now += timedelta(seconds=121)
    manager.evict_expired()
    after = resident_bytes()
    return started, peak, after, live


def mib(size: int) -> str:
    return f"{size / 2**20:,.1f} MiB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--channels", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=5, help="timed runs; the best is the figure")
    args = parser.parse_args()

    rates, answered, live = asyncio.run(throughput(args.messages, args.channels, args.runs))
    started, peak, after, live_in_memory_pass = asyncio.run(memory(args.messages, args.channels))
    growth = (after - started) / max(started, 1)
    print(f"messages: {args.messages:,} across {args.channels:,} channels (Python {sys.version.split()[0]})")
    print(
        f"record-and-decide: {max(rates):,.0f} messages/s on one core, best of {len(rates)} runs"
        f" (median {statistics.median(rates):,.0f}, slowest {min(rates):,.0f});"
        f" {answered:,} answered, {live:,} live conversations"
    )
    print(f"resident memory at start: {mib(started)}")
    print(f"resident memory with every conversation live: {mib(peak)} ({live_in_memory_pass:,} conversations)")
    print(f"resident memory once every conversation expired: {mib(after)} ({growth:+.1%} vs start)")


if __name__ == "__main__":
    main()
