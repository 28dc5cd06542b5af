"""What members share becomes model input: images for vision models, text files and PDFs inlined as quoted
data, voice notes transcribed, and a one-line note for everything the model does not get.

Nothing here imports discord: the bot hands over `AttachmentInfo`s (on `MessageRecord`) and a reader that
fetches an attachment's bytes through discord.py (`Attachment.read()`, whose signed CDN links expire).
Decoding and resizing run in a worker thread, so the event loop never waits on Pillow or pypdf.
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import io
import logging
import re
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.framing import close_tag, open_tag, register_tag, wrap
from pydantic_ai.messages import BinaryContent, ImageUrl, ModelMessage, ModelRequest, UserContent, UserPromptPart

from config import Settings, VisionMode
from quoting import cap_text, inline
from records import AttachmentInfo, Kind, MessageRecord

if TYPE_CHECKING:
    from pydantic_ai.models import Model

log = logging.getLogger("parley.attachments")

ATTACHMENT_TAG = register_tag("attachment")

# Anthropic's per-image limit, the smallest of the common providers' (OpenAI takes 20 MB): an image over
# it is re-encoded smaller, or skipped.
MAX_IMAGE_BYTES = 5 * 2**20
# Providers scale larger images down themselves (Anthropic past 1568 px on the long side, OpenAI to 768 px on
# the short one): sending more pixels only costs bytes, and the event loop's time to encode the request.
MAX_IMAGE_SIDE = 1568
# Nothing larger is downloaded: it could not be sent, and it would sit in memory while being looked at.
MAX_DOWNLOAD_BYTES = 25 * 2**20
# A file whose name says neither text nor anything readable is looked into only up to this size.
MAX_UNKNOWN_DOWNLOAD_BYTES = 2 * 2**20
# Extracted text kept in the archive per attachment, for search.
ARCHIVED_TEXT_MAX_CHARS = 500_000
# Text files and PDFs read lately, kept for the answer that follows their arrival: enough for a burst of pastes.
TEXTS_KEPT = 64
# Bytes looked at to tell text from binary.
_SNIFF_BYTES = 8192

# Reads an attachment's bytes; raises on any failure (expired link, deleted message, network).
AttachmentReader = Callable[["MessageRecord", AttachmentInfo], Awaitable[bytes]]
# Turns a voice note into text (TRANSCRIPTION_MODEL).
Transcriber = Callable[[AttachmentInfo, bytes], Awaitable[str]]


# --- Telling what a file is --------------------------------------------------------------------

_IMAGE_MEDIA_TYPES = {"PNG": "image/png", "JPEG": "image/jpeg", "WEBP": "image/webp", "GIF": "image/gif"}


def detect(data: bytes) -> Kind:
    """What `data` is, from its content alone: a file's name and declared type can lie."""
    head = data[:16]
    if head.startswith((b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"GIF87a", b"GIF89a")) or (
        head[:4] == b"RIFF" and head[8:12] == b"WEBP"
    ):
        return Kind.IMAGE
    if head.startswith(b"%PDF-"):
        return Kind.PDF
    if (
        head.startswith((b"OggS", b"ID3", b"fLaC", b"\xff\xfb", b"\xff\xf3", b"\xff\xf2", b"\xff\xf1", b"\xff\xf9"))
        or (head[:4] == b"RIFF" and head[8:12] == b"WAVE")
        or head[4:11] == b"ftypM4A"
    ):
        return Kind.AUDIO
    if head[4:8] == b"ftyp" or head.startswith(b"\x1aE\xdf\xa3"):
        return Kind.VIDEO
    return Kind.TEXT if decode_text(data) is not None else Kind.OTHER


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


# --- Images ------------------------------------------------------------------------------------


class ImageProblem(Exception):
    """An image that cannot be sent; the message says why, for the model's note."""


@dataclass(frozen=True, slots=True)
class PreparedImage:
    data: bytes
    media_type: str
    # What was done to it, for its note: "downscaled", "first frame of an animation", ...
    changes: tuple[str, ...] = ()


