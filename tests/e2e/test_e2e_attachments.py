"""End-to-end: what members share (images, text files, logs) reaches the model, bounded, never silently (issue 20)."""

from __future__ import annotations

import asyncio
import io
from datetime import timedelta
from typing import Any

from PIL import Image

from tests.fakes.fake_discord import ALICE_ID, BOB_ID, BOT_ID, CHANNEL_ID, FakeDiscord
from tests.fakes.fake_llm import FakeLLM, ToolCall, image_parts, replies
from tests.support.e2e_support import RunningBot, request_texts, say


def png(width: int = 64, height: int = 48, color: tuple[int, int, int] = (200, 30, 30)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), color).save(out, format="PNG")
    return out.getvalue()


def last_prompt(llm: FakeLLM) -> str:
    return request_texts(llm.requests[-1])[-1]


async def mention_with(fake: FakeDiscord, text: str, *attachments: dict[str, Any]) -> dict[str, Any]:
    return await say(fake, ALICE_ID, f"<@{BOT_ID}> {text}".strip(), attachments=attachments)


async def test_a_png_reaches_the_model_as_image_content(bot: RunningBot, fake: FakeDiscord, llm: FakeLLM) -> None:
    """An @mention with a screenshot sends the model the image itself, framed with the file's name."""
    await bot.start()
    await mention_with(fake, "what's wrong here?", fake.served_attachment("screenshot.png", png(), "image/png"))
    await fake.wait_for_posts(1)
    [image] = image_parts(llm.requests[0])
    assert image["image_url"]["url"].startswith("data:image/png;base64,")
    assert 'filename="screenshot.png"' in last_prompt(llm)


