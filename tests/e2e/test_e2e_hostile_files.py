"""End-to-end: files posted to break, starve or silence Parley leave every channel answered (issue 30)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from archive import Archive
from archive.stores import StoreTables
from files.extraction import PDF_MAX_CHARS
from tests.fakes.fake_discord import ALICE_ID, BOB_ID, BOT_ID, CHANNEL_ID, OTHER_CHANNEL_ID, FakeDiscord
from tests.fakes.fake_llm import FakeLLM, image_parts
from tests.support.e2e_support import RunningBot, request_texts, say
from tests.support.hostile_files import bomb_png, broken_png, malformed_pdfs, pdfs_pypdf_chokes_on, shared_stream_pdf


def last_prompt(llm: FakeLLM) -> str:
    return request_texts(llm.requests[-1])[-1]


async def mention_with(fake: FakeDiscord, text: str, *attachments: dict[str, Any]) -> dict[str, Any]:
    return await say(fake, ALICE_ID, f"<@{BOT_ID}> {text}", attachments=attachments)


# Slow: eight damaged PDFs are each read in a worker process within the PDF caps (about 5 s on two cores).
@pytest.mark.slow
async def test_broken_files_posted_without_a_mention_leave_the_channel_answered(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """A png Pillow raises SyntaxError on and PDFs pypdf raises on, posted without a mention, sit in the context of
    the next questions: each is a note there, and both questions are answered."""
    llm.handler = lambda request: "Sure."  # one post an answer, however long the prompt
    await bot.start()
    pdfs = {**malformed_pdfs(), **pdfs_pypdf_chokes_on()}
    files = [
        fake.served_attachment("screenshot.png", broken_png(), "image/png"),
        *(fake.served_attachment(name, data, "application/pdf") for name, data in pdfs.items()),
    ]
    await say(fake, BOB_ID, "the files from yesterday", attachments=files)
    await mention_with(fake, "what is in Bob's files?")
    [first] = await fake.wait_for_posts(1, timeout=30)
    assert first.message["content"] == "Sure."
    prompt = "\n".join(request_texts(llm.requests[-1]))
    assert "image not shown: could not be read as an image (SyntaxError)" in prompt
    assert prompt.count("PDF not read: it is damaged") == 7 and "PDF unreadable: no text layer" in prompt
    assert all(f"it is damaged ({kind})" in prompt for kind in ("AttributeError", "TypeError", "NotImplementedError"))
    assert all(f'filename="{name}"' in prompt for name in ("screenshot.png", *pdfs))
    await mention_with(fake, "and what else?")
    [_, second] = await fake.wait_for_posts(2, timeout=30)
    assert second.message["content"] == "Sure." and len(llm.requests) == 2


# Pillow warns of any image over 89 megapixels as it opens it; Parley refuses it from the header it has just read.
@pytest.mark.filterwarnings("ignore::PIL.Image.DecompressionBombWarning")
async def test_four_decompression_bombs_on_one_mention_are_answered_with_notes(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """Four 20 kB pngs of 13,000 x 13,000 pixels are refused from their headers: the answer comes, with a note each.
    (bench/bench_hostile_files.py measures the process's memory meanwhile.)"""
    await bot.start()
    bomb = bomb_png()
    bombs = [fake.served_attachment(f"b{n}.png", bomb, "image/png") for n in range(4)]
    await mention_with(fake, "what do these show?", *bombs)
    [post] = await fake.wait_for_posts(1, timeout=30)
    assert post.message["content"].startswith("echo:") and image_parts(llm.requests[0]) == []
    assert last_prompt(llm).count("image not shown: too large to open (13000x13000 pixels") == 4


async def attachment_text_lengths(archive: Archive, channel_id: int, count: int) -> list[int]:
    """The length of the text the archive holds for each of `channel_id`'s files, once `count` have some (read from
    the backend's table itself)."""
    assert isinstance(archive, StoreTables)
    async with asyncio.timeout(120):
        while True:
            await archive.flush()
            rows = await archive.read(
                "SELECT length(text) FROM attachments WHERE channel_id = ? AND text != '' ORDER BY attachment_id",
                (channel_id,),
            )
            if len(rows) >= count:
                return [int(row[0]) for row in rows]
            await asyncio.sleep(0.1)


@pytest.mark.slow
async def test_ten_huge_pdfs_elsewhere_leave_answers_coming_and_are_read_within_the_caps(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """Ten 34 kB PDFs of 200 pages (16 million characters each) posted in another channel: a question here is still
    answered, and what is read of each for the archive stops at PDF_MAX_CHARS (the archive's daily budgets for
    file text, which would keep only the first two, are off here)."""
    client = await bot.start(archive_file_text_channel_bytes=0, archive_file_text_member_bytes=0)
    pdf = shared_stream_pdf()
    for n in range(10):
        report = fake.served_attachment(f"report{n}.pdf", pdf, "application/pdf")
        await fake.send_user_message(OTHER_CHANNEL_ID, BOB_ID, f"report {n}", attachments=[report])
    await mention_with(fake, "quick question")
    [post] = await fake.wait_for_posts(1, CHANNEL_ID, timeout=30)
    assert post.message["content"].startswith("echo:")
    assert client.archive is not None
    assert await attachment_text_lengths(client.archive, OTHER_CHANNEL_ID, 10) == [PDF_MAX_CHARS] * 10
