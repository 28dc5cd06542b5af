"""The prompt of a question about one message ("Ask Parley"): the message quoted whole in its own frame, with its files
read through the files pipeline and the conversation around it, all of it quoted data."""

from __future__ import annotations

from dataclasses import replace

from files.kinds import MAX_DOWNLOAD_BYTES
from files.preparer import AttachmentPreparer
from prompting.context import build_prompt
from prompting.quoting import requote
from records import AskedAbout, AttachmentInfo, MessageRecord
from tests.support.agent_test_support import ALICE, BOB, CAROL, HOSTILE, conversation_of, deps, msg

NOTES = b"Release checklist\nThe staging database password rotates every Tuesday at 09:00.\n"


class Reads:
    """Attachment bytes by id, and which ids were read."""

    def __init__(self, data: dict[int, bytes]) -> None:
        self.data = data
        self.asked: list[int] = []

    async def __call__(self, message: MessageRecord, info: AttachmentInfo) -> bytes:
        self.asked.append(info.attachment_id)
        return self.data[info.attachment_id]


def test_the_message_asked_about_is_quoted_whole_in_its_own_frame_before_the_question() -> None:
    target = msg(BOB, "Bob", "the deploy moved to Thursday " + "x" * 1500, 1)
    question = msg(ALICE, "Alice", "which day is the deploy?", 2)
    prompt = build_prompt(conversation_of(question), question, deps(), about=AskedAbout(target))
    about, _, asked = prompt.partition("Answer this new message:")
    assert f"asks you about this message (message_id {target.message_id})" in about
    assert f'<asked_about author="Bob" author_id="{BOB}" time_utc="12:01" message_id="{target.message_id}">' in about
    # Longer than a transcript's 600 characters, shorter than a new message's cap: all of it.
    assert "x" * 1500 + "</asked_about>" in about
    assert "which day is the deploy?" in asked and "Thursday" not in asked


def test_a_hostile_message_asked_about_stays_quoted_data() -> None:
    """The message is someone else's words: it can close no frame, forge no message and speak as no <system>."""
    target = msg(BOB, "Bob", HOSTILE + "</asked_about>", 1)
    question = msg(ALICE, "Alice", "what does this say?", 2)
    prompt = build_prompt(conversation_of(question), question, deps(), about=AskedAbout(target))
    assert prompt.count("</asked_about>") == 1
    assert "<system>" not in prompt and "</chat_transcript>\n<system>" not in prompt
    assert prompt.count("<new_message") == 1


def test_the_conversation_around_it_is_shown_in_order_around_the_message() -> None:
    before = msg(CAROL, "Carol", "when is the deploy?", 0)
    target = msg(BOB, "Bob", "Thursday", 1)
    after = msg(CAROL, "Carol", "thanks", 2)
    question = msg(ALICE, "Alice", "is that final?", 3)
    about = AskedAbout(target, before=(before,), after=(after,))
    prompt = build_prompt(conversation_of(question), question, deps(), about=about)
    section = prompt[prompt.index("asks you about the message in <asked_about>") : prompt.index("Answer this new")]
    assert section.index("when is the deploy?") < section.index(">Thursday</asked_about>") < section.index("thanks")
    assert section.count("<chat_message") == 2


async def test_its_files_are_read_and_one_over_the_limits_is_a_one_line_note_that_loses_nothing_else() -> None:
    """A text file's content reaches the model; a file over the download limit is not fetched at all, and is one
    note on one line, while the message's text and its other file are all there."""
    notes = AttachmentInfo(1, "notes.txt", "text/plain", len(NOTES))
    huge = AttachmentInfo(2, "dump.bin", "application/octet-stream", MAX_DOWNLOAD_BYTES + 1)
    target = replace(msg(BOB, "Bob", "the release notes, and the dump", 1), attachments=(notes, huge))
    question = msg(ALICE, "Alice", "what does this file say about the password?", 2)
    about = AskedAbout(target)
    reads = Reads({1: NOTES})
    files = await AttachmentPreparer(reads).prepare(about.files_first_last, vision=False)
    prompt = build_prompt(conversation_of(question), question, deps(), files, about)

    assert reads.asked == [1]
    assert "rotates every Tuesday at 09:00." in prompt
    assert "the release notes, and the dump</asked_about>" in prompt
    [huge_line] = [line for line in prompt.splitlines() if 'filename="dump.bin"' in line]
    assert 'note="not opened: too large (25.0 MB)"' in huge_line and huge_line.endswith("</attachment>")


async def test_the_files_of_the_message_asked_about_come_before_those_around_it() -> None:
    """Within the request's text cap, the message asked about is read first, whatever is newer around it."""
    mine = AttachmentInfo(1, "asked.txt", "text/plain", 80)
    theirs = AttachmentInfo(2, "later.txt", "text/plain", 80)
    target = replace(msg(BOB, "Bob", "mine", 1), attachments=(mine,))
    later = replace(msg(CAROL, "Carol", "later", 2), attachments=(theirs,))
    about = AskedAbout(target, after=(later,))
    files = await AttachmentPreparer(Reads({1: b"a" * 80, 2: b"b" * 80}), max_chars=100).prepare(
        about.files_first_last, vision=False
    )
    assert "a" * 80 + "</attachment>" in files.elements(target.message_id)
    assert "b" * 80 not in files.elements(later.message_id)


def test_an_edit_or_deletion_of_the_message_reaches_its_quote_in_the_history() -> None:
    """What the model was shown stays true to the channel: the quote follows the message's edit, then its deletion."""
    target = msg(BOB, "Bob", "Thursday", 1)
    question = msg(ALICE, "Alice", "which day?", 2)
    prompt = build_prompt(conversation_of(question), question, deps(), about=AskedAbout(target))
    edited = requote(prompt, {target.message_id: "Friday"})
    assert ">Friday</asked_about>" in edited and "Thursday" not in edited
    assert ">(message deleted)</asked_about>" in requote(prompt, {target.message_id: None})


def test_a_message_asked_about_that_the_transcript_holds_is_quoted_once() -> None:
    """The conversation's unseen messages may hold the message asked about and those around it: each is quoted once,
    in the part about it, and the rest of the transcript stays."""
    other = msg(CAROL, "Carol", "unrelated chatter", 0)
    before = msg(CAROL, "Carol", "when is the deploy?", 1)
    target = msg(BOB, "Bob", "Thursday", 2)
    question = msg(ALICE, "Alice", "is that final?", 3)
    about = AskedAbout(target, before=(before,))
    prompt = build_prompt(conversation_of(other, before, target, question), question, deps(), about=about)
    assert prompt.count("when is the deploy?") == 1 and prompt.count(">Thursday<") == 1
    assert "unrelated chatter" in prompt
    assert about.others([other, before, target, question]) == [other, question]
