"""Compare the engine's CPU cost per message with an earlier commit's, both loaded in one process.

    python bench/bench_engine_ab.py [--against e2e9388] [--messages 1000000] [--rounds 6] [--slice 10000]

`bench_engine.py`'s messages (as records of each version's own `MessageRecord`, built alike) go
through `bench_engine.process`'s path (record, decide, record the bot's reply) on a fresh engine of
each version per round, the learned tier on. The two engines take turns a slice of messages at a
time (old then new, then new then old), and each slice's CPU time (`time.process_time`) is noted:
what the machine's neighbours do falls on both alike. Printed: each round's CPU time of the earlier
commit over this worktree's, and the median and quartiles of that ratio over every slice. A slice
of 10,000 keeps each engine's state as warm in the caches as in `bench_engine.py` (2,000 measured
both engines cold, at half the speed). Before timing, both versions decide the first
`--check-messages` with INFO logging captured, and the script says whether their decisions and
log lines are identical.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib
import io
import logging
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

import bench_engine  # noqa: E402

import conversation  # noqa: E402
import deciding.decider as decider  # noqa: E402
import deciding.followup as followup  # noqa: E402
import records  # noqa: E402

# The engine's modules and what they import from this repository: loaded afresh from the earlier commit for the
# old engine. A commit has either attachments.py or, since issue 30 split it, the files/ package; records.py (the
# value types), decider.py (the decider) and channel_conversation.py (a conversation) left conversation.py later;
# since issue 42 the decider, followup.py, channel_conversation.py and quoting.py are in the deciding/ and prompting/
# packages.
ENGINE_MODULES = (
    "conversation",
    "channel_conversation",
    "decider",
    "followup",
    "deciding",
    "attachments",
    "files",
    "limits",
    "quoting",
    "prompting",
    "records",
)


@dataclass(frozen=True)
class Engine:
    """One version of the engine: its modules and the messages built with its own `MessageRecord`.

    `decider` is the module holding its `ResponseDecider` and `Decision` (conversation.py itself, before decider.py).
    """

    name: str
    conversation: ModuleType
    decider: ModuleType
    followup: ModuleType
    model_path: Path
    messages: list[Any]

    def build(self, clock: Callable[[], Any]) -> tuple[Any, Any]:
        """A fresh manager and decider as `bench_engine.build_engine` makes them."""
        model = self.followup.load_model(self.model_path)
        manager = self.conversation.ConversationManager(timeout_seconds=120, clock=clock)
        decider = self.decider.ResponseDecider(followup_window_seconds=60, clock=clock, learned=model)
        return manager, decider


def load_earlier(revision: str, into: Path) -> tuple[ModuleType, ModuleType, ModuleType, Path]:
    """conversation.py and followup.py as they were at `revision`, imported apart from this worktree's."""
    extract_engine(revision, into)
    saved = {name: sys.modules.pop(name) for name in list(sys.modules) if is_engine_module(name)}
    sys.path.insert(0, str(into))
    try:
        old_conversation = __import__("conversation")
        old_decider = engine_module(into, "decider", "deciding.decider") or old_conversation
        old_followup = importlib.import_module("deciding.followup" if (into / "deciding").is_dir() else "followup")
    finally:
        sys.path.remove(str(into))
        for name in [name for name in sys.modules if is_engine_module(name)]:
            sys.modules.pop(name)
        sys.modules.update(saved)
    return old_conversation, old_decider, old_followup, into / "decider_model.json"


def engine_module(into: Path, *names: str) -> ModuleType | None:
    """The first of `names` (a module at the root, then in a package) that `into` holds, imported."""
    for name in names:
        if (into / f"{name.replace('.', '/')}.py").exists():
            return importlib.import_module(name)
    return None


def extract_engine(revision: str, into: Path) -> None:
    """The engine's modules and packages (those `revision` has) and its decider model, written under `into`."""
    listed = subprocess.run(
        ["git", "-C", str(ROOT), "ls-tree", "--name-only", revision], check=True, capture_output=True, text=True
    ).stdout.split()
    wanted = [name for name in listed if name.removesuffix(".py") in ENGINE_MODULES or name == "decider_model.json"]
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", revision, "--", *wanted], check=True, capture_output=True
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")


def is_engine_module(name: str) -> bool:
    return name.partition(".")[0] in ENGINE_MODULES


def converted(messages: Sequence[Any], record_type: type) -> list[Any]:
    """The same messages (the same field values, strings included) as another version's `MessageRecord`s."""
    names = [item.name for item in fields(record_type)]
    return [record_type(**{name: getattr(message, name) for name in names}) for message in messages]


class Run:
    """One engine's pass over its messages, advanced a slice at a time: `bench_engine.process`'s loop."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.clock = bench_engine.SimulatedClock()
        self.manager, self.decider = engine.build(self.clock)
        self.answered = 0
        self.slices: list[float] = []  # CPU seconds of each slice

    @property
    def cpu_seconds(self) -> float:
        return sum(self.slices)

    def advance(self, begin: int, end: int) -> None:
        """Decide messages `begin` to `end`, noting the CPU time it took."""
        began = time.process_time()
        self.answered += self._decide(self.engine.messages[begin:end])
        self.slices.append(time.process_time() - began)

    def _decide(self, messages: list[Any]) -> int:
        engine = self.engine
        return asyncio.run(
            bench_engine.process(
                messages,
                self.manager,
                self.decider,
                self.clock,
                decision_type=engine.decider.Decision,
                record_type=engine.decider.MessageRecord,
            )
        )


class Capture(logging.Handler):
    """Every decision log line, with the fields it carries."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[tuple[Any, ...]] = []

    def emit(self, record: logging.LogRecord) -> None:
        extra = tuple(getattr(record, key, None) for key in ("reason", "tier", "respond", "confidence", "detail"))
        self.lines.append((record.levelno, record.getMessage(), *extra))


