"""Benchmark Parley's own latency around an instant model, with the real discord.py client.

    python bench/bench_bot.py [--messages 200]

bot.py's client runs against the local fake Discord and fake model server from tests/, all in one
event loop, so every timestamp comes from the same clock. Two figures per answered message:

- inbound: from the fake gateway sending MESSAGE_CREATE to the model request reaching the model
  server (parsing, recording, deciding, building the prompt, pydantic-ai, the HTTP client);
- outbound: from the model server returning its answer to the post reaching Discord's REST route
  (the HTTP response, pydantic-ai, splitting, discord.py's request).

Messages are @mentions in conversations of `--turns` answers each (then the conversation is ended,
as by expiry); the first message of each conversation, which also loads the channel's context, is
reported apart. The model history grows with every turn, and so does the cost of serialising it
(mostly the openai SDK's request transform): `--turns` shows that growth. The archive is on, as in
production.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from fake_discord import ALICE_ID, BOT_ID, CHANNEL_ID, DEFAULT_TOKEN, FakeDiscord  # noqa: E402
from fake_llm import MODEL_NAME, FakeLLM, allow_model_requests  # noqa: E402

from bot import build_client, point_at_discord, run  # noqa: E402
from config import Settings  # noqa: E402


async def measure(count: int, turns: int, database: Path) -> tuple[list[float], list[float], list[int]]:
    loop = asyncio.get_running_loop()
    answered_at: list[float] = []
    requested_at: list[float] = []

    def instant_model(request: dict) -> str:
        now = loop.time()
        requested_at.append(now)
        answered_at.append(now)
        return "Sure."

    inbound: list[float] = []
    outbound: list[float] = []
    turn_numbers: list[int] = []
    async with FakeDiscord() as fake, FakeLLM(instant_model) as llm:
        settings = Settings(
            _env_file=None,
            discord_token=DEFAULT_TOKEN,
            llm_model=MODEL_NAME,
            llm_base_url=llm.base_url,
            database_url=f"sqlite:///{database}",
            discord_api_base_url=fake.api_base_url,
            discord_gateway_url=fake.gateway_url,
            log_level="WARNING",
        )
        point_at_discord(settings)
        client = build_client(settings, guild_ready_timeout=0.05)
        bot = asyncio.create_task(run(client, DEFAULT_TOKEN))
        await fake.wait_for_ready()
        await client.wait_until_ready()
        for index in range(count):
            turn = index % turns
            if turn == 0:
                client.manager.end(CHANNEL_ID)
            sent = loop.time()
            await fake.send_user_message(CHANNEL_ID, ALICE_ID, f"<@{BOT_ID}> question {index}")
            [*_, post] = await fake.wait_for_posts(index + 1)
            inbound.append(requested_at[index] - sent)
            outbound.append(post.at - answered_at[index])
            turn_numbers.append(turn)
        await client.close()
        await bot
    return inbound, outbound, turn_numbers


def describe(name: str, samples: list[float]) -> str:
    ms = sorted(sample * 1000 for sample in samples)
    p95 = ms[max(0, round(0.95 * len(ms)) - 1)]
    return f"{name}: median {statistics.median(ms):.2f} ms, p95 {p95:.2f} ms, max {ms[-1]:.2f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200)
    parser.add_argument("--turns", type=int, default=10, help="answers per conversation")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder, allow_model_requests():
        inbound, outbound, turns = asyncio.run(measure(args.messages, args.turns, Path(folder) / "parley.db"))
    starts = [i for i, turn in enumerate(turns) if turn == 0]
    rest = [i for i, turn in enumerate(turns) if turn != 0]
    print(f"answered messages: {args.messages}, in conversations of {args.turns} answers")
    print(describe("first of a conversation, inbound (loads context)", [inbound[i] for i in starts]))
    print(describe("inbound  (gateway event -> model request)", [inbound[i] for i in rest]))
    print(describe("outbound (model answer -> post at Discord)", [outbound[i] for i in rest]))


if __name__ == "__main__":
    main()
