"""Benchmark a catch-up of a long range: model tokens and wall time per 1,000 messages, within the token budget.

Usage: python bench/bench_catchup.py [--messages N] [--budget TOKENS]

A SQLite archive under a temporary folder gets `--messages` messages of one channel (lengths like a busy chat's:
mostly short, some long); the range after the first is read as `/parley catchup` reads it and summarised with the
catch-up writer on pydantic-ai's FunctionModel (instant, its tokens counted as pydantic-ai counts a request's words),
twice: once with `--budget` tokens (CATCHUP_TOKEN_BUDGET's default unless given), once unbounded. Then the same
range again, whose chunks are all reused. Printed: messages summarised and left out, chunks, model tokens per 1,000
messages, the wall time of reading and of summarising per 1,000 messages.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import re
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RunUsage

from archive import ArchivedMessage
from archive.backends import open_archive
from catchup.reading import Since, read_range
from catchup.writing import CatchUpWriter, Summary, build_catchup_agent
from config import Settings

CHANNEL, GUILD, MEMBER = 1, 10, 100
START = datetime(2026, 11, 1, tzinfo=UTC)
WORDS = "deploy staging build tests failing merge review lunch logs release rollback fix config docs ticket".split()


def point_per_ten(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """A model that makes a point of every tenth message it is shown, instantly."""
    prompt = str(messages[-1].parts[-1].content)  # type: ignore[union-attr]
    lines = [int(found) for found in re.findall(r"^\[(\d+)\]", prompt, re.MULTILINE)]
    points = [{"topic": "Work", "summary": "Someone said something.", "line": line} for line in lines[::10]]
    return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, {"points": points})])


def chat(count: int) -> list[ArchivedMessage]:
    """`count` messages, a second apart: most of a few words, one in ten a paragraph."""
    chosen = random.Random(7)
    messages = [
        ArchivedMessage(1, GUILD, CHANNEL, MEMBER, "alice", "off for the day", START, is_bot=False),
    ]
    for number in range(2, count + 2):
        words = chosen.randint(40, 90) if number % 10 == 0 else chosen.randint(3, 14)
        text = " ".join(chosen.choice(WORDS) for _ in range(words))
        author = 200 + number % 7
        when = START + timedelta(seconds=number)
        messages.append(ArchivedMessage(number, GUILD, CHANNEL, author, f"member{author}", text, when, is_bot=False))
    return messages


async def summarise(writer: CatchUpWriter, messages: list[ArchivedMessage], budget: int) -> tuple[float, int, Summary]:
    tokens = 0

    def count(usage: RunUsage) -> None:
        nonlocal tokens
        tokens += usage.total_tokens

    async def progress(done: int, total: int) -> None:
        pass

    async def admitted() -> bool:
        return True

    started = time.perf_counter()
    summary = await writer.summarise(
        messages, budget_tokens=budget, on_usage=count, progress=progress, admitted=admitted
    )
    return time.perf_counter() - started, tokens, summary


async def bench(count: int, budget: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        archive = await open_archive(f"sqlite:///{Path(folder) / 'parley.db'}", retention_days=0)
        try:
            for message in chat(count):
                archive.add(message)
            await archive.flush()
            started = time.perf_counter()
            found = await read_range(
                archive, CHANNEL, Since(0, "", own_last=True), member_id=MEMBER, forgotten_after=None
            )
            read_seconds = time.perf_counter() - started
        finally:
            await archive.close()
    per_thousand = 1000 / len(found.messages)
    print(
        f"range: {len(found.messages):,} messages read in {read_seconds * 1000:.0f} ms"
        f" ({read_seconds * 1000 * per_thousand:.1f} ms per 1,000)"
    )
    for label, limit in ((f"budget {budget:,} tokens", budget), ("no budget", 10**9)):
        writer = CatchUpWriter(build_catchup_agent(FunctionModel(point_per_ten)))
        seconds, tokens, summary = await summarise(writer, found.messages, limit)
        summarised = len(found.messages) - summary.left_out
        print(
            f"{label}: {summarised:,} messages summarised, {summary.left_out:,} left out,"
            f" {summary.chunks} chunks, {tokens:,} model tokens"
            f" ({tokens * 1000 / max(summarised, 1):,.0f} per 1,000 messages),"
            f" {seconds * 1000 / max(summarised, 1) * 1000:.0f} ms per 1,000 messages"
        )
        again_seconds, again_tokens, again = await summarise(writer, found.messages, limit)
        print(
            f"{label}, the same range again: {again.reused} of {again.chunks} chunks reused,"
            f" {again_tokens:,} model tokens, {again_seconds * 1000:.0f} ms"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--budget", type=int, default=int(Settings.model_fields["catchup_token_budget"].default))
    args = parser.parse_args()
    asyncio.run(bench(args.messages, args.budget))


if __name__ == "__main__":
    main()
