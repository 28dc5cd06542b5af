"""PDF text read in worker processes of Parley's own, a few at a time, each killed when it runs late.

A process per PDF (`files/pdf.py` as a script): killing it is the only way to stop pypdf, a fresh one carries
nothing over from a hostile file, and none is left when nothing is being read. Starting one costs about
0.1 to 0.3 s of CPU, small beside what it bounds. Neither the event loop nor the default executor (aiohttp's
DNS lookups) nor the archive waits on a PDF: only the answer that shows it, and the archiving of its text.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import logging
import os
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path

from files.pdf import PdfText

log = logging.getLogger("parley.attachments")

# Pages and characters read of one PDF: the archive keeps 500,000 characters of a file (a request carries
# MAX_ATTACHMENT_CHARS), and 100 pages of ordinary text take a worker a few seconds.
PDF_MAX_PAGES = 100
PDF_MAX_CHARS = 500_000
# Wall time one PDF may take, the worker's start included; its CPU time is capped at the same in the worker.
PDF_SECONDS = 15
# Workers at once: PDFs beyond them wait their turn, holding only their bytes. One core is left to the bot
# (on this project's 2-core bench machine, one worker; two from 3 cores up).
PDF_WORKERS = max(1, min(2, (os.cpu_count() or 1) - 1))

_WORKER_SCRIPT = Path(__file__).with_name("pdf.py")


@dataclass
class PdfReaders:
    """Reads PDFs' text in worker processes, at most `workers` at once, each within the caps."""

    workers: int = PDF_WORKERS
    seconds: float = PDF_SECONDS
    max_pages: int = PDF_MAX_PAGES
    max_chars: int = PDF_MAX_CHARS
    _slots: asyncio.Semaphore = field(init=False)

    def __post_init__(self) -> None:
        self._slots = asyncio.Semaphore(self.workers)

    async def read(self, data: bytes) -> PdfText | str:
        """The text of PDF `data`, or the note that says why there is none. Cancelled, it kills its worker."""
        if importlib.util.find_spec("pypdf") is None:
            return "PDF not read: pypdf is not installed"
        async with self._slots:
            return await self._read_in_worker(data)

    async def _read_in_worker(self, data: bytes) -> PdfText | str:
        worker = await asyncio.create_subprocess_exec(
            sys.executable,
            "-I",
            str(_WORKER_SCRIPT),
            str(self.max_pages),
            str(self.max_chars),
            str(max(1, round(self.seconds))),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
        )
        try:
            async with asyncio.timeout(self.seconds):
                output, _ = await worker.communicate(data)
        except TimeoutError:
            return f"PDF not read: it took over {self.seconds:g} s"
        finally:
            if worker.returncode is None:
                worker.kill()
                await worker.wait()
        return _answer(output, worker.returncode, self.seconds)


def _answer(output: bytes, returncode: int | None, seconds: float) -> PdfText | str:
    """What a worker wrote: the text read, or its note; a worker that died (out of CPU time or memory) is a note."""
    if returncode == -signal.SIGXCPU:
        return f"PDF not read: it took over {seconds:g} s"
    try:
        answer = json.loads(output)
        if isinstance(answer, dict) and isinstance(answer.get("note"), str):
            return str(answer["note"])
        return PdfText(**answer)
    except (ValueError, TypeError) as error:
        log.warning("a PDF worker ended with code %s and no answer (%s)", returncode, type(error).__name__)
        return "PDF not read: reading it failed"
