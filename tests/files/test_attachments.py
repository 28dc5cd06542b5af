"""Unit tests for the files package: what a shared file becomes for the model, and what the archive keeps of it."""

from __future__ import annotations

import io
import sys
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from PIL import Image
from pydantic import SecretStr, ValidationError
from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.messages import (
    BinaryContent,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    UserContent,
    UserPromptPart,
)
from pydantic_ai.models.test import TestModel
from pydantic_ai.profiles import ModelProfile
from pypdf import PdfWriter

from archive import Archive, ArchivedAttachment, ArchivedMessage
from archive.backends import open_archive
from archive.stores import StoreTables
from config import Settings, describe_settings_error
from conversation import ConversationManager
from files.history import FILE_REMOVED_NOTE, expire_images
from files.images import ImageProblem, prepare_image
from files.kinds import detect
from files.prepared import PreparedFiles
from files.preparer import AttachmentPreparer
from files.providers import is_image_refusal
from prompting.quoting import format_messages
from records import AttachmentInfo, Kind, MessageRecord
from tests.support.hostile_files import text_pdf

CHANNEL = 10
WHEN = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


async def stored_rows(archive: Archive, sql: str) -> list[tuple[Any, ...]]:
    """Rows straight from the backend's tables: what it keeps, beyond what the archive's interface shows."""
    assert isinstance(archive, StoreTables)
    return await archive.read(sql)


def png(width: int = 32, height: int = 24, color: tuple[int, int, int] = (10, 200, 10)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), color).save(out, format="PNG")
    return out.getvalue()


def gif(*colors: tuple[int, int, int]) -> bytes:
    frames = [Image.new("RGB", (16, 16), color) for color in colors]
    out = io.BytesIO()
    frames[0].save(out, format="GIF", save_all=True, append_images=frames[1:], duration=100, loop=0)
    return out.getvalue()


def scanned_pdf() -> bytes:
    """A PDF with a page and no text layer, as a scan without OCR is."""
    writer = PdfWriter()
    writer.add_blank_page(width=612, height=792)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


class Files:
    """Attachment bytes by id, served to the preparer as discord.py would; a missing id fails like an expired link."""

    def __init__(self) -> None:
        self.data: dict[int, bytes] = {}
        self.reads: list[int] = []
        self._next = 1

    def info(self, filename: str, data: bytes, content_type: str = "") -> AttachmentInfo:
        attachment_id = self._next
        self._next += 1
        self.data[attachment_id] = data
        return AttachmentInfo(attachment_id, filename, content_type, len(data))

    async def read(self, message: MessageRecord, info: AttachmentInfo) -> bytes:
        self.reads.append(info.attachment_id)
        try:
            return self.data[info.attachment_id]
        except KeyError:
            raise ConnectionError("404 Not Found") from None


def message(message_id: int, *attachments: AttachmentInfo) -> MessageRecord:
    return MessageRecord(message_id, CHANNEL, 2, "alice", "look", WHEN, attachments=attachments)


async def prepare_one(files: Files, info: AttachmentInfo, **options: object) -> PreparedFiles:
    preparer = AttachmentPreparer(files.read, **options)  # type: ignore[arg-type]
    return await preparer.prepare([message(1, info)], vision=True)


# --- Telling what a file is ---------------------------------------------------------------------


def test_content_decides_not_the_name() -> None:
    """A png is an image whatever it is called; text is text; bytes with NULs are not text, even named .txt."""
    assert detect(png()) is Kind.IMAGE
    assert detect(b"Traceback (most recent call last):\n  File 'x.py'\n") is Kind.TEXT
    assert detect(b"\x00\x01\x02binary\x00") is Kind.OTHER
    assert detect(text_pdf("hi")) is Kind.PDF
    assert detect(b"PK\x03\x04" + bytes(range(256))) is Kind.OTHER


