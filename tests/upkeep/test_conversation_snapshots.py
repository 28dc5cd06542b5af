"""Conversations kept beyond the process: snapshots (upkeep/conversation_snapshots.py), their archive rows, and the
manager's adoption."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from freezegun import freeze_time
from pydantic_ai.framing import wrap
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart

from archive import Archive
from archive.backends import open_archive
from archive.sqlite import ArchivedMessage, StoredConversation
from conversation import ChannelConversation, ConversationManager
from deciding.decider import ResponseDecider
from deciding.followup import FEATURES, features
from prompting.context import summary_turn
from prompting.quoting import MESSAGE_TAG
from records import AttachmentInfo, MessageRecord
from upkeep.conversation_snapshots import restore, snapshot

BOT, ALICE, CHANNEL, GUILD = 1, 10, 500, 7
T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def record(message_id: int, content: str, *, author_id: int = ALICE, **fields: object) -> MessageRecord:
    return MessageRecord(
        message_id=message_id,
        channel_id=CHANNEL,
        author_id=author_id,
        author="alice" if author_id == ALICE else "Parley",
        content=content,
        timestamp=T0,
        is_bot=author_id == BOT,
        **fields,  # type: ignore[arg-type]
    )


def answered_conversation(manager: ConversationManager) -> ChannelConversation:
    """Alice asks the bot (message 100), the bot answers her (101)."""
    conversation = manager.start(CHANNEL)
    question = record(100, "my secret plan", mention_ids=frozenset({BOT}))
    manager.record_message(CHANNEL, question)
    prompt = wrap(MESSAGE_TAG, question.content, message_id="100")
    manager.record_bot_response(
        CHANNEL, [ModelRequest(parts=[UserPromptPart(prompt)]), ModelResponse(parts=[TextPart("ok")])], 100
    )
    manager.record_message(CHANNEL, record(101, "ok", author_id=BOT, reply_to_author_id=ALICE))
    return conversation


@freeze_time(T0)
async def test_restored_conversation_decides_like_the_original() -> None:
    """A snapshot restored in a new manager answers the same follow-up the original would."""
    conversation = answered_conversation(ConversationManager())
    fresh = ConversationManager()
    assert fresh.adopt(restore(snapshot(conversation)))
    resumed = fresh.get(CHANNEL)
    assert resumed is not None and resumed.llm_history == conversation.llm_history
    followup = record(102, "and then?")
    fresh.record_message(CHANNEL, followup)
    assert await ResponseDecider().should_respond(followup, resumed, BOT) == (True, "followup")


@freeze_time(T0)
def test_snapshot_keeps_no_text_of_a_deleted_message() -> None:
    """After a deletion, the message's text is in no part of the stored snapshot."""
    conversation = answered_conversation(ConversationManager())
    conversation.delete(100)
    assert "secret plan" not in snapshot(conversation)


@freeze_time(T0)
def test_a_file_taken_off_a_message_stays_out_after_a_restart() -> None:
    """A restored conversation keeps a removed file out of an answer that was being written before the restart."""
    manager = ConversationManager()
    conversation = manager.start(CHANNEL)
    manager.record_message(CHANNEL, record(100, "see file", attachments=(AttachmentInfo(7, "plan.txt"),)))
    assert conversation.keep_files(100, ())
    fresh = ConversationManager()
    assert fresh.adopt(restore(snapshot(conversation)))
    element = '<attachment filename="plan.txt" type="text" size="9 B" message_id="100">secret plan</attachment>'
    fresh.record_bot_response(CHANNEL, [ModelRequest(parts=[UserPromptPart(element)])], 100)
    resumed = fresh.get(CHANNEL)
    assert resumed is not None and "secret plan" not in str(resumed.llm_history)


def test_adopt_refuses_a_conversation_that_timed_out() -> None:
    """A kept conversation idle past the timeout is not taken up again."""
    with freeze_time(T0):
        conversation = answered_conversation(ConversationManager(timeout_seconds=60))
    with freeze_time(T0 + timedelta(seconds=61)):
        assert not ConversationManager(timeout_seconds=60).adopt(restore(snapshot(conversation)))


def test_manager_reports_timed_out_and_ended_conversations() -> None:
    """The end listener hears a timeout as expired and an explicit end as not."""
    ended: list[tuple[int, bool]] = []

    def on_end(conversation: ChannelConversation, expired: bool) -> None:
        ended.append((conversation.channel_id, expired))

    with freeze_time(T0) as clock:
        manager = ConversationManager(timeout_seconds=60, on_end=on_end)
        manager.start(CHANNEL)
        manager.start(CHANNEL + 1)
        manager.end(CHANNEL + 1)
        clock.tick(61)
        assert manager.get(CHANNEL) is None
    assert ended == [(CHANNEL + 1, False), (CHANNEL, True)]


