"""Benchmark what each answer costs in input tokens, and how much of it a provider's prompt cache can serve.

    python bench/bench_cost.py [--turns 200] [--judge] [--no-summaries] [--budget 12000]

`python bot.py` runs as its own process (as in production, with the archive on) against the local
fake Discord and the fake model server from tests/, which records every request. One conversation
of `--turns` answers: alice @mentions Parley with ~40 words, it answers with ~60, and bob and carol
chat among themselves in between (recorded in the conversation, not answered). With `--judge`
(USE_LLM_JUDGE=true, no judge budget) their chatter goes to the judge, which says no.

For turns 1, 10, 50, 100 and 200 it prints the answer request's input tokens and its cacheable
share: how much of it is a byte-identical prefix of the previous answer request (the part a
provider's prefix cache can serve). A request is rendered as a provider builds its prompt: the tool
definitions, then the messages in order, each as JSON. Tokens are estimated as characters / 4 (the
fake server's own count is words, which no provider uses): the message texts and tool-call
arguments, plus 4 a message, and the tool definitions' JSON. Then the median cacheable share over
turns 20 to the end, and whether each request stayed within HISTORY_TOKEN_BUDGET + its new prompt +
its instructions and tools. Judge and summary requests are counted apart.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import statistics
import sys
import tempfile
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from tests.fakes.fake_discord import ALICE_ID, BOB_ID, BOT_ID, CAROL_ID, CHANNEL_ID, FakeDiscord  # noqa: E402
from tests.fakes.fake_llm import FakeLLM, Reply, ToolCall, message_text  # noqa: E402
from tests.support.e2e_support import bot_environment  # noqa: E402

REPORTED_TURNS = (1, 10, 50, 100, 200)
STEADY_FROM_TURN = 20
CHARS_PER_TOKEN = 4
MESSAGE_OVERHEAD_TOKENS = 4
WORDS = (
    "deploy build cache server branch commit release docker image volume backup python config token test "
    "staging merge review latency queue worker cluster log metric alert restart migration schema index "
    "rollback script channel thread question answer friday monday tonight again maybe really quite small "
    "large fast slow broken fixed works fails the a of to and in is it that for on with as was we you"
).split()


def words(rng: random.Random, count: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(count))


def system_text(request: dict[str, Any]) -> str:
    return "\n".join(message_text(m) for m in request["messages"] if m["role"] in ("system", "developer"))


def kind_of(request: dict[str, Any]) -> str:
    system = system_text(request)
    if system.startswith("You take part in a Discord group chat"):
        return "answer"
    if system.startswith("You decide whether"):
        return "judge"
    if system.startswith("You summarise"):
        return "summary"
    return "other"


def model_reply(rng: random.Random) -> Any:
    def reply(request: dict[str, Any]) -> Reply:
        kind = kind_of(request)
        if kind == "judge":
            return ToolCall("final_result", {"respond": False, "confidence": 0.9, "reason": "people chatting"})
        if kind == "summary":
            return words(rng, 150)
        return words(rng, 60)

    return reply


def rendered(request: dict[str, Any]) -> str:
    """The request as a provider lays out its prompt: tool definitions first, then each message in order."""
    parts = [json.dumps(tool, separators=(",", ":")) for tool in request.get("tools", [])]
    parts += [json.dumps(message, separators=(",", ":")) for message in request["messages"]]
    return "\n".join(parts)


def message_tokens(message: dict[str, Any]) -> int:
    calls = "".join(c["function"]["name"] + c["function"]["arguments"] for c in message.get("tool_calls") or [])
    return MESSAGE_OVERHEAD_TOKENS + (len(message_text(message)) + len(calls)) // CHARS_PER_TOKEN


@dataclass(frozen=True)
class Measured:
    """One answer request: its input tokens, the parts they come from, and its cacheable share."""

    tokens: int
    fixed_tokens: int  # instructions and tool definitions
    prompt_tokens: int  # the new user prompt
    history_tokens: int  # everything between
    cacheable: float


def measure_requests(requests: list[dict[str, Any]]) -> list[Measured]:
    measured: list[Measured] = []
    previous = ""
    for request in requests:
        messages = request["messages"]
        fixed = sum(message_tokens(m) for m in messages if m["role"] in ("system", "developer"))
        fixed += len(json.dumps(request.get("tools", []))) // CHARS_PER_TOKEN
        prompt = message_tokens(messages[-1])
        history = sum(message_tokens(m) for m in messages[:-1] if m["role"] not in ("system", "developer"))
        text = rendered(request)
        shared = common_prefix(previous, text)
        measured.append(Measured(fixed + prompt + history, fixed, prompt, history, shared / len(text)))
        previous = text
    return measured


def common_prefix(a: str, b: str) -> int:
    limit = min(len(a), len(b))
    low, high = 0, limit
    while low < high:  # binary search on prefix equality: the strings are long
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


async def start_bot(
    fake: FakeDiscord, llm: FakeLLM, database: Path, log: IO[str], source: Path = ROOT, **extra: str
) -> Any:
    env = bot_environment(fake, llm, database, LOG_LEVEL="WARNING", MEMBER_ANSWERS_PER_HOUR="0", **extra)
    return await asyncio.create_subprocess_exec(
        sys.executable, str(source / "bot.py"), env=env, cwd=database.parent, stderr=log
    )


async def converse(
    turns: int, folder: Path, *, judge: bool, summaries: bool, budget: int, source: Path = ROOT
) -> list[dict[str, Any]]:
    """Run the conversation through `python bot.py` (from `source`: this checkout, or an earlier one for a
    comparison); every request the fake model server received, in order."""
    rng = random.Random(14)
    extra = {
        "USE_LLM_JUDGE": str(judge).lower(),
        "JUDGE_CALLS_PER_MINUTE": "0",
        "SUMMARIZE_HISTORY": str(summaries).lower(),
        "HISTORY_TOKEN_BUDGET": str(budget),
        "CONVERSATION_TIMEOUT_SECONDS": "3600",
    }
    log_path = folder / "bot.log"
    async with FakeDiscord() as fake, FakeLLM(model_reply(rng)) as llm:
        with log_path.open("w") as log:
            bot = await start_bot(fake, llm, folder / "parley.db", log, source, **extra)
        try:
            await fake.wait_for_ready(timeout=120)  # python bot.py starts slowly on a loaded machine
            await asyncio.sleep(2.5)  # past discord.py's guild_ready_timeout (2 s): on_ready has run
            for turn in range(turns):
                await fake.send_user_message(CHANNEL_ID, ALICE_ID, f"<@{BOT_ID}> {words(rng, 40)}?")
                await fake.wait_for_posts(turn + 1, timeout=30)
                await asyncio.sleep(0.05)  # the answer's own MESSAGE_CREATE reaches the bot: it has spoken
                judged = sum(kind_of(r) == "judge" for r in llm.requests)
                chatter = [(BOB_ID, 25), (CAROL_ID, 15)] if turn % 3 == 0 else [(BOB_ID, 20)]
                for author, count in chatter:
                    await fake.send_user_message(CHANNEL_ID, author, words(rng, count))
                if judge:
                    # Bob's first message after the answer goes to the judge; wait for it before the next question.
                    with contextlib.suppress(TimeoutError):
                        await fake.wait_for(partial(judged_more_than, llm, judged), 5)
            await asyncio.sleep(1)  # a summary under way finishes
        except Exception:
            print("the bot's console, last lines:\n" + "".join(log_path.read_text().splitlines(True)[-20:]))
            raise
        finally:
            bot.terminate()
            await bot.wait()
    return list(llm.requests)


def judged_more_than(llm: FakeLLM, count: int) -> bool:
    return sum(kind_of(r) == "judge" for r in llm.requests) > count


def report(title: str, requests: list[dict[str, Any]], budget: int) -> float:
    answers = measure_requests([r for r in requests if kind_of(r) == "answer"])
    print(f"{title}: {len(answers)} answer requests", flush=True)
    for turn in REPORTED_TURNS:
        if turn <= len(answers):
            m = answers[turn - 1]
            print(
                f"  turn {turn:>3}: {m.tokens:>6} input tokens ({m.history_tokens} of history),"
                f" cacheable share {m.cacheable:.2f}"
            )
    steady = [m.cacheable for m in answers[STEADY_FROM_TURN - 1 :]]
    median = statistics.median(steady) if steady else 0.0
    over = [i + 1 for i, m in enumerate(answers) if m.tokens > budget + m.prompt_tokens + m.fixed_tokens]
    print(f"  median cacheable share, turns {STEADY_FROM_TURN}-{len(answers)}: {median:.2f}")
    print(f"  most history in one request: {max(m.history_tokens for m in answers)} tokens (budget {budget})")
    print(
        "  every request within budget + new prompt + instructions and tools"
        if not over
        else f"  over budget + new prompt + instructions at turns {over[:10]}{'...' if len(over) > 10 else ''}"
    )
    for kind in ("judge", "summary"):
        extra = measure_requests([r for r in requests if kind_of(r) == kind])
        if extra:
            shares = [m.cacheable for m in extra[1:]] or [0.0]
            print(
                f"  {kind} requests: {len(extra)}, {statistics.mean(m.tokens for m in extra):.0f} input tokens"
                f" on average, median cacheable share {statistics.median(shares):.2f}"
            )
    return median


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200, help="answers in the conversation")
    parser.add_argument("--budget", type=int, default=12000, help="HISTORY_TOKEN_BUDGET")
    parser.add_argument("--judge", action="store_true", help="also run the conversation with the LLM judge on")
    parser.add_argument("--no-summaries", action="store_true", help="also run it with SUMMARIZE_HISTORY=false")
    args = parser.parse_args()
    scenarios = [("defaults (SUMMARIZE_HISTORY=true)", {"judge": False, "summaries": True})]
    if args.no_summaries:
        scenarios.append(("SUMMARIZE_HISTORY=false (cut only)", {"judge": False, "summaries": False}))
    if args.judge:
        scenarios.append(("USE_LLM_JUDGE=true", {"judge": True, "summaries": True}))
    for title, options in scenarios:
        with tempfile.TemporaryDirectory() as folder:
            conversation = converse(
                args.turns, Path(folder), budget=args.budget, judge=options["judge"], summaries=options["summaries"]
            )
            requests = asyncio.run(conversation)
        report(title, requests, args.budget)


if __name__ == "__main__":
    main()
