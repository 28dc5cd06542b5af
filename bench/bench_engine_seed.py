"""Benchmark Parley's engine against the seed's: HAL-9000's ConversationManager and ResponseDecider, the implementation
the design document Parley grew from was written for (github.com/jonbwhite/HAL-9000, `conversation.py`).

    python bench/bench_engine_seed.py [--seed-git DIR] [--seed-commit REV] [--messages 300000] [--pairs 7]

The seed's code is not part of Parley: it is read at run time from a git clone of it (`--seed-git`, a bare one will
do), written to a temporary folder and imported from there. Each side runs in a process of its own (the two
implementations share module names: `conversation`, `tools`, `config`), in turn, A B A B ..., over the same messages
(bench_engine.py's `message_stream`), each built up front in the form its engine takes (Parley's `MessageRecord`s; the
seed's `MessageData` and a `discord.Message`-like object, as its `on_message` has them), so only record-and-decide is
timed:

- Parley: bench_engine.py's `process`, bot.py's per-message path (record; on a trigger, start; decide, the learned
  follow-up tier included; the bot's reply recorded after each answer);
- the seed: its `on_message` without Discord or the model (get the channel's conversation; in one, record the message
  and `should_respond`; else `should_start_conversation`, and `start` on a trigger; `record_bot_response` after each
  answer). Its clock (`datetime.now`) is the same simulated one as Parley's, a message a millisecond, so its
  conversations time out as Parley's do.

Each pair's ratio is the seed's time over Parley's (above 1: Parley is faster); the median of the pairs is the figure,
with the quartiles, as the machine is shared and a pair's two runs see the same neighbours.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib
import json
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SEED_GIT = Path("/work/.mirror/jonbwhite+HAL-9000/repo")
# The seed's modules its conversation.py needs (tools.py imports utils and config).
SEED_FILES = ("conversation.py", "tools.py", "utils.py", "config.py")


def parley_rate(count: int, channels: int) -> tuple[float, int]:
    """Messages per second through Parley's engine, and how many it answered."""
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "bench"))
    from bench_engine import SimulatedClock, build_engine, message_stream, process

    messages = list(message_stream(count, channels))
    gc.collect()
    gc.freeze()
    clock = SimulatedClock()
    manager, decider = build_engine(clock)
    began = time.perf_counter()
    answered = asyncio.run(process(messages, manager, decider, clock))
    return count / (time.perf_counter() - began), answered


def seed_rate(count: int, channels: int, seed_dir: Path) -> tuple[float, int]:
    """Messages per second through the seed's engine, and how many it answered."""
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "bench"))
    from bench_engine import BOT_ID, START, message_stream

    stream = [
        (m.channel_id, m.author_id, m.author, m.content, m.timestamp, sorted(m.mention_ids))
        for m in message_stream(count, channels)
    ]
    # Parley's modules go before the seed's are imported: they share names.
    site = str(Path(sys.prefix).resolve())
    for name, module in list(sys.modules.items()):
        where = str(getattr(module, "__file__", "") or "")
        if where.startswith(str(ROOT)) and not where.startswith(site):
            del sys.modules[name]
    sys.path[:2] = [str(seed_dir)]
    seed: Any = importlib.import_module("conversation")  # the seed's, from seed_dir
    message_data: Any = importlib.import_module("tools").MessageData

    class SeedClock(datetime):
        """The seed reads `datetime.now(timezone.utc)`; here it is the simulated time, as Parley's clock is."""

        current = START

        @classmethod
        def now(cls, tz: Any = None) -> datetime:  # type: ignore[override]
            return cls.current

    seed.datetime = SeedClock
    inputs = [
        (
            channel,
            timestamp,
            message_data(author=author, author_id=author_id, content=content, timestamp=timestamp, is_bot=False),
            SimpleNamespace(mentions=[SimpleNamespace(id=user) for user in mentions], reference=None, content=content),
        )
        for channel, author_id, author, content, timestamp, mentions in stream
    ]
    gc.collect()
    gc.freeze()
    manager, decider = seed.ConversationManager(timeout_seconds=120), seed.ResponseDecider(followup_window_seconds=60)
    get, record, start, answered_by = (
        manager.get,
        manager.record_message,
        manager.start,
        manager.record_bot_response,
    )
    should_respond, should_start = decider.should_respond, decider.should_start_conversation
    answered = 0
    began = time.perf_counter()
    for channel, timestamp, data, message in inputs:
        SeedClock.current = timestamp
        conversation = get(channel)
        if conversation:
            record(channel, data)
            respond = should_respond(message, conversation, BOT_ID)[0]
        else:
            respond = should_start(message, BOT_ID)[0]
            if respond:
                conversation = start(channel, [data])
        if respond:
            answered += 1
            answered_by(channel, list(conversation.llm_history))  # its history and the answer's new messages
    return count / (time.perf_counter() - began), answered