def state(text: str) -> StoredConversation:
    return StoredConversation(T0, text)


async def archive_with_channel(archive_url: str) -> Archive:
    archive = await open_archive(archive_url, retention_days=0)
    archive.add(ArchivedMessage(1, GUILD, CHANNEL, ALICE, "alice", "hi", T0, False))
    return archive


async def test_archive_keeps_only_the_latest_state(archive_url: str) -> None:
    """Several saves before a commit store the state as it is at the commit; a drop removes it."""
    archive = await archive_with_channel(archive_url)
    try:
        archive.save_conversation(CHANNEL, lambda: state("first"))
        archive.save_conversation(CHANNEL, lambda: state("second"))
        await archive.flush()
        assert await archive.stored_conversations() == {CHANNEL: state("second")}
        archive.drop_conversation(CHANNEL)
        await archive.flush()
        assert await archive.stored_conversations() == {}
    finally:
        await archive.close()


@pytest.mark.parametrize("deletion", ["channel", "guild"])
async def test_channel_or_guild_deletion_removes_conversations_and_summaries(archive_url: str, deletion: str) -> None:
    """Deleting the channel or leaving the server removes its kept conversation and summaries."""
    archive = await archive_with_channel(archive_url)
    try:
        archive.save_conversation(CHANNEL, lambda: state("live"))
        archive.add_summary(CHANNEL, "they talked", T0, (1, 1))
        await archive.flush()
        assert await archive.summaries(CHANNEL) != []
        if deletion == "channel":
            archive.delete_channel(CHANNEL)
        else:
            archive.delete_guild(GUILD)
        await archive.flush()
        assert await archive.stored_conversations() == {}
        assert await archive.summaries(CHANNEL) == []
    finally:
        await archive.close()


async def test_retention_prunes_old_summaries(archive_url: str) -> None:
    """Summaries older than HISTORY_RETENTION_DAYS are pruned; newer ones stay, newest first."""
    archive = await open_archive(archive_url, retention_days=30)
    try:
        archive.add_summary(CHANNEL, "old", T0 - timedelta(days=31), (0, 0))
        archive.add_summary(CHANNEL, "recent", T0 - timedelta(days=2), (0, 0))
        archive.add_summary(CHANNEL, "latest", T0 - timedelta(days=1), (0, 0))
        await archive.prune(now=T0)
        assert [s.summary for s in await archive.summaries(CHANNEL)] == ["latest", "recent"]
    finally:
        await archive.close()


async def test_deleting_a_summarised_message_deletes_the_summary(archive_url: str) -> None:
    """A kept summary written from a message that is then deleted is deleted too; others stay."""
    archive = await archive_with_channel(archive_url)
    try:
        archive.add(ArchivedMessage(5, GUILD, CHANNEL, ALICE, "alice", "my secret", T0, False))
        archive.add_summary(CHANNEL, "covers 1 to 5", T0, (1, 5))
        archive.add_summary(CHANNEL, "covers 6 to 9", T0 + timedelta(minutes=1), (6, 9))
        await archive.flush()
        archive.delete([5])
        await archive.flush()
        assert [s.summary for s in await archive.summaries(CHANNEL)] == ["covers 6 to 9"]
    finally:
        await archive.close()


@freeze_time(T0)
def test_deleting_a_summarised_message_drops_the_summary_from_the_history() -> None:
    """A summary in the model history written from a message deleted later is dropped with it."""
    conversation = answered_conversation(ConversationManager())
    conversation.llm_history = [summary_turn("alice's secret plan", (90, 100)), *conversation.llm_history]
    conversation.delete(100)
    assert "secret plan" not in snapshot(conversation)


@freeze_time(T0)
def test_snapshot_keeps_how_often_the_bot_named_each_person() -> None:
    """The learned tier's count of bot turns naming Alice survives a restore; a snapshot without it falls back."""
    conversation = answered_conversation(ConversationManager())
    assert restore(snapshot(conversation)).bot_namings == {ALICE: 1}
    older = json.loads(snapshot(conversation))
    del older["bot_namings"]
    restored = restore(json.dumps(older))
    question = record(102, "and then?")
    values = dict(zip(FEATURES, features(question, restored, BOT, T0, "followup"), strict=True))
    assert restored.bot_namings == {} and values["bot_turns_naming_author_all"] == 1