def prepare_image(data: bytes, *, max_bytes: int = MAX_IMAGE_BYTES, max_side: int = MAX_IMAGE_SIDE) -> PreparedImage:
    """`data` as an image every vision provider takes: png, jpeg or still webp, within the size limits.

    A gif (or an animated webp) becomes its first frame, as a png: several providers refuse gifs or
    read only one frame anyway. Blocking (decoding, resizing): run it in a thread.

    Raises:
        ImageProblem: not a readable image, or still over `max_bytes` after downscaling.
    """
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as image:
            image_format = image.format or ""
            animated = bool(getattr(image, "is_animated", False))
            fits = max(image.size) <= max_side and len(data) <= max_bytes
            if image_format in ("PNG", "JPEG", "WEBP") and not animated and fits:
                return PreparedImage(data, _IMAGE_MEDIA_TYPES[image_format])
            changes = []
            if image_format == "GIF" or animated:
                changes.append("first frame of an animation" if animated else "converted from gif")
            image.seek(0)
            keeps_alpha = image.mode in ("RGBA", "LA", "P") or "transparency" in image.info
            frame = image.convert("RGBA" if keeps_alpha else "RGB")
    except (UnidentifiedImageError, Image.DecompressionBombError, OSError, ValueError) as error:
        raise ImageProblem(f"could not be read as an image ({type(error).__name__})") from error
    if max(frame.size) > max_side:
        frame.thumbnail((max_side, max_side))
        changes.append(f"downscaled to {frame.size[0]}x{frame.size[1]}")
    encoded, media_type = _encode(frame, keeps_alpha)
    side = max(frame.size)
    # Still too heavy (a photo-like png): jpeg, then smaller, a few times before giving up.
    while len(encoded) > max_bytes and side > 256:
        side = side * 2 // 3
        frame = frame.convert("RGB")
        frame.thumbnail((side, side))
        encoded, media_type = _encode(frame, False)
        changes.append(f"downscaled to {frame.size[0]}x{frame.size[1]} to fit {max_bytes // 2**20} MB")
    if len(encoded) > max_bytes:
        raise ImageProblem(f"over the {max_bytes // 2**20} MB image limit even downscaled")
    return PreparedImage(encoded, media_type, tuple(dict.fromkeys(changes)))


def _encode(frame: Any, keeps_alpha: bool) -> tuple[bytes, str]:
    out = io.BytesIO()
    if keeps_alpha:
        frame.save(out, format="PNG", optimize=True)
        return out.getvalue(), "image/png"
    frame.save(out, format="JPEG", quality=85)
    return out.getvalue(), "image/jpeg"


# --- PDFs --------------------------------------------------------------------------------------


def pdf_text(data: bytes) -> str:
    """The text layer of a PDF, pages separated by blank lines. Blocking: run it in a thread.

    Raises:
        ImportError: pypdf (the `files` extra) is not installed.
        ValueError: the file is encrypted or damaged.
    """
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            raise ValueError("it is encrypted")
        return "\n\n".join((page.extract_text() or "").strip() for page in reader.pages).strip()
    except PdfReadError as error:
        raise ValueError(f"it is damaged ({error})") from error


# --- One attachment, prepared ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Prepared:
    """What one attachment becomes: text to inline, an image to send, and/or a note on what was not sent."""

    info: AttachmentInfo
    message_id: int
    kind: Kind
    text: str | None = None
    image: PreparedImage | None = None
    note: str | None = None
    # The image's number in the request (1-based), once it has one.
    image_number: int | None = None

    def element(self) -> str:
        """The `<attachment>` element that follows its message's quote: names as escaped attributes, text as body."""
        attributes: dict[str, str | None] = {
            "filename": inline(self.info.filename),
            "type": self.kind.value,
            "size": _size(self.info.size),
            "message_id": str(self.message_id),
            "file_id": str(self.info.attachment_id),
            "image": None if self.image_number is None else str(self.image_number),
            "note": self.note,
        }
        return wrap(ATTACHMENT_TAG, self.text or "", **attributes)