async def test_with_vision_off_the_request_names_the_image_instead(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """VISION=off: no image is sent or even downloaded; the prompt says which file was not shown."""
    await bot.start(vision="off")
    await mention_with(fake, "look", fake.served_attachment("screenshot.png", png(), "image/png"))
    await fake.wait_for_posts(1)
    assert image_parts(llm.requests[0]) == [] and fake.cdn_requests == []
    prompt = last_prompt(llm)
    assert 'filename="screenshot.png"' in prompt and "image not shown" in prompt


async def test_a_model_that_refuses_images_is_asked_again_without_them(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """A provider's "image input not supported" gets the member an answer without images, and no images after."""
    llm.refuse_images = 1
    await bot.start()
    await mention_with(fake, "what is this?", fake.served_attachment("photo.png", png(), "image/png"))
    [post] = await fake.wait_for_posts(1)
    assert post.message["content"].startswith("echo:")
    assert llm.image_refusals == 1 and image_parts(llm.requests[-1]) == []
    assert "this model takes no images" in last_prompt(llm)
    await mention_with(fake, "and this?", fake.served_attachment("second.png", png(), "image/png"))
    await fake.wait_for_posts(2)
    assert image_parts(llm.requests[-1]) == [] and llm.image_refusals == 1


async def test_a_long_paste_arrives_as_quoted_text(bot: RunningBot, fake: FakeDiscord, llm: FakeLLM) -> None:
    """Discord's message.txt of 5,000 characters reaches the model whole, inside an <attachment> frame."""
    paste = "x" * 4980 + " END-OF-PASTE"
    await bot.start()
    await mention_with(fake, "", fake.served_attachment("message.txt", paste.encode(), "text/plain; charset=utf-8"))
    await fake.wait_for_posts(1)
    prompt = last_prompt(llm)
    frame = prompt[prompt.index('<attachment filename="message.txt"') :]
    assert paste in frame and frame.index(paste) < frame.index("</attachment>")


async def test_a_large_log_is_cut_at_the_cap_and_the_cut_is_said(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """A 300 kB log is cut to MAX_ATTACHMENT_CHARS, and the prompt says where and how much."""
    log_text = ("2026-01-01 INFO all good\n" * 12_000)[:299_990] + "\nTAIL-LINE"
    await bot.start()
    await mention_with(fake, "why did it crash?", fake.served_attachment("server.log", log_text.encode()))
    await fake.wait_for_posts(1)
    prompt = last_prompt(llm)
    assert "TAIL-LINE" not in prompt
    assert "cut: the first 100,000 of 300,000 characters" in prompt


async def test_six_images_send_max_images(bot: RunningBot, fake: FakeDiscord, llm: FakeLLM) -> None:
    """Six images in one message send MAX_IMAGES (4) and name the two left out."""
    await bot.start()
    files = [fake.served_attachment(f"shot{n}.png", png(color=(n * 40, 0, 0)), "image/png") for n in range(6)]
    await mention_with(fake, "compare these", *files)
    await fake.wait_for_posts(1)
    assert len(image_parts(llm.requests[0])) == 4
    assert last_prompt(llm).count("over 4 images a request") == 2


async def test_an_image_four_turns_old_is_a_placeholder(bot: RunningBot, fake: FakeDiscord, llm: FakeLLM) -> None:
    """With IMAGE_RETAIN_TURNS=3 an image is sent in its turn and the two after; in the fourth it is a placeholder."""
    await bot.start()
    await mention_with(fake, "see this", fake.served_attachment("diagram.png", png(), "image/png"))
    await fake.wait_for_posts(1)
    for turn in range(2, 5):
        await mention_with(fake, f"question {turn}")
        await fake.wait_for_posts(turn)
    assert [len(image_parts(request)) for request in llm.requests] == [1, 1, 1, 0]
    history = "\n".join(request_texts(llm.requests[3]))
    assert "(image no longer shown: sent 3 turns ago)" in history and 'filename="diagram.png"' in history


async def test_a_failing_download_still_gets_an_answer_and_a_note(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """A file the CDN fails to serve becomes a note in the prompt; the member still gets an answer."""
    await bot.start()
    await mention_with(fake, "read this", fake.served_attachment("notes.txt", b"hello", "text/plain", fail=True))
    [post] = await fake.wait_for_posts(1)
    assert post.message["content"].startswith("echo:")
    assert 'filename="notes.txt"' in last_prompt(llm) and "could not be downloaded" in last_prompt(llm)


async def test_a_deleted_messages_attachment_text_is_gone_from_search(
    bot: RunningBot, fake: FakeDiscord, archive_url: str
) -> None:
    """The archive (either backend) finds a pasted log by its text until the message is deleted, then not at all."""
    client = await bot.start(database_url=archive_url)
    log_text = b"worker 3: frobnicator exploded at step 12\n"
    message = await say(fake, ALICE_ID, "here is the log", attachments=[fake.served_attachment("crash.log", log_text)])
    archive = client.archive
    assert archive is not None

    async def search_finds(expected: list[int]) -> None:
        async with asyncio.timeout(5):
            while True:
                await archive.flush()
                if [m.message_id for m in await archive.search(CHANNEL_ID, "frobnicator exploded")] == expected:
                    return
                await asyncio.sleep(0.02)

    await search_finds([int(message["id"])])
    await fake.delete_messages(CHANNEL_ID, int(message["id"]))
    await search_finds([])


async def test_a_voice_note_is_transcribed_with_a_transcription_model(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """With TRANSCRIPTION_MODEL set, a voice note reaches the model as its transcript."""
    llm.transcript = "the build is green again"
    await bot.start(transcription_model="whisper-1")
    voice = fake.served_attachment("voice-message.ogg", b"OggS" + bytes(200), "audio/ogg")
    await mention_with(fake, "", voice)
    await fake.wait_for_posts(1)
    assert llm.transcriptions == [("whisper-1", "voice-message.ogg")]
    assert "the build is green again" in last_prompt(llm)


async def test_without_a_transcription_model_the_model_is_told_of_the_voice_note(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """Without TRANSCRIPTION_MODEL, the prompt says a voice note was there, and nothing is downloaded."""
    await bot.start()
    await mention_with(fake, "", fake.served_attachment("voice-message.ogg", b"OggS" + bytes(200), "audio/ogg"))
    await fake.wait_for_posts(1)
    assert "voice note" in last_prompt(llm) and fake.cdn_requests == [] and llm.transcriptions == []


async def test_a_screenshot_posted_before_the_question_reaches_the_model(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """A conversation's context loaded from the archive keeps its attachments: the screenshot just before is sent."""
    client = await bot.start()
    client.coverage.watching_since -= timedelta(hours=2)  # the archive covers the period: context comes from it
    await say(fake, BOB_ID, "the dashboard now", attachments=[fake.served_attachment("dash.png", png(), "image/png")])
    await mention_with(fake, "what does bob's screenshot show?")
    await fake.wait_for_posts(1)
    assert len(image_parts(llm.requests[0])) == 1 and 'filename="dash.png"' in last_prompt(llm)


async def test_a_file_removed_by_an_edit_is_gone_from_the_next_request_and_from_search(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """Bob takes his pasted config off his message: the next request and a search no longer have it; his text stays."""
    llm.handler = lambda request: "Noted."  # not an echo: the model's own words are not rewritten
    await bot.start()
    secret = fake.served_attachment("config.txt", b"api_key=sk-live-123", "text/plain")
    kept = fake.served_attachment("notes.txt", b"deploy on friday", "text/plain")
    shared = await say(fake, BOB_ID, "my config and notes", attachments=[secret, kept])
    await mention_with(fake, "what do you make of Bob's files?")
    await fake.wait_for_posts(1)
    assert "sk-live-123" in "\n".join(request_texts(llm.requests[0]))
    await fake.edit_user_message(CHANNEL_ID, int(shared["id"]), "my config and notes", attachments=[kept])
    llm.handler = replies(ToolCall("search_history", {"query": "api_key"}), "Gone.")
    await mention_with(fake, "and now?")
    await fake.wait_for_posts(2)
    asked, answered = (request_texts(request) for request in llm.requests[-2:])
    assert not any("sk-live-123" in text or "config.txt" in text for text in asked + answered)
    assert any("deploy on friday" in text for text in asked) and any("my config and notes" in t for t in asked)
    assert "No messages found." in answered[-1]
