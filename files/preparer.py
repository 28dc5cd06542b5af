"""Turning the attachments of the messages a request shows into model input, within the request's caps, and reading
text files and PDFs for the archive's search.

Each file is prepared on its own: whatever one raises or however long it takes, it becomes that file's note,
never a failed answer or archiving. Nothing of a member's file is read on the event loop: detection and text
decoding run on threads of their own, images on one bounded decoding thread (`files.images`), PDFs in worker
processes that are killed when they run late (`files.extraction`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections import OrderedDict
from collections.abc import Awaitable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from config import VisionMode
from files.extraction import PdfReaders
from files.images import ImageProblem, prepared_image
from files.kinds import MAX_DOWNLOAD_BYTES, MAX_UNKNOWN_DOWNLOAD_BYTES, AttachmentReader, Transcriber, sniffed
from files.pdf import PdfText
from files.prepared import Prepared, PreparedFiles, human_size
from files.providers import model_key
from prompting.quoting import cap_text
from records import AttachmentInfo, Kind

if TYPE_CHECKING:
    from pydantic_ai.models import Model

    from records import MessageRecord

log = logging.getLogger("parley.attachments")

# Extracted text kept in the archive per attachment, for search.
ARCHIVED_TEXT_MAX_CHARS = 500_000
# Text files and PDFs read lately, kept for the answer that follows their arrival: enough for a burst of pastes.
TEXTS_KEPT = 64
# Wall time for telling what a downloaded file is, and for decoding an image (its turn on the decoding thread
# included): past it, a note. The thread ends on its own (a decoding is bounded by MAX_IMAGE_PIXELS); a PDF
# has its own limit (PDF_SECONDS), after which its worker is killed; a transcription, its client's timeout.
DECODE_SECONDS = 30
# Files read for the archive at once (their bytes are in memory while they wait for a PDF worker).
ARCHIVE_READS_AT_ONCE = 2
DOWNLOAD_FAILED_NOTE = "could not be downloaded"


@dataclass
class AttachmentPreparer:
    """Turns the attachments of the messages a request shows into model input, within the request's caps.

    `vision`: VISION; `auto` trusts the model's pydantic-ai profile and what the provider said at run time.
    """

    reader: AttachmentReader
    vision: VisionMode = "auto"
    max_images: int = 4
    max_chars: int = 100_000
    transcriber: Transcriber | None = None
    # Models (`model_key`) whose provider refused images at run time: they get none from then on.
    no_vision: set[str] = field(default_factory=set)
    # The latest text files and PDFs read (or being read), by attachment id: a file on a message Parley answers is
    # read on arrival for the archive (`archivable_text`) and again for the answer, and one download serves both.
    _texts: OrderedDict[int, asyncio.Future[Prepared]] = field(default_factory=OrderedDict)
    pdfs: PdfReaders = field(default_factory=PdfReaders)
    decode_seconds: float = DECODE_SECONDS
    _archive_reads: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(ARCHIVE_READS_AT_ONCE))

    def sees_images(self, model: Model | None) -> bool:
        """Whether images are sent to `model`: VISION, its profile (auto), and what its provider said."""
        if self.vision == "off":
            return False
        if model is not None and model_key(model) in self.no_vision:
            return False
        return self.vision == "on" or model is None or bool(model.profile.get("supports_image_input", True))

    def refuse_images(self, model: Model) -> None:
        """Remember that `model`'s provider takes no images."""
        self.no_vision.add(model_key(model))

    async def prepare(self, messages: Sequence[MessageRecord], *, vision: bool) -> PreparedFiles:
        """The attachments of `messages` (oldest first; the newest has priority) as model input.

        Images: at most `max_images`, newest first. Text (files, PDFs, transcripts): at most `max_chars`
        in all, newest first, a cut said where it falls. Every attachment the model does not get has a note.
        A failed download is a note too: it never fails the answer.
        """
        wanted = [(message, info) for message in reversed(messages) for info in message.attachments]
        if not wanted:
            return PreparedFiles()
        image_slots = self.max_images if vision else 0
        plans: list[Awaitable[Prepared]] = []
        for message, info in wanted:
            claimed = info.claimed_kind
            if claimed is Kind.IMAGE:
                if not vision:
                    plans.append(_noted(message, info, Kind.IMAGE, "image not shown: this model is not sent images"))
                    continue
                if image_slots == 0:
                    plans.append(
                        _noted(message, info, Kind.IMAGE, f"image not shown: over {self.max_images} images a request")
                    )
                    continue
                image_slots -= 1
            plans.append(self._prepare_one(message, info, claimed, vision))
        prepared = await asyncio.gather(*plans)
        return self._within_caps(prepared)

    async def _prepare_one(self, message: MessageRecord, info: AttachmentInfo, claimed: Kind, vision: bool) -> Prepared:
        """One attachment as model input; whatever goes wrong with it is its note, never an error."""
        try:
            return await self._prepare_unguarded(message, info, claimed, vision)
        except Exception as error:  # noqa: BLE001 - one file must never fail an answer or the archiving of its message
            return _unreadable(message, info, claimed, error)

    async def _prepare_unguarded(
        self, message: MessageRecord, info: AttachmentInfo, claimed: Kind, vision: bool
    ) -> Prepared:
        if claimed is Kind.VIDEO:
            return Prepared(info, message.message_id, Kind.VIDEO, note="video: not opened (videos are not supported)")
        if claimed is Kind.AUDIO and self.transcriber is None:
            return Prepared(info, message.message_id, Kind.AUDIO, note="voice note or audio: not transcribed")
        if info.size > MAX_DOWNLOAD_BYTES:
            return Prepared(info, message.message_id, claimed, note=f"not opened: too large ({human_size(info.size)})")
        if claimed is Kind.OTHER and info.size > MAX_UNKNOWN_DOWNLOAD_BYTES:
            # Most likely an archive or an office file: not worth downloading only to say so.
            return Prepared(info, message.message_id, claimed, note="not opened: a file type Parley cannot read")
        if claimed in (Kind.TEXT, Kind.PDF):
            return await self._read_text_once(message, info, claimed, vision)
        return await self._download(message, info, claimed, vision)

    async def _read_text_once(
        self, message: MessageRecord, info: AttachmentInfo, claimed: Kind, vision: bool
    ) -> Prepared:
        """A text file or PDF, read once for the archive and the answer alike; what was not text is read anew."""
        shared = self._texts.get(info.attachment_id)
        if shared is not None:
            with contextlib.suppress(Exception):  # the first reader's error is its own: this one tries anew
                prepared = await asyncio.shield(shared)
                # Read text, or a note on why it could not be read (said once, logged once).
                if prepared.kind in (Kind.TEXT, Kind.PDF) and prepared.note != DOWNLOAD_FAILED_NOTE:
                    return prepared
            # A failed download is tried again, and bytes that are an image depend on `vision`.
            return await self._download(message, info, claimed, vision)
        reading = asyncio.ensure_future(self._download(message, info, claimed, vision))
        self._texts[info.attachment_id] = reading
        if len(self._texts) > TEXTS_KEPT:
            self._texts.popitem(last=False)
        prepared = await asyncio.shield(reading)
        if len(prepared.text or "") > self.max_chars and self._texts.get(info.attachment_id) is reading:
            # Longer than a request carries: not worth its memory in the meantime (at most TEXTS_KEPT * max_chars).
            del self._texts[info.attachment_id]
        return prepared

    async def _download(self, message: MessageRecord, info: AttachmentInfo, claimed: Kind, vision: bool) -> Prepared:
        try:
            data = await self.reader(message, info)
        except Exception as error:  # noqa: BLE001 - any failure becomes the model's note, never a failed answer
            log.warning(
                "could not download attachment %s of message %s: %r", info.attachment_id, message.message_id, error
            )
            return Prepared(info, message.message_id, claimed, note=DOWNLOAD_FAILED_NOTE)
        try:
            return await self._from_bytes(message, info, data, vision)
        except TimeoutError:
            note = f"not read: it took over {self.decode_seconds:g} s"
            log.warning("attachment %s of message %s: %s", info.attachment_id, message.message_id, note)
            return Prepared(info, message.message_id, claimed, note=note)
        except Exception as error:  # noqa: BLE001 - here, within the shared reading, so it is noted and logged once
            return _unreadable(message, info, claimed, error)

    async def _from_bytes(self, message: MessageRecord, info: AttachmentInfo, data: bytes, vision: bool) -> Prepared:
        async with asyncio.timeout(self.decode_seconds):
            kind, text = await sniffed(data)
        message_id = message.message_id
        if kind is Kind.IMAGE:
            if not vision:
                return Prepared(info, message_id, kind, note="image not shown: this model is not sent images")
            try:
                async with asyncio.timeout(self.decode_seconds):
                    image = await prepared_image(data)
            except ImageProblem as problem:
                return Prepared(info, message_id, kind, note=f"image not shown: {problem}")
            return Prepared(info, message_id, kind, image=image, note=", ".join(image.changes) or None)
        if kind is Kind.TEXT:
            return Prepared(info, message_id, kind, text=text or None, note=None if text else "empty file")
        if kind is Kind.PDF:
            return _pdf_prepared(info, message_id, await self.pdfs.read(data))
        if kind is Kind.AUDIO:
            return await self._transcribed(info, message_id, data)
        what = "a video" if kind is Kind.VIDEO else "a binary file of a type Parley cannot read"
        return Prepared(info, message_id, kind, note=f"not opened: {what}")

    async def _transcribed(self, info: AttachmentInfo, message_id: int, data: bytes) -> Prepared:
        if self.transcriber is None:
            return Prepared(info, message_id, Kind.AUDIO, note="voice note or audio: not transcribed")
        try:
            text = (await self.transcriber(info, data)).strip()
        except Exception as error:  # noqa: BLE001 - a failed transcription is a note, never a failed answer
            log.warning("could not transcribe attachment %s: %r", info.attachment_id, error)
            return Prepared(info, message_id, Kind.AUDIO, note="voice note: transcription failed")
        return Prepared(info, message_id, Kind.AUDIO, text=text or None, note="transcript" if text else "silent")

    async def archivable_text(self, message: MessageRecord) -> list[Prepared]:
        """The text of `message`'s text files and PDFs, for the archive's search (images and audio are not read)."""
        readable = [info for info in message.attachments if info.claimed_kind in (Kind.TEXT, Kind.PDF)]
        prepared = []
        for info in readable:
            # One file at a time per message, and ARCHIVE_READS_AT_ONCE in all: what members post anywhere takes
            # the PDF workers in turns, and an answer's own reading of a file never queues behind these.
            async with self._archive_reads:
                prepared.append(await self._prepare_one(message, info, info.claimed_kind, False))
        return [
            replace(p, text=p.text[:ARCHIVED_TEXT_MAX_CHARS]) for p in prepared if p.text and p.kind is not Kind.AUDIO
        ]

    def _within_caps(self, newest_first: Iterable[Prepared]) -> PreparedFiles:
        """Number the images and share `max_chars` out among the texts, newest first."""
        remaining = self.max_chars
        image_number = 0
        by_message: dict[int, list[Prepared]] = {}
        for prepared in newest_first:
            if prepared.image is not None:
                image_number += 1
                prepared = replace(prepared, image_number=image_number)
            elif prepared.text is not None:
                prepared = _capped(prepared, remaining, self.max_chars)
                remaining -= min(len(prepared.text or ""), remaining)
            by_message.setdefault(prepared.message_id, []).append(prepared)
        # Images are numbered newest first; the prompt lists messages oldest first, each in its own order.
        return PreparedFiles({message_id: by_message[message_id] for message_id in sorted(by_message)})


