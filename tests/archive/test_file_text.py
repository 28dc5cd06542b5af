"""The archive's contract for text read from members' files, on both backends: sanitised, and within budgets."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import discord
import pytest

from archive import Archive, ArchivedAttachment, ArchivedMessage
from archive.backends import open_archive
from archive.file_text import CHANNEL_OVER, MEMBER_OVER, FileTextBudget
from archive.stores import StoreTables
from bot import build_client
from ops.resources import open_resources
from prompting.quoting import format_messages

WHEN = datetime(2025, 1, 15, 12, 0, tzinfo=UTC)
GUILD = 5
CHANNEL = 1
OTHER_CHANNEL = 3
SAM = 2
ALEX = 4
NEXT_DAY = WHEN + timedelta(days=1)


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


# --- Budgets --------------------------------------------------------------------------------------


def file_on(moment: datetime, number: int) -> ArchivedAttachment:
    """A text file uploaded at `moment`: Discord attachment ids are snowflakes of their upload time."""
    return ArchivedAttachment(discord.utils.time_snowflake(moment) + number, f"run{number}.log", "text/plain", 40)


@pytest.fixture
async def budgeted(archive_url: str) -> AsyncIterator[Archive]:
    """An empty archive on each backend in turn keeping 100 bytes of file text a day per channel, 60 per member."""
    budget = FileTextBudget(channel_bytes=100, member_bytes=60)
    archive = await open_archive(archive_url, retention_days=0, file_text_budget=budget)
    yield archive
    await archive.close()


async def share_text(
    archive: Archive, message_id: int, text: str, *, channel: int = CHANNEL, author_id: int = SAM, when: datetime = WHEN
) -> ArchivedAttachment:
    """A message with one file whose text is `text`, archived; returns the file."""
    attachment = file_on(when, message_id)
    archive.add(shared(message_id, attachment, channel=channel, author_id=author_id))
    archive.set_attachment_text(attachment.attachment_id, text)
    await archive.flush()
    return attachment


async def kept_texts(archive: Archive) -> dict[int, str]:
    """Each archived message's file text, by message id, across channels (the backend's table itself)."""
    assert isinstance(archive, StoreTables)
    rows = await archive.read("SELECT message_id, text FROM attachments ORDER BY message_id")
    return {int(message_id): str(text) for message_id, text in rows}


async def test_file_text_within_both_budgets_is_kept_whole(budgeted: Archive) -> None:
    """Files whose text fits the channel's and their senders' budgets (exactly, in UTF-8 bytes) are kept and found."""
    await share_text(budgeted, 1, "frobnicator " + "a" * 48)  # 60 bytes: all of Sam's budget
    await share_text(budgeted, 2, "gizmo é" + "b" * 31, author_id=ALEX)  # 40 bytes: the channel's 100 reached
    assert await kept_texts(budgeted) == {1: "frobnicator " + "a" * 48, 2: "gizmo é" + "b" * 31}
    assert [m.message_id for m in await budgeted.search(CHANNEL, "frobnicator")] == [1]


async def test_file_text_over_the_members_budget_is_noted_not_kept(
    budgeted: Archive, caplog: pytest.LogCaptureFixture
) -> None:
    """Past a member's daily bytes, in any channel, a file keeps its name and a note instead of its text; the log
    says why once, however many files follow; others' files are kept."""
    await share_text(budgeted, 1, "a" * 50)
    with caplog.at_level(logging.WARNING, logger="archive.file_text"):
        await share_text(budgeted, 2, "frobnicator exploded", channel=OTHER_CHANNEL)  # 50 + 20 > 60
        await share_text(budgeted, 3, "gizmo broke")  # 50 + 11 > 60
    await share_text(budgeted, 4, "widget fine", author_id=ALEX)
    assert await kept_texts(budgeted) == {1: "a" * 50, 2: MEMBER_OVER, 3: MEMBER_OVER, 4: "widget fine"}
    assert await budgeted.search(OTHER_CHANNEL, "frobnicator") == []
    [found] = await budgeted.search(OTHER_CHANNEL, "run2")
    assert "[attached run2.log: (text not archived:" in format_messages([found])
    [line] = [record.getMessage() for record in caplog.records]
    assert f"member {SAM} is over its daily budget of 60 bytes" in line
    assert "ARCHIVE_FILE_TEXT_MEMBER_BYTES" in line