def decisions_and_log(engine: Engine) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], int]:
    """Every decision (as `on_decision` sees it) and log line of one pass with INFO logging on; how many answered."""
    log = logging.getLogger("parley.decisions")
    capture = Capture()
    log.addHandler(capture)
    log.setLevel(logging.DEBUG)
    run = Run(engine)
    seen: list[tuple[Any, ...]] = []
    run.decider.on_decision = lambda message, decision: seen.append(
        (message.message_id, decision.respond, decision.reason, decision.tier, decision.confidence, decision.detail)
    )
    try:
        run.advance(0, len(engine.messages))
    finally:
        log.removeHandler(capture)
        log.setLevel(logging.NOTSET)
    return seen, capture.lines, run.answered


def timed_round(old: Engine, new: Engine, slice_size: int) -> tuple[Run, Run]:
    """Both engines over every message, interleaved a slice at a time (old-new, then new-old), fresh engines."""
    runs = (Run(old), Run(new))
    count = len(new.messages)
    gc.collect()
    for index, begin in enumerate(range(0, count, slice_size)):
        for run in runs if index % 2 == 0 else runs[::-1]:
            run.advance(begin, min(begin + slice_size, count))
    return runs


def parse_arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", default="e2e9388", help="the earlier commit (default: the start of session 6)")
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--channels", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=6, help="timed rounds of each version, alternating")
    parser.add_argument("--slice", type=int, default=10_000, help="messages per turn of each engine")
    parser.add_argument("--check-messages", type=int, default=200_000, help="messages compared decision by decision")
    return parser.parse_args()


def compare_decisions(old: Engine, new: Engine, check: int) -> None:
    """Print whether both engines make the same decisions and log the same lines over the first `check` messages."""
    results = [
        decisions_and_log(Engine(e.name, e.conversation, e.decider, e.followup, e.model_path, e.messages[:check]))
        for e in (old, new)
    ]
    same_decisions = results[0][0] == results[1][0]
    same_lines = results[0][1] == results[1][1]
    print(
        f"first {check:,} messages, INFO logging on: {len(results[1][0]):,} decisions, {len(results[1][1]):,}"
        f" log lines, {results[1][2]:,} answered; decisions identical: {same_decisions};"
        f" log lines identical: {same_lines}"
    )


def timed_rounds(old: Engine, new: Engine, args: argparse.Namespace) -> tuple[list[float], list[float]]:
    """The CPU-time ratios (old over new) of each round and of each slice, printing each round."""
    gc.collect()
    gc.freeze()
    ratios = []
    slice_ratios = []
    for index in range(args.rounds):
        old_run, new_run = timed_round(old, new, args.slice)
        ratios.append(old_run.cpu_seconds / new_run.cpu_seconds)
        slice_ratios += [before / after for before, after in zip(old_run.slices, new_run.slices, strict=True)]
        print(
            f"round {index + 1}: {old.name} {old_run.cpu_seconds:.3f} s CPU"
            f" ({args.messages / old_run.cpu_seconds:,.0f} msg/s), this worktree {new_run.cpu_seconds:.3f} s"
            f" ({args.messages / new_run.cpu_seconds:,.0f} msg/s); ratio {ratios[-1]:.3f};"
            f" answered {old_run.answered:,} / {new_run.answered:,},"
            f" live {len(old_run.manager):,} / {len(new_run.manager):,}"
        )
    gc.unfreeze()
    return ratios, slice_ratios


def main() -> None:
    args = parse_arguments()
    with tempfile.TemporaryDirectory() as folder:
        old_conversation, old_decider, old_followup, old_model = load_earlier(args.against, Path(folder))
        messages = list(bench_engine.message_stream(args.messages, args.channels))
        old = Engine(
            args.against,
            old_conversation,
            old_decider,
            old_followup,
            old_model,
            converted(messages, old_conversation.MessageRecord),
        )
        # Both versions get records built the same way, so neither has its messages laid out better in memory.
        new_messages = converted(messages, records.MessageRecord)
        new = Engine("this worktree", conversation, decider, followup, followup.SHIPPED_MODEL, new_messages)
        del messages

        for engine in (old, new):
            assert engine.conversation.__file__ is not None
            print(f"{engine.name}: {engine.conversation.__file__}")
        compare_decisions(old, new, min(args.check_messages, args.messages))
        ratios, slice_ratios = timed_rounds(old, new, args)
    quartiles = statistics.quantiles(slice_ratios, n=4)
    print(
        f"CPU time of {old.name} over this worktree's: {min(ratios):.3f} to {max(ratios):.3f}"
        f" (median {statistics.median(ratios):.3f}) over {args.rounds} rounds"
        f" at {time.strftime('%H:%M UTC', time.gmtime())};"
        f" per slice of {args.slice:,} messages: median {quartiles[1]:.3f}, quartiles {quartiles[0]:.3f} to"
        f" {quartiles[2]:.3f} ({len(slice_ratios):,} slices)"
    )


if __name__ == "__main__":
    main()