def _size(size: int) -> str:
    if size >= 2**20:
        return f"{size / 2**20:.1f} MB"
    return f"{max(1, round(size / 1024))} kB" if size >= 1024 else f"{size} B"


@dataclass(frozen=True)
class PreparedFiles:
    """The attachments of one request's messages, ready for the prompt."""

    by_message: dict[int, list[Prepared]] = field(default_factory=dict)

    def elements(self, message_id: int) -> str:
        """The lines that follow message `message_id`'s quote in the prompt; empty without attachments."""
        return "\n".join(prepared.element() for prepared in self.by_message.get(message_id, ()))

    @property
    def images(self) -> list[Prepared]:
        found = [p for prepared in self.by_message.values() for p in prepared if p.image is not None]
        return sorted(found, key=lambda p: p.image_number or 0)

    @property
    def extracted(self) -> list[Prepared]:
        """The attachments whose text was read (text files, PDFs, transcripts), for the archive."""
        return [p for prepared in self.by_message.values() for p in prepared if p.text]

    def user_content(self, prompt: str) -> str | list[UserContent]:
        """The user prompt: `prompt` alone, or followed by each image in its own `<attachment>` frame."""
        images = self.images
        if not images:
            return prompt
        content: list[UserContent] = [prompt]
        for prepared in images:
            assert prepared.image is not None
            content.append(
                open_tag(
                    ATTACHMENT_TAG,
                    filename=inline(prepared.info.filename),
                    message_id=str(prepared.message_id),
                    file_id=str(prepared.info.attachment_id),
                    image=str(prepared.image_number),
                )
            )
            # An identifier of our own spares pydantic-ai hashing the image's bytes for one, on the event loop.
            identifier = f"attachment-{prepared.info.attachment_id}"
            content.append(
                BinaryContent(prepared.image.data, media_type=prepared.image.media_type, identifier=identifier)
            )
            content.append(close_tag(ATTACHMENT_TAG))
        return content

    def without_images(self, note: str) -> PreparedFiles:
        """The same files with every image left out and `note` saying why."""
        return PreparedFiles(
            {
                message_id: [
                    replace(p, image=None, image_number=None, note=note) if p.image is not None else p for p in prepared
                ]
                for message_id, prepared in self.by_message.items()
            }
        )


# --- Preparing a request's attachments ---------------------------------------------------------


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
        if claimed is Kind.VIDEO:
            return Prepared(info, message.message_id, Kind.VIDEO, note="video: not opened (videos are not supported)")
        if claimed is Kind.AUDIO and self.transcriber is None:
            return Prepared(info, message.message_id, Kind.AUDIO, note="voice note or audio: not transcribed")
        if info.size > MAX_DOWNLOAD_BYTES:
            return Prepared(info, message.message_id, claimed, note=f"not opened: too large ({_size(info.size)})")
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
                if prepared.text is not None and prepared.kind in (Kind.TEXT, Kind.PDF):
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
            return Prepared(info, message.message_id, claimed, note="could not be downloaded")
        return await self._from_bytes(message, info, data, vision)

    async def _from_bytes(self, message: MessageRecord, info: AttachmentInfo, data: bytes, vision: bool) -> Prepared:
        kind = detect(data)
        message_id = message.message_id
        if kind is Kind.IMAGE:
            if not vision:
                return Prepared(info, message_id, kind, note="image not shown: this model is not sent images")
            try:
                image = await asyncio.to_thread(prepare_image, data)
            except ImageProblem as problem:
                return Prepared(info, message_id, kind, note=f"image not shown: {problem}")
            return Prepared(info, message_id, kind, image=image, note=", ".join(image.changes) or None)
        if kind is Kind.TEXT:
            text = await asyncio.to_thread(decode_text, data)
            return Prepared(info, message_id, kind, text=text or None, note=None if text else "empty file")
        if kind is Kind.PDF:
            return await self._pdf(info, message_id, data)
        if kind is Kind.AUDIO:
            return await self._transcribed(info, message_id, data)
        what = "a video" if kind is Kind.VIDEO else "a binary file of a type Parley cannot read"
        return Prepared(info, message_id, kind, note=f"not opened: {what}")

    async def _pdf(self, info: AttachmentInfo, message_id: int, data: bytes) -> Prepared:
        try:
            text = await asyncio.to_thread(pdf_text, data)
        except ImportError:
            return Prepared(info, message_id, Kind.PDF, note="PDF not read: pypdf (the files extra) is not installed")
        except ValueError as problem:
            return Prepared(info, message_id, Kind.PDF, note=f"PDF not read: {problem}")
        if not text:
            return Prepared(info, message_id, Kind.PDF, note="PDF unreadable: no text layer (a scan?)")
        return Prepared(info, message_id, Kind.PDF, text=text)

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
        prepared = await asyncio.gather(
            *(self._prepare_one(message, info, info.claimed_kind, False) for info in readable)
        )
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


