"""Benchmark what hostile files cost `python bot.py`: its peak memory, and how long other answers wait.

    python bench/bench_hostile_files.py [--answers 5] [--against REVISION]

`python bot.py` runs as its own process, as deployed, against the local fake Discord and fake model
server from tests/ (in this process). Measured, each from a fresh bot:

- memory: the bot process's peak resident set (VmHWM) once it is ready, then after answering one
  mention carrying four decompression-bomb pngs (20 kB, 13,000 x 13,000 one-bit pixels each), then
  after one carrying four pngs just under the pixel cap (6,300 x 6,300 RGB, 39.7 megapixels), which
  are decoded: the ceiling that decoding adds. Issue 30's target: under 700 MB.
- latency: the median time from a mention being sent to its answer being posted, over `--answers`
  mentions, with nothing else going on, then right after ten 34 kB PDFs of 200 pages sharing one content
  stream (16 million characters each) were posted in another channel, whose reading for the archive
  is then under way; the ratio of the two, and how long the ten took to be read and archived.

With `--against REVISION`, the same again for `python bot.py` as it was at REVISION (git archive to a
temporary folder), printed first: the figures before and after in one run.
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from io import BytesIO
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from tests.fakes.fake_discord import ALICE_ID, BOB_ID, BOT_ID, CHANNEL_ID, OTHER_CHANNEL_ID, FakeDiscord  # noqa: E402
from tests.fakes.fake_llm import FakeLLM  # noqa: E402
from tests.support.e2e_support import bot_environment  # noqa: E402
from tests.support.hostile_files import bomb_png, flat_png, shared_stream_pdf  # noqa: E402

MEMORY_TARGET_MB = 700
PDFS = 10


@dataclass
class Figures:
    ready_mb: float = 0.0
    bombs_mb: float = 0.0
    near_cap_mb: float = 0.0
    quiet_ms: float = 0.0
    busy_ms: float = 0.0
    pdfs_archived_s: float = 0.0


def peak_rss_mb(pid: int) -> float:
    """The process's peak resident set so far (VmHWM), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise LookupError(f"no VmHWM for process {pid}")


class Bot:
    """`python bot.py` from `source` against the fakes."""

    def __init__(self, fake: FakeDiscord, llm: FakeLLM, source: Path, folder: Path) -> None:
        self.fake, self.llm, self.source, self.folder = fake, llm, source, folder
        self.database = folder / "parley.db"
        self.process: asyncio.subprocess.Process | None = None
        self.answers = 0

    async def start(self, log: IO[str]) -> int:
        # The archive's daily budgets for file text off, so all ten PDFs are stored whole (older code ignores them).
        env = bot_environment(
            self.fake,
            self.llm,
            self.database,
            MEMBER_ANSWERS_PER_HOUR="0",
            ARCHIVE_FILE_TEXT_CHANNEL_BYTES="0",
            ARCHIVE_FILE_TEXT_MEMBER_BYTES="0",
        )
        self.process = await asyncio.create_subprocess_exec(
            sys.executable, str(self.source / "bot.py"), env=env, cwd=self.folder, stderr=log
        )
        await self.fake.wait_for_ready(timeout=120)  # python bot.py starts slowly on a loaded machine
        await asyncio.sleep(2.5)  # past discord.py's guild_ready_timeout (2 s): on_ready has run
        return self.process.pid

    async def ask(self, text: str, attachments: list[dict[str, object]] | None = None) -> float:
        """Seconds from the mention being sent to its answer being posted."""
        sent = time.monotonic()
        await self.fake.send_user_message(CHANNEL_ID, ALICE_ID, f"<@{BOT_ID}> {text}", attachments=attachments or [])
        self.answers += 1
        await self.fake.wait_for_posts(self.answers, CHANNEL_ID, timeout=600)
        return time.monotonic() - sent

    def archived_texts(self, channel_id: int) -> int:
        with sqlite3.connect(self.database) as database:
            query = "SELECT count(*) FROM attachments WHERE channel_id = ? AND text != ''"
            return int(database.execute(query, (channel_id,)).fetchone()[0])

    async def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            await self.process.wait()