async def test_file_text_over_the_channels_budget_is_noted_not_kept(
    budgeted: Archive, caplog: pytest.LogCaptureFixture
) -> None:
    """Past a channel's daily bytes, a file's text is not kept, whoever sent it; another channel's still is."""
    await share_text(budgeted, 1, "a" * 55)
    await share_text(budgeted, 2, "b" * 40, author_id=ALEX)  # 95 in the channel
    with caplog.at_level(logging.WARNING, logger="archive.file_text"):
        await share_text(budgeted, 3, "frobnicator", author_id=5)  # 95 + 11 > 100
    await share_text(budgeted, 4, "gizmo broke", author_id=6, channel=OTHER_CHANNEL)
    assert await kept_texts(budgeted) == {1: "a" * 55, 2: "b" * 40, 3: CHANNEL_OVER, 4: "gizmo broke"}
    [line] = [record.getMessage() for record in caplog.records]
    assert f"channel {CHANNEL} is over its daily budget of 100 bytes" in line


async def test_the_budgets_start_again_each_utc_day(budgeted: Archive) -> None:
    """A day's budget counts the files posted that UTC day, whenever they are archived (catch-up comes late)."""
    await share_text(budgeted, 1, "a" * 60)
    await share_text(budgeted, 2, "frobnicator", when=NEXT_DAY)
    await share_text(budgeted, 3, "gizmo", when=WHEN - timedelta(days=1))
    await share_text(budgeted, 4, "widget", when=WHEN)
    assert await kept_texts(budgeted) == {1: "a" * 60, 2: "frobnicator", 3: "gizmo", 4: MEMBER_OVER}


async def test_storing_a_files_text_again_counts_it_once(budgeted: Archive) -> None:
    """Catch-up or a transcript storing an attachment's text again does not count its earlier text against it."""
    attachment = await share_text(budgeted, 1, "a" * 50)
    budgeted.set_attachment_text(attachment.attachment_id, "b" * 55)
    await budgeted.flush()
    assert await kept_texts(budgeted) == {1: "b" * 55}


async def test_a_zero_budget_is_no_limit(archive_url: str) -> None:
    """0, as for the server token budget, means no limit."""
    archive = await open_archive(archive_url, retention_days=0, file_text_budget=FileTextBudget(0, 0))
    try:
        await share_text(archive, 1, "a" * 100_000)
        await share_text(archive, 2, "frobnicator " * 10_000)
        assert [len(text) for text in (await kept_texts(archive)).values()] == [100_000, 120_000]
    finally:
        await archive.close()


async def test_the_bot_opens_its_archive_with_the_budgets_its_settings_give(make_settings, tmp_path: Path) -> None:
    """ARCHIVE_FILE_TEXT_MEMBER_BYTES and ..._CHANNEL_BYTES are the budgets of the archive the bot opens."""
    settings = make_settings(
        llm_base_url="http://127.0.0.1:9/v1",
        database_url=f"sqlite:///{tmp_path / 'parley.db'}",
        archive_file_text_channel_bytes=100,
        archive_file_text_member_bytes=60,
    )
    async with open_resources(settings) as resources:
        archive = build_client(settings, resources).archive
        await share_text(archive, 1, "a" * 50)
        await share_text(archive, 2, "b" * 40, author_id=ALEX)
        await share_text(archive, 3, "c" * 20)
        await share_text(archive, 4, "d" * 20, author_id=5)
        assert await kept_texts(archive) == {1: "a" * 50, 2: "b" * 40, 3: MEMBER_OVER, 4: CHANNEL_OVER}
