"""Measure what `UntransformedOpenAI` (providers/openai_transport.py) saves: the openai SDK's request transform,
at 20 turns of history.

    python bench/bench_transform.py [--turns 20] [--requests 200] [--runs 5]

Two agents with Parley's responder setup (its instructions and tools) against the local fake model
server, each continuing the same 20-turn history (questions of ~40 words, answers of ~60): one on
the stock `AsyncOpenAI` client, one on `UntransformedOpenAI`, both on the same aiohttp transport.
The figure is the time from `agent.run` to the request reaching the server, median of `--requests`,
taken alternately so the machine's load falls on both alike; the best of `--runs` runs.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from openai import AsyncOpenAI, DefaultAioHttpClient  # noqa: E402
from pydantic import SecretStr  # noqa: E402
from pydantic_ai import Agent, ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart  # noqa: E402
from pydantic_ai.models.openai import OpenAIChatModel  # noqa: E402
from pydantic_ai.providers.openai_compatible import OpenAICompatibleProvider  # noqa: E402

from agent import build_responder  # noqa: E402
from config import Settings  # noqa: E402
from providers.openai_transport import UntransformedOpenAI  # noqa: E402
from tests.fakes.fake_llm import MODEL_NAME, FakeLLM  # noqa: E402
from tools import ChatDeps  # noqa: E402

WORDS = "deploy build cache server branch commit release docker image volume the a of to and in is it".split()


def history(turns: int) -> list[ModelMessage]:
    rng = random.Random(20)

    def words(count: int) -> str:
        return " ".join(rng.choice(WORDS) for _ in range(count))

    messages: list[ModelMessage] = []
    for _ in range(turns):
        messages.append(ModelRequest(parts=[UserPromptPart(words(40))]))
        messages.append(ModelResponse(parts=[TextPart(words(60))]))
    return messages


def agent_on(client: AsyncOpenAI, settings: Settings) -> Agent[ChatDeps, str]:
    provider = OpenAICompatibleProvider("llm-server", openai_client=client)
    return build_responder(settings, model=OpenAIChatModel(MODEL_NAME, provider=provider), archive_enabled=True).agent


async def measure(turns: int, requests: int) -> dict[str, float]:
    settings = Settings(_env_file=None, discord_token=SecretStr("x"), llm_model=MODEL_NAME, database_url="")
    past = history(turns)
    deps = ChatDeps(
        bot_name="Parley",
        bot_user_id=1,
        guild_id=2,
        guild_name="s",
        channel_id=3,
        channel_name="c",
        archive=None,
        requester_id=4,
        requester_can_read_history=True,
    )
    samples: dict[str, list[float]] = {"stock AsyncOpenAI": [], "UntransformedOpenAI": []}
    async with FakeLLM(lambda request: "Sure.") as llm:
        clients = {
            "stock AsyncOpenAI": AsyncOpenAI(base_url=llm.base_url, api_key="x", http_client=DefaultAioHttpClient()),
            "UntransformedOpenAI": UntransformedOpenAI(
                base_url=llm.base_url, api_key="x", http_client=DefaultAioHttpClient()
            ),
        }
        agents = {name: agent_on(client, settings) for name, client in clients.items()}
        for index in range(requests):
            for name, agent in agents.items():
                started = time.monotonic()
                await agent.run(f"question {index}", message_history=past, deps=deps)
                samples[name].append(llm.arrivals[-1] - started)
        for client in clients.values():
            await client.close()
    return {name: statistics.median(values) * 1000 for name, values in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=20, help="turns of history each request carries")
    parser.add_argument("--requests", type=int, default=200, help="requests per client and run")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    runs = []
    for number in range(1, args.runs + 1):
        medians = asyncio.run(measure(args.turns, args.requests))
        runs.append(medians)
        stock, untransformed = medians["stock AsyncOpenAI"], medians["UntransformedOpenAI"]
        print(
            f"run {number}: stock AsyncOpenAI {stock:.2f} ms, UntransformedOpenAI {untransformed:.2f} ms:"
            f" saves {stock - untransformed:.2f} ms ({1 - untransformed / stock:.0%})",
            flush=True,
        )
    best = min(runs, key=lambda medians: medians["UntransformedOpenAI"])
    saved = best["stock AsyncOpenAI"] - best["UntransformedOpenAI"]
    print(
        f"best of {len(runs)}, {args.turns} turns of history: agent.run -> request at the server, median"
        f" {best['stock AsyncOpenAI']:.2f} ms stock, {best['UntransformedOpenAI']:.2f} ms untransformed;"
        f" saved {saved:.2f} ms a request"
    )


if __name__ == "__main__":
    main()
