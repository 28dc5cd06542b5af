"""What a shared file is: what its bytes say (`detect`, `decode_text`); Discord's description of it (`AttachmentInfo`)
and what it claims to be are value types of records.py."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor

from records import AttachmentInfo, Kind, MessageRecord

# Nothing larger is downloaded: it could not be sent, and it would sit in memory while being looked at.
MAX_DOWNLOAD_BYTES = 25 * 2**20
# A file whose name says neither text nor anything readable is looked into only up to this size.
MAX_UNKNOWN_DOWNLOAD_BYTES = 2 * 2**20
# Bytes looked at to tell text from binary.
_SNIFF_BYTES = 8192

# Reads an attachment's bytes; raises on any failure (expired link, deleted message, network).
AttachmentReader = Callable[["MessageRecord", AttachmentInfo], Awaitable[bytes]]
# Turns a voice note into text (TRANSCRIPTION_MODEL).
Transcriber = Callable[[AttachmentInfo, bytes], Awaitable[str]]


# --- Telling what a file is --------------------------------------------------------------------


def detect(data: bytes) -> Kind:
    """What `data` is, from its content alone: a file's name and declared type can lie."""
    return sniff(data)[0]


def sniff(data: bytes) -> tuple[Kind, str | None]:
    """What `data` is, and its text when it is text (decoded once). Blocking for a large text: see `sniffed`."""
    head = data[:16]
    if head.startswith((b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"GIF87a", b"GIF89a")) or (
        head[:4] == b"RIFF" and head[8:12] == b"WEBP"
    ):
        return Kind.IMAGE, None
    if head.startswith(b"%PDF-"):
        return Kind.PDF, None
    if (
        head.startswith((b"OggS", b"ID3", b"fLaC", b"\xff\xfb", b"\xff\xf3", b"\xff\xf2", b"\xff\xf1", b"\xff\xf9"))
        or (head[:4] == b"RIFF" and head[8:12] == b"WAVE")
        or head[4:11] == b"ftypM4A"
    ):
        return Kind.AUDIO, None
    if head[4:8] == b"ftyp" or head.startswith(b"\x1aE\xdf\xa3"):
        return Kind.VIDEO, None
    text = decode_text(data)
    return (Kind.TEXT, text) if text is not None else (Kind.OTHER, None)


# Decoding a 25 MB text takes ~60 ms: off the event loop, and off the default executor, whose threads aiohttp's
# DNS lookups use. Two threads: a paste is not held up behind another one.
_SNIFFERS = ThreadPoolExecutor(max_workers=2, thread_name_prefix="parley-sniff")


async def sniffed(data: bytes) -> tuple[Kind, str | None]:
    """`sniff` in a thread of its own."""
    return await asyncio.get_running_loop().run_in_executor(_SNIFFERS, sniff, data)


def decode_text(data: bytes) -> str | None:
    """`data` as text when it is text (UTF-8, or UTF-16 with a byte-order mark), else None."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError:
            return None
    sample = data[:_SNIFF_BYTES]
    if b"\x00" in sample:
        return None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        # A cut multi-byte character at the very end is still text.
        if error.start < len(data) - 3:
            return None
        text = data[: error.start].decode("utf-8-sig")
    controls = sum(1 for char in text[:_SNIFF_BYTES] if ord(char) < 32 and char not in "\t\n\r\f\v\x1b")
    return None if controls > len(text[:_SNIFF_BYTES]) // 100 else text
