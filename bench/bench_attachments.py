"""Benchmark what screenshots cost a conversation: request bytes, preparation time, and the event loop's stalls.

    python bench/bench_attachments.py [--turns 40] [--every 5] [--side 2560]

A 40-turn conversation in which a member shares a screenshot (a noisy `--side` x 9/16 png, larger
than the providers' limits, so it is downscaled) every `--every` turns, answered by Parley's
responder (pydantic-ai, the openai SDK) against the local fake model server from tests/, run in a
process of its own (so its parsing of large bodies is not counted as Parley's), which records the
size of each request body. Twice: with IMAGE_RETAIN_TURNS at its default (3), and with images kept
for the whole conversation (as if there were no such setting; the token budget still trims the
oldest turns). Printed for each:

- request bytes: the total and the largest JSON body the model server received;
- preparation: median and worst time to turn a turn's attachments into model input (download from
  memory, decode, downscale, re-encode), the reference being the same turn without an attachment;
- event loop: the longest the loop went without running a 1 ms ticker, over the whole run.
  Decoding and resizing run in a worker thread; the loop must never stall more than 20 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import multiprocessing
import random
import statistics
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from PIL import Image  # noqa: E402
from pydantic import SecretStr  # noqa: E402

from agent import build_responder, generate_reply  # noqa: E402
from config import Settings  # noqa: E402
from conversation import ConversationManager  # noqa: E402
from files.preparer import AttachmentPreparer  # noqa: E402
from providers.models import close_model  # noqa: E402
from records import AttachmentInfo, MessageRecord  # noqa: E402
from tests.fakes.fake_llm import MODEL_NAME, FakeLLM, allow_model_requests, echo  # noqa: E402
from tools import ChatDeps  # noqa: E402

CHANNEL_ID, BOT_ID, MEMBER_ID = 10, 1, 2
STALL_LIMIT_MS = 20


@dataclass
class Result:
    request_bytes: list[int]
    prepare_with_image: list[float]
    prepare_without: list[float]
    worst_stall_ms: float
    worst_busy_ms: float


def screenshot(side: int) -> bytes:
    """A png that compresses like a real screenshot with photos in it: noise over flat areas."""
    width, height = side, side * 9 // 16
    rng = random.Random(7)
    image = Image.new("RGB", (width, height), (240, 240, 240))
    patch = Image.frombytes("RGB", (width // 2, height // 2), rng.randbytes(width // 2 * (height // 2) * 3))
    image.paste(patch, (width // 4, height // 4))
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


async def ticker(stalls: list[float], busy: list[float], stop: asyncio.Event) -> None:
    """Wakes every millisecond and records how late each wake-up was (the loop's stalls, in wall time), and the
    CPU time the loop's thread spent in between (its work alone: on a shared machine wall time also counts
    the time other processes, and the worker thread holding the GIL, took the CPU from it)."""
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        before, cpu_before = loop.time(), time.thread_time()
        await asyncio.sleep(0.001)
        stalls.append((loop.time() - before - 0.001) * 1000)
        busy.append((time.thread_time() - cpu_before) * 1000)


def serve_model(port_out: multiprocessing.SimpleQueue[int], sizes_out: multiprocessing.SimpleQueue[list[int]]) -> None:
    """The fake model server, in its own process: answers until told to stop, then sends the body sizes it saw."""

    async def serve() -> None:
        sizes: list[int] = []

        def handler(body: dict[str, object]) -> str:
            if body.get("stop"):
                stop.set()
                return "stopping"
            sizes.append(len(json.dumps(body).encode()))
            return echo(body)

        stop = asyncio.Event()
        async with FakeLLM(handler, max_body_bytes=256 * 2**20) as llm:
            port_out.put(int(llm.base_url.split(":")[2].split("/")[0]))
            await stop.wait()
        sizes_out.put(sizes)

    asyncio.run(serve())


class ModelServer:
    """`serve_model` in a child process."""

    def __init__(self) -> None:
        context = multiprocessing.get_context("spawn")
        self._port: multiprocessing.SimpleQueue[int] = context.SimpleQueue()
        self._sizes: multiprocessing.SimpleQueue[list[int]] = context.SimpleQueue()
        self._process = context.Process(target=serve_model, args=(self._port, self._sizes), daemon=True)
        self._process.start()
        self.base_url = f"http://127.0.0.1:{self._port.get()}/v1"

    async def stop(self) -> list[int]:
        """Stop the server; the size of every request body it received, in order."""
        from openai import AsyncOpenAI

        async with AsyncOpenAI(base_url=self.base_url, api_key="bench") as client:
            await client.chat.completions.create(model=MODEL_NAME, messages=[], extra_body={"stop": True})
        sizes = await asyncio.to_thread(self._sizes.get)
        self._process.join()
        return sizes


async def converse(base_url: str, image: bytes, *, turns: int, every: int, retain_turns: int) -> Result:
    settings = Settings(
        _env_file=None,
        discord_token=SecretStr("bench"),
        llm_model=MODEL_NAME,
        llm_base_url=base_url,
        database_url="",
        image_retain_turns=retain_turns,
    )
    agent = build_responder(settings, archive_enabled=False, memory_enabled=False)

    async def read(message: MessageRecord, info: AttachmentInfo) -> bytes:
        return image

    preparer = AttachmentPreparer(read, vision="on")
    manager = ConversationManager(timeout_seconds=3600)
    deps = ChatDeps("Parley", BOT_ID, 5, "server", CHANNEL_ID, "general", None, MEMBER_ID, True)
    start = datetime.now(UTC)
    with_image: list[float] = []
    without: list[float] = []
    stalls: list[float] = []
    busy: list[float] = []
    stop = asyncio.Event()
    watch = asyncio.create_task(ticker(stalls, busy, stop))
    try:
        for turn in range(turns):
            shares = turn % every == 0
            files = (AttachmentInfo(1000 + turn, f"screenshot-{turn}.png", "image/png", len(image)),) if shares else ()
            record = MessageRecord(
                message_id=100 + 2 * turn,
                channel_id=CHANNEL_ID,
                author_id=MEMBER_ID,
                author="member",
                content=f"<@{BOT_ID}> question {turn}: what do you make of this?",
                timestamp=start + timedelta(seconds=turn),
                mention_ids=frozenset({BOT_ID}),
                attachments=files,
            )
            conversation = manager.get(CHANNEL_ID) or manager.start(CHANNEL_ID)
            manager.record_message(CHANNEL_ID, record)
            began = time.perf_counter()
            prepared = await preparer.prepare([record], vision=True)
            (with_image if shares else without).append(time.perf_counter() - began)
            reply = await generate_reply(agent, conversation, record, deps, prepared)
            manager.record_bot_response(CHANNEL_ID, reply.messages, record.message_id)
    finally:
        stop.set()
        await watch
        await close_model(agent.model)
    return Result([], with_image, without, max(stalls, default=0.0), max(busy, default=0.0))


def report(name: str, result: Result) -> None:
    ms = 1000
    print(f"{name}:")
    print(
        f"  request bytes: {sum(result.request_bytes) / 2**20:.1f} MiB in {len(result.request_bytes)} requests,"
        f" largest {max(result.request_bytes) / 2**10:.0f} KiB"
    )
    print(
        f"  preparation: {statistics.median(result.prepare_with_image) * ms:.1f} ms median,"
        f" {max(result.prepare_with_image) * ms:.1f} ms worst per screenshot turn;"
        f" {statistics.median(result.prepare_without) * ms:.3f} ms median per turn without one"
    )
    verdict = "within" if result.worst_busy_ms <= STALL_LIMIT_MS else "OVER"
    print(
        f"  event loop: longest step {result.worst_busy_ms:.1f} ms of CPU ({verdict} the {STALL_LIMIT_MS} ms limit);"
        f" longest wall-clock stall {result.worst_stall_ms:.1f} ms"
    )


async def main(turns: int, every: int, side: int) -> None:
    image = await asyncio.to_thread(screenshot, side)
    print(f"{turns} turns, a {side}x{side * 9 // 16} screenshot ({len(image) / 2**20:.1f} MiB png) every {every} turns")
    results = []
    with allow_model_requests():
        for retain_turns in (3, turns + 1):
            server = ModelServer()
            result = await converse(server.base_url, image, turns=turns, every=every, retain_turns=retain_turns)
            result.request_bytes = await server.stop()
            results.append(result)
    kept, forever = results
    report("IMAGE_RETAIN_TURNS=3", kept)
    report("images kept for the whole conversation", forever)
    ratio = sum(forever.request_bytes) / sum(kept.request_bytes)
    print(f"request bytes without the setting: {ratio:.1f}x those with it")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--every", type=int, default=5)
    parser.add_argument("--side", type=int, default=2560)
    arguments = parser.parse_args()
    asyncio.run(main(arguments.turns, arguments.every, arguments.side))