def _capped(prepared: Prepared, room: int, max_chars: int) -> Prepared:
    text = prepared.text or ""
    if len(text) <= room:
        return prepared
    if room <= 0:
        note = f"text not included: the {max_chars:,} characters of files a request may carry are used up"
        return replace(prepared, text=None, note=note)
    note = f"cut: the first {room:,} of {len(text):,} characters (MAX_ATTACHMENT_CHARS)"
    return replace(prepared, text=cap_text(text, room), note=note)


def _pdf_prepared(info: AttachmentInfo, message_id: int, read: PdfText | str) -> Prepared:
    if isinstance(read, str):
        return Prepared(info, message_id, Kind.PDF, note=read)
    if not read.text:
        return Prepared(info, message_id, Kind.PDF, note="PDF unreadable: no text layer (a scan?)")
    note = None
    if read.cut_at_chars:
        note = f"PDF cut: the first {len(read.text):,} characters ({read.pages_read} of {read.pages} pages)"
    elif read.pages_read < read.pages:
        note = f"PDF cut: the first {read.pages_read} of {read.pages} pages"
    return Prepared(info, message_id, Kind.PDF, text=read.text, note=note)


# Byte strings quoted in a parser's message (pypdf's "starting with b'...'") are the file's content: never logged.
_QUOTED_BYTES = re.compile(r"b'(?:[^'\\]|\\.)*'" + r'|b"(?:[^"\\]|\\.)*"')


def _unreadable(message: MessageRecord, info: AttachmentInfo, kind: Kind, error: Exception) -> Prepared:
    """The note for a file that raised `error` while being read, its cause logged: its type and the start of its
    message, without the file's content."""
    cause = _QUOTED_BYTES.sub("b'...'", str(error)).replace("\n", " ")[:120]
    log.warning(
        "attachment %s of message %s could not be read: %s%s",
        info.attachment_id,
        message.message_id,
        type(error).__name__,
        f": {cause}" if cause else "",
    )
    return Prepared(info, message.message_id, kind, note=f"could not be read ({type(error).__name__})")


async def _noted(message: MessageRecord, info: AttachmentInfo, kind: Kind, note: str) -> Prepared:
    return Prepared(info, message.message_id, kind, note=note)