async def with_bot(source: Path, work: Callable[[Bot, FakeDiscord, int], Awaitable[None]]) -> None:
    """`work` done with a fresh bot from `source` (given the bot, the fake Discord and the bot's process id)."""
    with tempfile.TemporaryDirectory() as folder:
        async with FakeDiscord() as fake, FakeLLM(lambda request: "Sure.") as llm:
            bot = Bot(fake, llm, source, Path(folder))
            log_path = Path(folder) / "bot.log"
            try:
                with log_path.open("w") as log:
                    await work(bot, fake, await bot.start(log))
            except Exception:
                print("the bot's console, last lines:\n" + "".join(log_path.read_text().splitlines(True)[-20:]))
                raise
            finally:
                await bot.stop()


async def measure_memory(source: Path, figures: Figures) -> None:
    bomb, near_cap = bomb_png(), flat_png(6300, 6300)

    async def work(bot: Bot, fake: FakeDiscord, pid: int) -> None:
        figures.ready_mb = peak_rss_mb(pid)
        await bot.ask("what do these show?", [fake.served_attachment(f"b{n}.png", bomb, "image/png") for n in range(4)])
        figures.bombs_mb = peak_rss_mb(pid)
        files = [fake.served_attachment(f"big{n}.png", near_cap, "image/png") for n in range(4)]
        await bot.ask("and these?", files)
        figures.near_cap_mb = peak_rss_mb(pid)

    await with_bot(source, work)


async def measure_latency(source: Path, answers: int, figures: Figures) -> None:
    pdf = shared_stream_pdf()

    async def work(bot: Bot, fake: FakeDiscord, pid: int) -> None:
        await bot.ask("warming up")
        quiet = [await bot.ask(f"quiet question {n}") for n in range(answers)]
        posted = time.monotonic()
        for n in range(PDFS):
            report = fake.served_attachment(f"report{n}.pdf", pdf, "application/pdf")
            await fake.send_user_message(OTHER_CHANNEL_ID, BOB_ID, f"report {n}", attachments=[report])
        busy = [await bot.ask(f"busy question {n}") for n in range(answers)]
        while bot.archived_texts(OTHER_CHANNEL_ID) < PDFS and time.monotonic() - posted < 900:  # noqa: ASYNC110
            await asyncio.sleep(0.1)
        figures.pdfs_archived_s = time.monotonic() - posted
        figures.quiet_ms, figures.busy_ms = statistics.median(quiet) * 1000, statistics.median(busy) * 1000

    await with_bot(source, work)


def checkout(revision: str, into: Path) -> Path:
    """The repository at `revision`, written under `into`."""
    command = ["git", "-C", str(ROOT), "archive", "--format=tar", revision]
    archive = subprocess.run(command, check=True, capture_output=True)
    with tarfile.open(fileobj=BytesIO(archive.stdout)) as tar:
        tar.extractall(into, filter="data")
    return into


def report(name: str, figures: Figures, answers: int) -> None:
    verdict = "under" if max(figures.bombs_mb, figures.near_cap_mb) < MEMORY_TARGET_MB else "OVER"
    print(f"{name}:")
    print(
        f"  peak RSS of the bot: {figures.ready_mb:.0f} MB ready, {figures.bombs_mb:.0f} MB after four bomb pngs,"
        f" {figures.near_cap_mb:.0f} MB after four 39.7 MP pngs ({verdict} the {MEMORY_TARGET_MB} MB target)"
    )
    print(
        f"  answer latency, median of {answers}: {figures.quiet_ms:.0f} ms quiet, {figures.busy_ms:.0f} ms right after"
        f" {PDFS} 200-page PDFs elsewhere: {figures.busy_ms / figures.quiet_ms:.2f}x;"
        f" the PDFs archived {figures.pdfs_archived_s:.1f} s after being posted"
    )


async def main(answers: int, against: str | None) -> None:
    sources = [("this worktree", ROOT)]
    with tempfile.TemporaryDirectory() as folder:
        if against is not None:
            sources.insert(0, (against, checkout(against, Path(folder))))
        for name, source in sources:
            figures = Figures()
            await measure_memory(source, figures)
            await measure_latency(source, answers, figures)
            report(name, figures, answers)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--answers", type=int, default=5, help="mentions timed, quiet and while PDFs are read")
    parser.add_argument("--against", help="also measure python bot.py as it was at this revision, first")
    arguments = parser.parse_args()
    asyncio.run(main(arguments.answers, arguments.against))