async def _noted(message: MessageRecord, info: AttachmentInfo, kind: Kind, note: str) -> Prepared:
    return Prepared(info, message.message_id, kind, note=note)


def build_transcriber(settings: Settings) -> Transcriber | None:
    """TRANSCRIPTION_MODEL on LLM_BASE_URL's server (or OpenAI's), through the openai SDK; None when it is unset."""
    model_name = settings.transcription_model
    if not model_name:
        return None
    api_key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else None
    if api_key is None and settings.llm_base_url:
        # As for the chat model: the SDK insists on a key, and a local server that needs none ignores it.
        api_key = "api-key-not-set"

    async def transcribe(info: AttachmentInfo, data: bytes) -> str:
        from openai import AsyncOpenAI

        upload = (info.filename or "voice-message.ogg", data, info.content_type or "audio/ogg")
        async with AsyncOpenAI(
            base_url=settings.llm_base_url, api_key=api_key, max_retries=settings.model_retries
        ) as client:
            result = await client.audio.transcriptions.create(model=model_name, file=upload)
        return result.text

    return transcribe


def model_key(model: Model) -> str:
    return f"{model.system}:{model.model_name}"


# --- Providers that refuse images ---------------------------------------------------------------

# Bad request, unsupported media type, unprocessable: what servers answer a request they cannot take.
_REFUSAL_STATUSES = frozenset({400, 415, 422})
_IMAGE_WORDS = re.compile(r"image|vision|multimodal|multi-modal", re.IGNORECASE)
_REFUSAL_WORDS = re.compile(
    r"not support|unsupported|only supported|not a multimodal|cannot (?:process|read|accept)|does not accept",
    re.IGNORECASE,
)


def is_image_refusal(error: BaseException | None) -> bool:
    """Whether `error` (or what it was raised from) is a provider saying the model takes no images."""
    seen = 0
    while error is not None and seen < 5:
        if isinstance(error, ModelHTTPError) and error.status_code in _REFUSAL_STATUSES:
            text = f"{error.message} {error.body}"
            if _IMAGE_WORDS.search(text) and _REFUSAL_WORDS.search(text):
                return True
        error = error.__cause__ or error.__context__
        seen += 1
    return False


# --- Images leaving the model's history ---------------------------------------------------------


def expire_images(messages: list[ModelMessage], retain_turns: int) -> list[ModelMessage]:
    """`messages` with every image older than `retain_turns` user turns replaced by a one-line placeholder.

    The turn that sent an image is its first; from the turn `retain_turns` after it, the model reads the
    placeholder (its `<attachment>` frame still names the file) instead of being sent the image again.
    """
    turns = 0
    kept = list(messages)
    for index in range(len(kept) - 1, -1, -1):
        message = kept[index]
        if not isinstance(message, ModelRequest) or not any(isinstance(p, UserPromptPart) for p in message.parts):
            continue
        turns += 1
        if turns > retain_turns:
            kept[index] = _images_expired(message, turns - 1)
    return kept


def _images_expired(request: ModelRequest, age: int) -> ModelRequest:
    parts = []
    changed = False
    for part in request.parts:
        if isinstance(part, UserPromptPart) and not isinstance(part.content, str):
            content = [_placeholder(item, age) for item in part.content]
            if any(a is not b for a, b in zip(content, part.content, strict=True)):
                part = replace(part, content=content)
                changed = True
        parts.append(part)
    return replace(request, parts=parts) if changed else request