async def test_a_text_file_is_downloaded_once_for_the_archive_and_the_answer() -> None:
    """A pasted log read on arrival for the archive is not fetched again for the answer; a failed read is retried."""
    files = Files()
    log = files.info("build.log", b"ERROR disk full on /dev/sda1", "text/plain")
    gone = files.info("old.log", b"", "text/plain")
    del files.data[gone.attachment_id]
    preparer = AttachmentPreparer(files.read)
    pasted = message(1, log, gone)
    archived = await preparer.archivable_text(pasted)
    answered = await preparer.prepare([pasted], vision=True)
    assert [prepared.text for prepared in archived] == ["ERROR disk full on /dev/sda1"]
    assert "ERROR disk full on /dev/sda1</attachment>" in answered.elements(1)
    assert files.reads.count(log.attachment_id) == 1
    assert files.reads.count(gone.attachment_id) == 2
    # A file longer than a request carries is not kept meanwhile: it is read again.
    small = AttachmentPreparer(files.read, max_chars=10)
    await small.archivable_text(message(2, log))
    await small.prepare([message(2, log)], vision=True)
    assert files.reads.count(log.attachment_id) == 3


async def test_a_text_file_named_png_is_inlined_as_text() -> None:
    """An extension that lies (text named .png) is read by its content: inlined as text, not sent as an image."""
    files = Files()
    prepared = await prepare_one(files, files.info("photo.png", b"ERROR disk full", "image/png"))
    assert prepared.images == []
    assert "ERROR disk full</attachment>" in prepared.elements(1)


async def test_binary_content_named_txt_is_noted_not_inlined() -> None:
    """A .txt holding binary bytes is not pasted into the prompt: the model gets a note naming it."""
    files = Files()
    prepared = await prepare_one(files, files.info("notes.txt", b"\x00\x9f\x92\x96" * 50, "text/plain"))
    element = prepared.elements(1)
    assert 'filename="notes.txt"' in element and "not opened: a binary file" in element


async def test_an_unreadable_office_file_is_named_in_a_note() -> None:
    """A .docx (a zip) becomes a note the model can answer from ("I can't open that .docx")."""
    files = Files()
    prepared = await prepare_one(files, files.info("report.docx", b"PK\x03\x04" + bytes(300)))
    assert 'filename="report.docx"' in prepared.elements(1) and "cannot read" in prepared.elements(1)


# --- Caps ----------------------------------------------------------------------------------------


async def test_text_is_shared_out_newest_first_within_max_chars() -> None:
    """The newest message's file gets the room first; an older one is cut, and the cut says how much."""
    files = Files()
    older = message(1, files.info("old.log", b"o" * 80))
    newer = message(2, files.info("new.log", b"n" * 60))
    prepared = await AttachmentPreparer(files.read, max_chars=100).prepare([older, newer], vision=True)
    assert "n" * 60 + "</attachment>" in prepared.elements(2)
    assert "cut: the first 40 of 80 characters" in prepared.elements(1)
    assert "o" * 40 + " [… 40 more characters cut]" in prepared.elements(1)


async def test_once_max_chars_is_used_up_a_file_is_noted() -> None:
    """With no room left, an older file's text is left out and the note says why."""
    files = Files()
    older = message(1, files.info("old.log", b"o" * 10))
    newer = message(2, files.info("new.log", b"n" * 100))
    prepared = await AttachmentPreparer(files.read, max_chars=100).prepare([older, newer], vision=True)
    assert "are used up" in prepared.elements(1) and "o" * 10 not in prepared.elements(1)


async def test_max_images_keeps_the_newest_and_never_downloads_the_rest() -> None:
    """Over MAX_IMAGES, the newest images are sent; the older ones are noted and not even downloaded."""
    files = Files()
    oldest = files.info("a.png", png(), "image/png")
    newest = [files.info(f"b{n}.png", png(), "image/png") for n in range(2)]
    preparer = AttachmentPreparer(files.read, max_images=2)
    prepared = await preparer.prepare([message(1, oldest), message(2, *newest)], vision=True)
    assert [p.info.filename for p in prepared.images] == ["b0.png", "b1.png"]
    assert "over 2 images a request" in prepared.elements(1)
    assert oldest.attachment_id not in files.reads


async def test_a_failed_download_is_a_note() -> None:
    """A link that fails gives the model a note, never an exception."""
    files = Files()
    info = AttachmentInfo(99, "gone.txt", "text/plain", 10)
    prepared = await prepare_one(files, info)
    assert "could not be downloaded" in prepared.elements(1)


async def test_without_vision_images_are_named_not_downloaded() -> None:
    """A model that is not sent images gets a note naming each, and the bytes are never fetched."""
    files = Files()
    info = files.info("shot.png", png(), "image/png")
    prepared = await AttachmentPreparer(files.read).prepare([message(1, info)], vision=False)
    assert prepared.images == [] and files.reads == []
    assert "image not shown" in prepared.elements(1)


