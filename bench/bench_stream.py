"""Benchmark streamed answers: how soon a member sees text, and the whole answer, streamed and not.

    python bench/bench_stream.py [--answers 5] [--tokens 300] [--rate 50]

bot.py's client runs in this process against the local fake Discord and a fake model server that
writes a `--tokens`-word answer (a word a token, a token a chunk) at `--rate` tokens a second. Each
answer is an @mention; for each, the figures are measured from the model's first token leaving the
model server, on the event loop's clock that both fakes share with the bot:

- first text: the answer's first post reaching Discord;
- full answer: the moment every post shows its final text (for a streamed answer, its last content
  edit; the edit that then takes the Stop button off changes no text);
- edits: how many message edits the answer took.

Each mode (STREAM_ANSWERS=true, then false) starts a fresh bot and answers `--answers` questions;
the medians are printed. The target: streamed, first text within 1.5 s of the model's first token.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

import discord  # noqa: E402

from discord_io import split_message  # noqa: E402
from tests.fakes.fake_discord import ALICE_ID, BOT_ID, CHANNEL_ID, FakeDiscord  # noqa: E402
from tests.fakes.fake_llm import FakeLLM, allow_model_requests  # noqa: E402
from tests.support.e2e_support import RunningBot, say  # noqa: E402

WORDS = "the answer keeps going with a few more words about what was asked".split()


def answer_text(tokens: int) -> str:
    """`tokens` words in sentences of twelve."""
    words = [WORDS[index % len(WORDS)] for index in range(tokens)]
    sentences = [" ".join(words[start : start + 12]).capitalize() + "." for start in range(0, tokens, 12)]
    return " ".join(sentences)


@dataclass(frozen=True)
class Timing:
    first_text: float
    full_answer: float
    edits: int


def timing(fake: FakeDiscord, first_token: float, final: list[str], posts_before: int, edits_before: int) -> Timing:
    """When the answer's first post arrived, and when all its posts first showed `final`, after `first_token`."""
    posts = fake.posts_in(CHANNEL_ID)[posts_before:]
    edits = fake.edits_in(CHANNEL_ID)[edits_before:]
    shown: dict[int, str] = {}
    events = sorted(
        [(post.at, int(post.message["id"]), post.body.get("content") or "") for post in posts]
        + [(edit.at, edit.message_id, edit.body.get("content") or "") for edit in edits]
    )
    full = events[-1][0]
    for at, message_id, content in events:
        shown[message_id] = content
        if list(shown.values()) == final:
            full = at
            break
    return Timing(posts[0].at - first_token, full - first_token, len(edits))


async def measure(streamed: bool, answers: int, tokens: int, rate: float) -> list[Timing]:
    text = answer_text(tokens)
    final = split_message(text)
    saved = discord.http.Route.BASE, discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY
    timings: list[Timing] = []
    with tempfile.TemporaryDirectory() as folder, allow_model_requests():
        async with (
            FakeDiscord() as fake,
            FakeLLM(lambda request: text, stream_delay=1 / rate, words_per_chunk=1) as llm,
        ):
            bot = RunningBot(fake, llm, Path(folder))
            await bot.start(stream_answers=streamed, member_answers_per_hour=0)
            try:
                for number in range(answers):
                    posts_before, edits_before = len(fake.posts_in(CHANNEL_ID)), len(fake.edits_in(CHANNEL_ID))
                    await say(fake, ALICE_ID, f"<@{BOT_ID}> question {number}?")

                    def done(before: int = posts_before) -> bool:
                        shown = [post.content for post in fake.posts_in(CHANNEL_ID)[before:]]
                        return shown == final and not any(m["components"] for m in fake.bot_messages(CHANNEL_ID))

                    await fake.wait_for(done, timeout=60, what="the whole answer")
                    timings.append(timing(fake, llm.first_tokens[-1], final, posts_before, edits_before))
            finally:
                await bot.stop()
    discord.http.Route.BASE, discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = saved
    return timings


def report(name: str, timings: list[Timing]) -> None:
    first = statistics.median(t.first_text for t in timings)
    full = statistics.median(t.full_answer for t in timings)
    edits = statistics.median(t.edits for t in timings)
    print(
        f"{name}: first text {first:.2f} s, full answer {full:.2f} s after the first token; {edits:g} edits an answer"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--answers", type=int, default=5, help="answers per mode (default 5)")
    parser.add_argument("--tokens", type=int, default=300, help="tokens (words) an answer (default 300)")
    parser.add_argument("--rate", type=float, default=50, help="tokens a second the model writes (default 50)")
    args = parser.parse_args()
    print(f"{args.answers} answers of {args.tokens} tokens at {args.rate:g} tokens/s, medians:")
    streamed = await measure(True, args.answers, args.tokens, args.rate)
    report("streamed", streamed)
    whole = await measure(False, args.answers, args.tokens, args.rate)
    report("not streamed", whole)
    first = statistics.median(t.first_text for t in streamed)
    print(f"first text within 1.5 s of the model's first token: {'yes' if first <= 1.5 else 'NO'} ({first:.2f} s)")


if __name__ == "__main__":
    asyncio.run(main())
