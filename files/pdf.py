"""The text layer of a PDF, within caps on pages and characters; and the worker process that reads one.

pypdf is pure Python: a small file can take minutes (200 pages sharing one content stream give 16 million
characters in 13 s), and a thread cannot be stopped. So `files.extraction` runs this file as a script in a
process of its own (`python -I files/pdf.py MAX_PAGES MAX_CHARS CPU_SECONDS`, the PDF on stdin, the answer
as JSON on stdout), which it kills when it runs late. The script imports nothing of Parley: `-I` keeps the
project (and the environment's PYTHON* variables) off its path.
"""

from __future__ import annotations

import io
import itertools
import json
import sys
from dataclasses import asdict, dataclass

# What the worker may take beyond its CPU seconds: the address space of its Python, pypdf and one PDF of at most
# 25 MB with pypdf's own decompression caps (75 MB a stream). Over it, an allocation fails (MemoryError: a note).
WORKER_MEMORY_BYTES = 1024 * 2**20


@dataclass(frozen=True, slots=True)
class PdfText:
    """What was read of a PDF: its text (pages separated by blank lines), and how much of it that is."""

    text: str
    pages_read: int
    pages: int
    # Whether reading stopped at the character cap (before `pages_read` pages were done, or right after).
    cut_at_chars: bool = False


class PdfProblem(Exception):
    """A PDF whose text cannot be read; the message says why, for the model's note."""


def extract_text(data: bytes, *, max_pages: int, max_chars: int) -> PdfText:
    """The text layer of the first `max_pages` pages of `data`, stopping once `max_chars` characters are read.

    Raises:
        PdfProblem: the file is encrypted or damaged (whatever pypdf raised on it).
        ImportError: pypdf is not installed (requirements.txt installs it).
    """
    from pypdf import PdfReader

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            raise PdfProblem("it is encrypted")
        pages = len(reader.pages)
        texts: list[str] = []
        read = 0
        for page in itertools.islice(reader.pages, max_pages):
            texts.append((page.extract_text() or "").strip())
            read += len(texts[-1]) + 2
            if read >= max_chars:
                break
    except PdfProblem:
        raise
    # pypdf raises many types on malformed input (PdfReadError, TypeError, AttributeError, KeyError,
    # NotImplementedError, LimitReachedError, RecursionError, ...): whichever it is, the file is damaged.
    except Exception as error:
        raise PdfProblem(f"it is damaged ({type(error).__name__})") from error
    text = "\n\n".join(texts).strip()
    return PdfText(text[:max_chars], len(texts), pages, cut_at_chars=len(text) >= max_chars)


def read_pdf(data: bytes, *, max_pages: int, max_chars: int) -> PdfText | str:
    """`extract_text`, with what goes wrong as the note that says so instead of an exception."""
    try:
        return extract_text(data, max_pages=max_pages, max_chars=max_chars)
    except ImportError:
        return "PDF not read: pypdf is not installed"
    except PdfProblem as problem:
        return f"PDF not read: {problem}"
    except MemoryError:
        return "PDF not read: it takes too much memory"


def _limit_this_process(cpu_seconds: int) -> None:
    """The worker's own bounds, which hold even if Parley is killed before it can kill the worker."""
    import logging
    import os
    import resource

    # pypdf logs a warning per oddity it meets: the worker's stderr is discarded, and this spares the work.
    logging.disable(logging.WARNING)
    # Answering and the event loop come first on a busy machine.
    os.nice(10)
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))
    resource.setrlimit(resource.RLIMIT_AS, (WORKER_MEMORY_BYTES, WORKER_MEMORY_BYTES))


def main(arguments: list[str]) -> None:
    max_pages, max_chars, cpu_seconds = (int(argument) for argument in arguments)
    _limit_this_process(cpu_seconds)
    result = read_pdf(sys.stdin.buffer.read(), max_pages=max_pages, max_chars=max_chars)
    answer = {"note": result} if isinstance(result, str) else asdict(result)
    sys.stdout.write(json.dumps(answer))


if __name__ == "__main__":
    main(sys.argv[1:])