# --- Images --------------------------------------------------------------------------------------


def test_a_gif_becomes_its_first_frame() -> None:
    """An animated gif, which several providers refuse, is sent as a png of its first frame."""
    prepared = prepare_image(gif((255, 0, 0), (0, 0, 255)))
    assert prepared.media_type == "image/png" and "first frame of an animation" in prepared.changes
    with Image.open(io.BytesIO(prepared.data)) as image:
        assert image.convert("RGB").getpixel((0, 0)) == (255, 0, 0)


def test_a_large_image_is_downscaled_and_says_so() -> None:
    """An image over the side limit is downscaled to it; a small one goes as it came."""
    prepared = prepare_image(png(4000, 100))
    with Image.open(io.BytesIO(prepared.data)) as image:
        assert max(image.size) == 1568
    assert any(change.startswith("downscaled") for change in prepared.changes)
    small = png()
    assert prepare_image(small).data == small


def test_an_image_that_cannot_fit_the_byte_limit_is_refused() -> None:
    """An image still over the byte limit after downscaling is skipped, with the reason."""
    with pytest.raises(ImageProblem, match="limit"):
        prepare_image(png(600, 600), max_bytes=100)


async def test_images_go_after_the_prompt_each_in_its_frame() -> None:
    """The user content is the prompt text, then each image framed by an <attachment> naming its file."""
    files = Files()
    prepared = await prepare_one(files, files.info("shot.png", png(), "image/png"))
    content = prepared.user_content("PROMPT")
    assert isinstance(content, list) and content[0] == "PROMPT"
    assert 'filename="shot.png"' in str(content[1]) and isinstance(content[2], BinaryContent)
    assert content[3] == "</attachment>"


# --- PDFs ----------------------------------------------------------------------------------------


async def test_a_pdf_text_layer_is_inlined() -> None:
    """A PDF's text reaches the model as quoted text."""
    files = Files()
    prepared = await prepare_one(files, files.info("spec.pdf", text_pdf("Quarterly numbers"), "application/pdf"))
    assert "Quarterly numbers" in prepared.elements(1)


async def test_a_scanned_pdf_is_said_to_be_unreadable() -> None:
    """A PDF without a text layer is said to be unreadable, not passed on as empty."""
    files = Files()
    prepared = await prepare_one(files, files.info("scan.pdf", scanned_pdf(), "application/pdf"))
    assert "no text layer" in prepared.elements(1)


