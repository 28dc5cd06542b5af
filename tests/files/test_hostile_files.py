"""Unit tests for hostile files (issue 30): a file can only become a note, and reading one is bounded."""

from __future__ import annotations

import asyncio
import io
import logging
import os
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from PIL import Image

import files.images
import files.kinds
from files.extraction import PdfReaders
from files.images import MAX_IMAGE_SIDE, ImageProblem, PreparedImage, prepare_image
from files.pdf import PdfText, extract_text, read_pdf
from files.prepared import Prepared
from files.preparer import AttachmentPreparer, _unreadable
from records import AttachmentInfo, Kind, MessageRecord
from tests.support.hostile_files import (
    bomb_png,
    broken_png,
    image,
    malformed_pdfs,
    mutations,
    pdfs_pypdf_chokes_on,
    shared_stream_pdf,
    text_pdf,
)

# Every input the fuzz tests feed, in the order and with the caps the preparation uses.
IMAGE_SEEDS = [image(image_format) for image_format in ("PNG", "JPEG", "GIF", "WEBP")]
PDF_SEEDS = [text_pdf("the first quarter"), shared_stream_pdf(pages=3, lines=["a", "b"]), *malformed_pdfs().values()]


def message(message_id: int, *attachments: AttachmentInfo) -> MessageRecord:
    return MessageRecord(
        message_id, 10, 2, "alice", "look", datetime(2026, 11, 25, tzinfo=UTC), attachments=attachments
    )


def served(files: dict[int, bytes | str]) -> AttachmentPreparer:
    """A preparer whose reader serves `files` by attachment id (a str stands for a reader's bug: not bytes)."""

    async def read(record: MessageRecord, info: AttachmentInfo) -> bytes:
        return files[info.attachment_id]  # type: ignore[return-value]

    return AttachmentPreparer(read, vision="on")


