"""The archive's contract for text read from members' files, on both backends: sanitised, and within budgets."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest

from archive import Archive, ArchivedAttachment, ArchivedMessage, open_archive

WHEN = datetime(2025, 1, 15, 12, 0, tzinfo=UTC)
GUILD = 5
CHANNEL = 1
SAM = 2


@pytest.fixture
async def archive(archive_url: str) -> AsyncIterator[Archive]:
    """An empty archive on each backend in turn, without file text budgets."""
    archive = await open_archive(archive_url, retention_days=0)
    yield archive
    await archive.close()


def shared(
    message_id: int, *attachments: ArchivedAttachment, channel: int = CHANNEL, author_id: int = SAM
) -> ArchivedMessage:
    """A message of `author_id` in `channel` sharing `attachments`."""
    return ArchivedMessage(
        message_id, GUILD, channel, author_id, "sam", "here is the log", WHEN, False, attachments=attachments
    )


def log_file(attachment_id: int) -> ArchivedAttachment:
    return ArchivedAttachment(attachment_id, f"run{attachment_id}.log", "text/plain", 40)


async def stored_text(archive: Archive, message_id: int) -> str:
    """The text the archive holds for the single attachment of message `message_id`."""
    [message] = [m for m in await archive.recent(CHANNEL) if m.message_id == message_id]
    [attachment] = message.attachments
    return attachment.text


async def test_nul_in_file_text_is_stored_and_searchable(archive: Archive) -> None:
    """A NUL anywhere in a file's text (past any sniffed head) is dropped, as in message text: the rest is stored
    whole and every word of it, before and after the NUL, finds the file."""
    archive.add(shared(1, log_file(77)))
    archive.set_attachment_text(77, "head frobnicator\x00 exploded at step 12\x00\x00 tail")
    await archive.flush()
    assert await stored_text(archive, 1) == "head frobnicator exploded at step 12 tail"
    for word in ("frobnicator", "exploded", "tail"):
        assert [m.message_id for m in await archive.search(CHANNEL, word)] == [1], word


async def test_lone_surrogate_in_file_text_is_stored_as_a_replacement_character(archive: Archive) -> None:
    """A lone surrogate (which UTF-8 cannot encode) becomes U+FFFD, and the file's text is still stored."""
    archive.add(shared(1, log_file(77)))
    archive.set_attachment_text(77, "gizmo \ud800broke")
    await archive.flush()
    assert await stored_text(archive, 1) == "gizmo \ufffdbroke"
    assert [m.message_id for m in await archive.search(CHANNEL, "gizmo")] == [1]