async def test_without_pypdf_a_pdf_is_noted(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without pypdf installed, a PDF is noted as not read, and says why."""
    monkeypatch.setitem(sys.modules, "pypdf", None)
    files = Files()
    prepared = await prepare_one(files, files.info("spec.pdf", text_pdf("Quarterly numbers"), "application/pdf"))
    element = prepared.elements(1)
    assert "pypdf is not installed" in element and "Quarterly numbers" not in element


# --- Voice notes ---------------------------------------------------------------------------------


async def test_a_voice_note_without_transcription_is_noted_and_not_downloaded() -> None:
    """Without TRANSCRIPTION_MODEL the model is told a voice note was there."""
    files = Files()
    prepared = await prepare_one(files, files.info("voice-message.ogg", b"OggS" + bytes(100), "audio/ogg"))
    assert "voice note" in prepared.elements(1) and files.reads == []


async def test_a_voice_note_with_transcription_becomes_text() -> None:
    """With a transcriber, the voice note's words are inlined, and kept for the archive."""

    async def transcribe(info: AttachmentInfo, data: bytes) -> str:
        return "meet at noon"

    files = Files()
    info = files.info("voice-message.ogg", b"OggS" + bytes(100), "audio/ogg")
    prepared = await prepare_one(files, info, transcriber=transcribe)
    assert "meet at noon" in prepared.elements(1) and prepared.extracted[0].text == "meet at noon"


# --- Vision at run time and in history -----------------------------------------------------------


def test_vision_auto_follows_the_profile_and_the_provider() -> None:
    """VISION=auto sends images to a model whose profile takes them, until its provider refuses one."""
    preparer = AttachmentPreparer(Files().read)
    seeing, blind = TestModel(model_name="seeing"), TestModel(model_name="blind")
    blind_model = TestModel(model_name="blind", profile=ModelProfile(supports_image_input=False))
    assert preparer.sees_images(seeing) and not preparer.sees_images(blind_model)
    preparer.refuse_images(seeing)
    assert not preparer.sees_images(seeing) and preparer.sees_images(blind)
    assert not AttachmentPreparer(Files().read, vision="off").sees_images(blind)


def test_image_refusals_are_told_from_other_errors() -> None:
    """A 400 saying images are not supported is a refusal; a rate limit or an unrelated 400 is not."""
    refusal = ModelHTTPError(400, "m", {"message": "image input is not supported by this model"})
    wrapped = RuntimeError("run failed")
    wrapped.__cause__ = refusal
    assert is_image_refusal(refusal) and is_image_refusal(wrapped)
    assert not is_image_refusal(ModelHTTPError(429, "m", {"message": "image quota not supported"}))
    assert not is_image_refusal(ModelHTTPError(400, "m", {"message": "max_tokens is too large"}))


def test_images_older_than_the_retention_become_placeholders() -> None:
    """With 3 turns kept, an image from 3 turns before the newest is a placeholder; newer ones stay."""

    def turn(number: int, image: bool) -> list[ModelMessage]:
        content: str | list[UserContent] = f"turn {number}"
        if image:
            content = [f"turn {number}", BinaryContent(png(), media_type="image/png")]
        return [ModelRequest(parts=[UserPromptPart(content)]), ModelResponse(parts=[TextPart("ok")])]

    history = [*turn(1, True), *turn(2, True), *turn(3, False), *turn(4, False)]
    expired = expire_images(history, 3)
    first, second = (message.parts[0] for message in (expired[0], expired[2]))
    assert isinstance(first, UserPromptPart) and isinstance(second, UserPromptPart)
    assert first.content == ["turn 1", "(image no longer shown: sent 3 turns ago)"]
    assert isinstance(second.content[1], BinaryContent)


# --- The archive ---------------------------------------------------------------------------------


@pytest.fixture
async def archive(archive_url: str) -> AsyncIterator[Archive]:
    """An empty archive on each backend in turn."""
    archive = await open_archive(archive_url, retention_days=0)
    yield archive
    await archive.close()


def archived(message_id: int, *attachments: ArchivedAttachment) -> ArchivedMessage:
    return ArchivedMessage(message_id, 5, CHANNEL, 2, "sam", "here is the log", WHEN, False, attachments=attachments)


async def test_search_finds_a_message_by_its_attachments_text(archive: Archive) -> None:
    """search_history finds the log Sam pasted by what the log says, and shows the matching excerpt."""
    archive.add(archived(1, ArchivedAttachment(77, "crash.log", "text/plain", 40)))
    archive.add(archived(2))
    archive.set_attachment_text(77, "worker 3: frobnicator exploded at step 12")
    await archive.flush()
    [found] = await archive.search(CHANNEL, "frobnicator")
    assert found.message_id == 1
    assert "[attached crash.log: worker 3: frobnicator exploded at step 12]" in format_messages([found])


async def test_deleting_the_message_deletes_its_attachments(archive: Archive) -> None:
    """A deleted message's attachment names and text are gone, from the table and from search."""
    archive.add(archived(1, ArchivedAttachment(77, "crash.log", "text/plain", 40)))
    archive.set_attachment_text(77, "frobnicator exploded")
    await archive.flush()
    archive.delete([1])
    await archive.flush()
    assert await archive.search(CHANNEL, "frobnicator") == []
    assert await archive.search(CHANNEL, "crash") == []
    assert await stored_rows(archive, "SELECT count(*) FROM attachments") == [(0,)]


async def test_re_adding_a_message_keeps_its_attachment_text(archive: Archive) -> None:
    """Catch-up re-archiving a message does not lose the text already read from its attachment."""
    attachment = ArchivedAttachment(77, "crash.log", "text/plain", 40)
    archive.add(archived(1, attachment))
    archive.set_attachment_text(77, "frobnicator exploded")
    archive.add(archived(1, attachment))
    await archive.flush()
    assert [m.message_id for m in await archive.search(CHANNEL, "frobnicator")] == [1]


@pytest.mark.parametrize("gone", ["channel", "server", "retention"])
async def test_a_message_gone_with_its_channel_server_or_retention_takes_its_attachments(
    archive_url: str, gone: str
) -> None:
    """However a message goes (its channel or server deleted, or past the retention), its files' text goes too."""
    archive = await open_archive(archive_url, retention_days=1)
    try:
        archive.add(archived(1, ArchivedAttachment(77, "crash.log", "text/plain", 40)))
        archive.set_attachment_text(77, "frobnicator exploded")
        await archive.flush()
        if gone == "channel":
            archive.delete_channel(CHANNEL)
        elif gone == "server":
            archive.delete_guild(5)
        else:
            await archive.prune(WHEN + timedelta(days=2))
        await archive.flush()
        assert await archive.search(CHANNEL, "frobnicator") == []
        assert await stored_rows(archive, "SELECT count(*) FROM attachments") == [(0,)]
    finally:
        await archive.close()


async def test_search_syntax_in_a_query_finds_files_by_their_words(archive: Archive) -> None:
    """Quotes, operators and wildcards in a query are plain words, for files as for messages."""
    archive.add(archived(1, ArchivedAttachment(77, "deploy_notes.md", "text/markdown", 40)))
    archive.set_attachment_text(77, "roll back with the blue-green switch")
    await archive.flush()
    for query in ['deploy" OR *', "NEAR(green switch)", "notes:* & !roll", "blue-green)"]:
        assert [m.message_id for m in await archive.search(CHANNEL, query)] == [1], query


async def test_deleting_a_message_takes_its_files_out_of_the_model_history() -> None:
    """A deleted message's file text and image leave the conversation's history; other messages' stay."""
    files = Files()
    gone = message(5, files.info("secret.log", b"password=hunter2"), files.info("shot.png", png(), "image/png"))
    kept = message(6, files.info("keep.log", b"still here"))
    prepared = await AttachmentPreparer(files.read).prepare([gone, kept], vision=True)
    prompt = prepared.user_content(f"{prepared.elements(5)}\n{prepared.elements(6)}")
    manager = ConversationManager()
    conversation = manager.start(CHANNEL, [gone, kept])
    conversation.llm_history = [ModelRequest(parts=[UserPromptPart(prompt)]), ModelResponse(parts=[TextPart("ok")])]
    conversation.prompted_through = 6
    assert conversation.delete(5)
    part = conversation.llm_history[0].parts[0]
    assert isinstance(part, UserPromptPart) and not isinstance(part.content, str)
    text = "\n".join(item for item in part.content if isinstance(item, str))
    assert "hunter2" not in text and "still here" in text
    assert not any(isinstance(item, BinaryContent) for item in part.content)


async def test_an_edit_taking_files_off_a_message_takes_them_out_of_the_model_history() -> None:
    """Files a member removed by editing leave the history (names, text, image); the file left on it stays."""
    files = Files()
    log, shot, notes = (
        files.info("secret.log", b"password=hunter2"),
        files.info("shot.png", png(), "image/png"),
        files.info("notes.txt", b"still here"),
    )
    shared = message(5, log, shot, notes)
    prepared = await AttachmentPreparer(files.read).prepare([shared], vision=True)
    conversation = ConversationManager().start(CHANNEL, [shared])
    prompt = prepared.user_content(prepared.elements(5))
    conversation.llm_history = [ModelRequest(parts=[UserPromptPart(prompt)]), ModelResponse(parts=[TextPart("ok")])]
    conversation.prompted_through = 5

    assert not conversation.keep_files(5, (log, shot, notes))
    assert conversation.keep_files(5, (notes,))

    part = conversation.llm_history[0].parts[0]
    assert isinstance(part, UserPromptPart) and not isinstance(part.content, str)
    text = "\n".join(item for item in part.content if isinstance(item, str))
    assert "hunter2" not in text and "secret.log" not in text and "shot.png" not in text
    # The log's element, and the screenshot's element and its image frame.
    assert "still here" in text and text.count(FILE_REMOVED_NOTE) == 3
    assert not any(isinstance(item, BinaryContent) for item in part.content)
    assert [m.attachments for m in conversation.messages] == [(notes,)]


async def test_an_edit_taking_one_of_two_same_named_screenshots_off_keeps_the_other() -> None:
    """Pasted screenshots are all `image.png`: the one removed leaves the history, the one still there stays."""
    files = Files()
    first, second = files.info("image.png", png(), "image/png"), files.info("image.png", png(), "image/png")
    shared = message(5, first, second)
    prepared = await AttachmentPreparer(files.read).prepare([shared], vision=True)
    conversation = ConversationManager().start(CHANNEL, [shared])
    prompt = prepared.user_content(prepared.elements(5))
    conversation.llm_history = [ModelRequest(parts=[UserPromptPart(prompt)]), ModelResponse(parts=[TextPart("ok")])]
    conversation.prompted_through = 5

    assert conversation.keep_files(5, (second,))

    part = conversation.llm_history[0].parts[0]
    assert isinstance(part, UserPromptPart) and not isinstance(part.content, str)
    images = [item for item in part.content if isinstance(item, BinaryContent)]
    assert [image.identifier for image in images] == [f"attachment-{second.attachment_id}"]
    text = "\n".join(item for item in part.content if isinstance(item, str))
    # The first screenshot's element and its frame say it is gone; the second's still name it.
    assert text.count(FILE_REMOVED_NOTE) == 2 and text.count('filename="image.png"') == 2


def test_a_file_removed_while_an_answer_was_written_stays_out_of_its_history() -> None:
    """The history an answer brings back, begun before the edit, is stored without the removed file."""
    gone = AttachmentInfo(9, "dump.txt", "text/plain", 10)
    manager = ConversationManager()
    conversation = manager.start(CHANNEL, [message(5, gone)])
    conversation.prompted_through = 5
    element = '<attachment filename="dump.txt" type="text" size="10 B" message_id="5">token=abc123</attachment>'
    written: list[ModelMessage] = [ModelRequest(parts=[UserPromptPart(element)]), ModelResponse(parts=[TextPart("ok")])]
    assert conversation.keep_files(5, ())
    manager.record_bot_response(CHANNEL, written, 6)
    part = conversation.llm_history[0].parts[0]
    assert isinstance(part, UserPromptPart) and isinstance(part.content, str)
    assert "abc123" not in part.content and "dump.txt" not in part.content and FILE_REMOVED_NOTE in part.content


async def test_an_edit_taking_a_file_off_a_message_drops_it_from_the_archive(archive: Archive) -> None:
    """A file removed by an edit is no longer found by its name or text; the file kept on the message still is."""
    archive.add(
        archived(1, ArchivedAttachment(77, "crash.log", "text/plain", 40), ArchivedAttachment(78, "ok.txt", "", 3))
    )
    archive.set_attachment_text(77, "frobnicator exploded")
    archive.set_attachment_text(78, "gizmo fine")
    await archive.flush()
    archive.keep_attachments(1, [78])
    archive.keep_attachments(2, [])  # a message never archived: nothing happens
    await archive.flush()
    assert await archive.search(CHANNEL, "frobnicator") == []
    assert await archive.search(CHANNEL, "crash") == []
    [found] = await archive.search(CHANNEL, "gizmo")
    assert [a.attachment_id for a in found.attachments] == [78]
    archive.keep_attachments(1, [])
    await archive.flush()
    assert await stored_rows(archive, "SELECT count(*) FROM attachments") == [(0,)]


async def test_recent_messages_carry_their_attachments(archive: Archive) -> None:
    """Context and get_recent_messages read a message's attachments back with it, text included."""
    archive.add(archived(1, ArchivedAttachment(77, "crash.log", "text/plain", 40)))
    archive.add(archived(2))
    archive.set_attachment_text(77, "frobnicator exploded")
    await archive.flush()
    first, second = await archive.recent(CHANNEL)
    assert first.attachments == (ArchivedAttachment(77, "crash.log", "text/plain", 40, "frobnicator exploded"),)
    assert second.attachments == ()


@pytest.mark.parametrize(
    ("variable", "value"), [("vision", "sometimes"), ("max_images", -1), ("image_retain_turns", 0)]
)
def test_a_bad_attachment_setting_is_one_line_naming_it(variable: str, value: Any) -> None:
    """A wrong VISION, MAX_IMAGES or IMAGE_RETAIN_TURNS stops the bot with one line naming the variable."""
    with pytest.raises(ValidationError) as error:
        Settings(_env_file=None, discord_token=SecretStr("t"), **{variable: value})
    line = describe_settings_error(error.value)
    assert line.startswith(f"Configuration error: {variable.upper()} is invalid") and "\n" not in line