def pdf_workers() -> list[int]:
    """The PDF worker processes this process has running."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            command = (entry / "cmdline").read_bytes()
        except (OSError, ValueError, IndexError):
            continue  # not a process, or one that ended meanwhile
        if parent == os.getpid() and b"files/pdf.py" in command:
            found.append(int(entry.name))
    return found


@pytest.fixture(autouse=True)
def no_worker_left() -> Iterator[None]:
    yield
    assert pdf_workers() == []


# --- A file can only become a note ---------------------------------------------------------------


async def test_a_png_cut_mid_chunk_is_a_note_for_the_answer() -> None:
    """Pillow raises SyntaxError on it (no OSError): the answer gets a note, and the other file still arrives."""
    preparer = served({1: broken_png(), 2: b"the logs are fine"})
    shared = message(5, AttachmentInfo(1, "shot.png", "image/png"), AttachmentInfo(2, "notes.txt"))
    files = await preparer.prepare([shared], vision=True)
    broken, notes = files.by_message[5]
    assert broken.note == "image not shown: could not be read as an image (SyntaxError)" and broken.image is None
    assert notes.text == "the logs are fine"


async def test_any_error_reading_a_file_is_its_note_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    """Whatever a file raises (here a reader's bug: text instead of bytes) is the note for the archive's reading
    and the answer's alike, and its cause is logged once, as its type without the file's content."""
    preparer = served({1: "not bytes", 2: b"fine"})
    shared = message(5, AttachmentInfo(1, "broken.txt"), AttachmentInfo(2, "fine.txt"))
    with caplog.at_level(logging.WARNING, "parley.attachments"):
        archived = await preparer.archivable_text(shared)
        files = await preparer.prepare([shared], vision=True)
    assert [p.text for p in archived] == ["fine"]
    assert files.by_message[5][0].note == "could not be read (TypeError)"
    [record] = [r for r in caplog.records if "could not be read" in r.getMessage()]
    assert "attachment 1 of message 5 could not be read: TypeError" in record.getMessage()


def test_the_logged_cause_leaves_out_the_bytes_a_parser_quotes(caplog: pytest.LogCaptureFixture) -> None:
    """Parsers quote the bytes they choke on (pypdf: "starting with b'...'"): the log line has the error's type and
    words, never the file's content."""
    error = ValueError("Invalid Elementary Object starting with b'api_key=\\'sk-123' @42")
    with caplog.at_level(logging.WARNING, "parley.attachments"):
        prepared = _unreadable(message(5), AttachmentInfo(1, "a.pdf"), Kind.PDF, error)
    assert prepared.note == "could not be read (ValueError)"
    [record] = caplog.records
    assert record.getMessage() == (
        "attachment 1 of message 5 could not be read: ValueError: Invalid Elementary Object starting with b'...' @42"
    )


async def test_a_file_taking_too_long_to_decode_is_a_note() -> None:
    preparer = served({1: b"slow text"})
    preparer.decode_seconds = 0
    files = await preparer.prepare([message(5, AttachmentInfo(1, "notes.txt"))], vision=True)
    assert files.by_message[5][0].note == "not read: it took over 0 s"


async def test_malformed_pdfs_are_notes_and_archive_nothing() -> None:
    pdfs = malformed_pdfs()
    preparer = served(dict(enumerate(pdfs.values(), 1)))
    shared = message(5, *(AttachmentInfo(n, name) for n, name in enumerate(pdfs, 1)))
    assert await preparer.archivable_text(shared) == []
    notes = [p.note for p in (await preparer.prepare([shared], vision=True)).by_message[5]]
    assert notes == [
        "PDF not read: it is damaged (PdfStreamError)",
        "PDF not read: it is damaged (PdfStreamError)",
        "PDF unreadable: no text layer (a scan?)",
        "PDF not read: it is damaged (PdfReadError)",
    ]


def test_pdfs_pypdf_raises_anything_on_are_notes() -> None:
    """The exceptions issue 30 saw escape (pypdf's own PdfReadError was the only one caught) are notes."""
    notes = [read_pdf(data, max_pages=100, max_chars=500_000) for data in pdfs_pypdf_chokes_on().values()]
    assert notes == [
        f"PDF not read: it is damaged ({kind})"
        for kind in ("LimitReachedError", "NotImplementedError", "AttributeError", "TypeError")
    ]


# --- Images: bounded before decoding --------------------------------------------------------------


def test_a_decompression_bomb_is_refused_from_its_header() -> None:
    """A 20 kB one-bit png of 13,000 x 13,000 pixels (169 MP, under Pillow's hard limit) is never decoded."""
    with pytest.warns(Image.DecompressionBombWarning), pytest.raises(ImageProblem) as refused:
        prepare_image(bomb_png())
    assert str(refused.value) == "too large to open (13000x13000 pixels; the limit is 40 megapixels)"


def test_the_decoded_size_counts_the_bytes_a_pixel_takes() -> None:
    """Under the pixel cap, an image is refused when its pixels would take more than the decoding ceiling: an RGB
    pixel takes 4 bytes in Pillow, a greyscale one 1."""
    out = io.BytesIO()
    Image.new("RGB", (2000, 1000)).save(out, format="PNG")
    with pytest.raises(ImageProblem, match=r"2000x1000 pixels in RGB take 7 MB"):
        prepare_image(out.getvalue(), max_decoded_bytes=4 * 2**20)
    out = io.BytesIO()
    Image.new("L", (2000, 1000)).save(out, format="PNG")
    assert max(Image.open(io.BytesIO(prepare_image(out.getvalue(), max_decoded_bytes=4 * 2**20).data)).size) == 1568


def test_a_large_jpeg_is_downscaled_within_the_side() -> None:
    out = io.BytesIO()
    Image.new("RGB", (6000, 4000), (20, 90, 200)).save(out, format="JPEG")
    prepared = prepare_image(out.getvalue())
    assert Image.open(io.BytesIO(prepared.data)).size == (MAX_IMAGE_SIDE, 1045)
    assert prepared.changes == ("downscaled to 1568x1045",)


async def test_one_image_is_decoded_at_a_time_off_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """Four large images on one message are decoded one after the other, on the decoding thread."""
    decoding: list[str] = []
    at_once = {"now": 0, "most": 0}
    lock = threading.Lock()
    decode = files.images.prepare_image

    def watched(data: bytes) -> PreparedImage:
        with lock:
            at_once["now"] += 1
            at_once["most"] = max(at_once["most"], at_once["now"])
            decoding.append(threading.current_thread().name)
        try:
            return decode(data)
        finally:
            with lock:
                at_once["now"] -= 1

    monkeypatch.setattr(files.images, "prepare_image", watched)
    out = io.BytesIO()
    Image.new("RGB", (3000, 2000), (200, 10, 10)).save(out, format="PNG")
    preparer = served({n: out.getvalue() for n in range(1, 5)})
    shared = message(5, *(AttachmentInfo(n, f"{n}.png", "image/png") for n in range(1, 5)))
    prepared = await preparer.prepare([shared], vision=True)
    assert len(prepared.images) == 4 and at_once["most"] == 1
    assert all(name.startswith("parley-image") for name in decoding)


async def test_text_is_told_and_decoded_off_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    threads: list[str] = []
    sniff = files.kinds.sniff

    def watched(data: bytes) -> tuple[Kind, str | None]:
        threads.append(threading.current_thread().name)
        return sniff(data)

    monkeypatch.setattr(files.kinds, "sniff", watched)
    prepared = await served({1: "é".encode() * 100_000}).prepare([message(5, AttachmentInfo(1, "a.txt"))], vision=True)
    assert prepared.by_message[5][0].text == "é" * 100_000
    assert threads and all(name.startswith("parley-sniff") for name in threads)


# --- PDFs: capped, in workers that are killed -----------------------------------------------------


def test_a_pdf_is_read_up_to_the_character_cap() -> None:
    """200 pages sharing one content stream (16 million characters) stop at the cap, a few pages in."""
    read = extract_text(shared_stream_pdf(), max_pages=100, max_chars=500_000)
    assert len(read.text) == 500_000 and read.cut_at_chars and read.pages == 200 and read.pages_read < 10


def test_a_pdf_is_read_up_to_the_page_cap() -> None:
    read = extract_text(shared_stream_pdf(pages=10, lines=["short"]), max_pages=3, max_chars=500_000)
    assert read == PdfText("short\n\nshort\n\nshort", pages_read=3, pages=10)


async def test_a_pdf_in_a_worker_is_capped_and_its_cut_said() -> None:
    preparer = served({1: shared_stream_pdf()})
    shared = message(5, AttachmentInfo(1, "report.pdf"))
    [archived] = await preparer.archivable_text(shared)
    assert archived.kind is Kind.PDF and archived.text is not None and len(archived.text) == 500_000
    assert archived.note is not None and archived.note.startswith("PDF cut: the first 500,000 characters (")


async def test_a_pdf_worker_past_its_time_is_killed() -> None:
    readers = PdfReaders(seconds=1, max_pages=10**6, max_chars=10**9)
    assert await readers.read(shared_stream_pdf(pages=400)) == "PDF not read: it took over 1 s"


async def test_cancelling_a_reading_kills_its_worker() -> None:
    readers = PdfReaders(seconds=60, max_pages=10**6, max_chars=10**9)
    reading = asyncio.create_task(readers.read(shared_stream_pdf(pages=400)))
    async with asyncio.timeout(30):
        while not pdf_workers():  # noqa: ASYNC110 - a process starting has no event to await
            await asyncio.sleep(0.01)
    reading.cancel()
    with pytest.raises(asyncio.CancelledError):
        await reading


@pytest.mark.slow
async def test_pdf_workers_run_at_most_their_number_at_once() -> None:
    readers = PdfReaders(workers=2)
    seen: list[int] = []

    async def count() -> None:
        while True:
            seen.append(len(pdf_workers()))
            await asyncio.sleep(0.02)

    counting = asyncio.create_task(count())
    results = await asyncio.gather(*(readers.read(shared_stream_pdf(pages=8)) for _ in range(3)))
    counting.cancel()
    assert all(isinstance(read, PdfText) and read.cut_at_chars for read in results)
    assert max(seen) == 2


# --- Fuzz: nothing escapes but the note -------------------------------------------------------------


def test_mutated_images_become_an_image_or_a_problem() -> None:
    """2,000 mutated png, jpeg, gif and webp files through the image preparation: each is an image or a note."""
    outcomes = {"image": 0, "problem": 0}
    for data in mutations(30, IMAGE_SEEDS, 2000):
        try:
            prepare_image(data)
            outcomes["image"] += 1
        except ImageProblem:
            outcomes["problem"] += 1
    assert outcomes["image"] > 100 and outcomes["problem"] > 100


def test_mutated_pdfs_become_text_or_a_note() -> None:
    """1,000 mutated PDFs through the worker's reading, with the caps: each is text (maybe none) or a note."""
    outcomes = {"text": 0, "note": 0}
    for data in mutations(30, PDF_SEEDS, 1000):
        read = read_pdf(data, max_pages=100, max_chars=500_000)
        outcomes["note" if isinstance(read, str) else "text"] += 1
        assert isinstance(read, PdfText) or read.startswith("PDF not read: ")
    assert outcomes["text"] > 100 and outcomes["note"] > 100


@pytest.mark.slow
async def test_mutated_files_through_the_preparer_and_its_workers_are_notes_at_worst() -> None:
    """Mutated images and PDFs through the whole preparation (threads, PDF workers), for an answer and for the
    archive: every file is there, as an image, text or a note."""
    damaged = [*mutations(31, IMAGE_SEEDS, 24), *mutations(31, PDF_SEEDS, 24)]
    names = [f"file{n}.{'png' if n < 24 else 'pdf'}" for n in range(len(damaged))]
    preparer = served(dict(enumerate(damaged, 1)))
    preparer.max_images = len(damaged)
    shared = message(5, *(AttachmentInfo(n, name) for n, name in enumerate(names, 1)))
    archived = await preparer.archivable_text(shared)
    prepared: list[Prepared] = (await preparer.prepare([shared], vision=True)).by_message[5]
    assert len(prepared) == len(damaged) and len(archived) <= 24
    assert all(p.image is not None or p.text is not None or p.note for p in prepared)