def _placeholder(item: UserContent, age: int) -> UserContent:
    if isinstance(item, ImageUrl) or (isinstance(item, BinaryContent) and item.is_image):
        return f"(image no longer shown: sent {age} turns ago)"
    return item


# One <attachment> element or image frame's opening tag: attribute values are escaped, so none holds ">", and a body
# cannot hold the closing tag (`wrap` neutralises it).
_ATTACHMENT_ELEMENT = re.compile(r'<attachment\b[^>]*\bmessage_id="(\d+)"[^>]*>(?:.*?</attachment>)?', re.DOTALL)
_FILENAME_ATTRIBUTE = re.compile(r'\bfilename="([^"]*)"')
_FILE_ID_ATTRIBUTE = re.compile(r'\bfile_id="(\d+)"')
DELETED_NOTE = "(message deleted)"
FILE_REMOVED_NOTE = "(file removed from its message)"


def kept_files(attachments: Iterable[AttachmentInfo]) -> frozenset[str]:
    """The keys a message's remaining files go by in `Removals.files_kept`: each one's id, which the model's history
    gives every file (names cannot tell pasted screenshots apart: all are `image.png`), and its name, for history
    written before it did."""
    names = (inline(attachment.filename) for attachment in attachments)
    return frozenset((*names, *(_file_key(attachment.attachment_id) for attachment in attachments)))


def _file_key(attachment_id: int | str) -> str:
    # Kept apart from names: a file may be called anything, even a number.
    return f"#{attachment_id}"


@dataclass(frozen=True)
class Removals:
    """What the model's history must no longer show of members' files: every file of the `deleted` messages, and
    of each message in `files_kept` (an edit took files off it) those not among its `kept_files`."""

    deleted: Collection[int] = ()
    files_kept: Mapping[int, Collection[str]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.deleted or self.files_kept)

    def note(self, element: str, message_id: int) -> str | None:
        """Why the `<attachment>` element or frame `element` of message `message_id` must go; None keeps it."""
        if message_id in self.deleted:
            return DELETED_NOTE
        kept = self.files_kept.get(message_id)
        if kept is None:
            return None
        identified = _FILE_ID_ATTRIBUTE.search(element)
        if identified is not None:
            return None if _file_key(identified[1]) in kept else FILE_REMOVED_NOTE
        named = _FILENAME_ATTRIBUTE.search(element)
        return None if named is not None and html.unescape(named[1]) in kept else FILE_REMOVED_NOTE


def without_removed(text: str, removals: Removals) -> str:
    """`text` with the `<attachment>` elements of removed files emptied: their name and text go with them."""
    if not removals or "<attachment" not in text:
        return text

    def replace_element(match: re.Match[str]) -> str:
        note = removals.note(match[0], int(match[1]))
        return match[0] if note is None else wrap(ATTACHMENT_TAG, "", message_id=match[1], note=note)

    return _ATTACHMENT_ELEMENT.sub(replace_element, text)


def images_without_removed(content: Sequence[UserContent], removals: Removals) -> list[UserContent]:
    """Prompt `content` with each removed file's image replaced by a note, and its frame by one without its name."""
    kept: list[UserContent] = []
    for item in content:
        previous = kept[-1] if kept else None
        frame = _ATTACHMENT_ELEMENT.fullmatch(previous) if isinstance(previous, str) else None
        note = removals.note(frame[0], int(frame[1])) if frame is not None and not isinstance(item, str) else None
        if frame is not None and note is not None:
            kept[-1] = open_tag(ATTACHMENT_TAG, message_id=frame[1])
            item = note
        kept.append(item)
    return kept


def content_chars(content: str | Sequence[UserContent]) -> int:
    """About how many characters prompt `content` counts for; an image as about 1,000 tokens (OpenAI's high detail)."""
    if isinstance(content, str):
        return len(content)
    return sum(len(item) if isinstance(item, str) else IMAGE_CHARS for item in content)


IMAGE_CHARS = 4000