def export_seed(seed_git: Path, commit: str, into: Path) -> str:
    """Write the seed's files at `commit` into `into`; the commit's full hash."""
    if not (seed_git / "HEAD").exists() and not (seed_git / ".git").exists():
        sys.exit(
            f"bench_engine_seed: no git clone of the seed at {seed_git}: clone https://github.com/jonbwhite/HAL-9000"
            " and pass it as --seed-git"
        )
    full = subprocess.run(
        ["git", "-C", str(seed_git), "rev-parse", commit], check=True, capture_output=True, text=True
    ).stdout.strip()
    for name in SEED_FILES:
        shown = subprocess.run(["git", "-C", str(seed_git), "show", f"{full}:{name}"], capture_output=True, text=True)
        if shown.returncode == 0:
            (into / name).write_text(shown.stdout)
    return full


def run_side(side: str, args: argparse.Namespace, seed_dir: Path) -> dict[str, float]:
    command = [
        sys.executable,
        __file__,
        "--side",
        side,
        "--messages",
        str(args.messages),
        "--channels",
        str(args.channels),
    ]
    command += ["--seed-dir", str(seed_dir)]
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed-git", type=Path, default=SEED_GIT)
    parser.add_argument("--seed-commit", default="HEAD")
    parser.add_argument("--messages", type=int, default=300_000)
    parser.add_argument("--channels", type=int, default=10_000)
    parser.add_argument("--pairs", type=int, default=7)
    parser.add_argument("--side", choices=("parley", "seed"), help=argparse.SUPPRESS)
    parser.add_argument("--seed-dir", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.side == "parley":
        rate, answered = parley_rate(args.messages, args.channels)
        print(json.dumps({"rate": rate, "answered": answered}))
        return
    if args.side == "seed":
        rate, answered = seed_rate(args.messages, args.channels, args.seed_dir)
        print(json.dumps({"rate": rate, "answered": answered}))
        return

    with tempfile.TemporaryDirectory() as folder:
        seed_dir = Path(folder)
        commit = export_seed(args.seed_git, args.seed_commit, seed_dir)
        print(f"seed: HAL-9000 {commit[:12]}; {args.messages:,} messages across {args.channels:,} channels")
        ratios, parley, seed = [], [], []
        for _ in range(args.pairs):
            ours, theirs = run_side("parley", args, seed_dir), run_side("seed", args, seed_dir)
            parley.append(ours["rate"])
            seed.append(theirs["rate"])
            ratios.append(ours["rate"] / theirs["rate"])
            print(
                f"  Parley {ours['rate']:,.0f}/s ({ours['answered']:,.0f} answered),"
                f" seed {theirs['rate']:,.0f}/s ({theirs['answered']:,.0f} answered): {ratios[-1]:.3f}"
            )
    quartiles = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else [ratios[0]] * 3
    print(
        f"Parley / seed record-and-decide rate: median {statistics.median(ratios):.3f} over {len(ratios)} pairs"
        f" (quartiles {quartiles[0]:.3f}-{quartiles[2]:.3f}); medians {statistics.median(parley):,.0f}/s vs"
        f" {statistics.median(seed):,.0f}/s"
    )


if __name__ == "__main__":
    main()
