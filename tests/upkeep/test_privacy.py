"""Members' data rights as units: opt-outs and the placeholder (admission/optout.py), the export and the erasure
(upkeep/privacy.py) on a real SQLite archive."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Collection, Iterable
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter, ModelRequest, UserPromptPart

from admission.optout import OptOuts, VeiledArchive, veil
from archive import (
    Archive,
    ArchivedAttachment,
    ArchivedMessage,
    Feedback,
    Memory,
    Reminder,
    ReminderLimits,
    TokenUsage,
)
from archive.backends import open_archive
from archive.null import NULL_ARCHIVE
from conversation import ConversationManager
from prompting.context import summary_turn
from records import OPTED_OUT_TEXT, MessageRecord
from upkeep.privacy import MemberErasure, export_member
from usage.budget import UsageLedger

GUILD, OTHER_GUILD, CHANNEL, OTHER_CHANNEL = 10, 11, 1, 2
ALICE, BOB = 100, 200
NOW = datetime(2025, 1, 15, 12, 0, tzinfo=UTC)
OPTED_OUT_AT = NOW + timedelta(minutes=1)  # after `fill`'s messages: what she wrote before opting out


def record(message_id: int, author_id: int, content: str, channel: int = CHANNEL) -> MessageRecord:
    return MessageRecord(message_id, channel, author_id, "alice" if author_id == ALICE else "bob", content, NOW)


def archived(message_id: int, author_id: int, content: str, **fields: object) -> ArchivedMessage:
    base = record(message_id, author_id, content)
    return ArchivedMessage(
        message_id, GUILD, base.channel_id, author_id, base.author, content, NOW + timedelta(seconds=message_id),
        is_bot=False, **fields,  # type: ignore[arg-type]
    )  # fmt: skip


@pytest.fixture
async def archive(tmp_path: Path) -> AsyncIterator[Archive]:
    opened = await open_archive(f"sqlite:///{tmp_path / 'parley.db'}", retention_days=0)
    yield opened
    await opened.close()


async def fill(archive: Archive) -> None:
    archive.add(
        archived(1, ALICE, "alice says hello", attachments=(ArchivedAttachment(9, "notes.txt", "text/plain", 5),))
    )
    archive.add(archived(2, BOB, "bob's secret plan"))
    archive.add(archived(3, ALICE, "alice again"))
    archive.set_attachment_text(9, "alice's notes")
    archive.record_usage(TokenUsage(date(2025, 1, 15), GUILD, CHANNEL, ALICE, 30, 20, model="m"))
    archive.record_usage(TokenUsage(date(2025, 1, 15), GUILD, CHANNEL, BOB, 7, 7, model="m"))
    archive.add_summary(CHANNEL, "alice said hello to bob", NOW, (1, 2))
    await archive.flush()
    await archive.add_memory(Memory(1, GUILD, CHANNEL, ALICE, ALICE, 1, "alice likes tea", NOW))
    await archive.add_memory(Memory(2, GUILD, CHANNEL, BOB, BOB, 2, "bob likes coffee", NOW))
    await archive.set_opted_out(GUILD, ALICE, True, now=OPTED_OUT_AT)
    due = NOW + timedelta(days=1)
    room = ReminderLimits(per_member=10, per_server=10)
    await archive.add_reminder(Reminder(1, GUILD, CHANNEL, ALICE, "alice's reminder", due, "daily", False, NOW), room)
    await archive.add_reminder(Reminder(2, GUILD, CHANNEL, BOB, "bob's reminder", due, "", False, NOW), room)
    # Feedback on the support answers to her question and to his (archive/support_feedback.py).
    await archive.offer_feedback(Feedback(1, GUILD, CHANNEL, ALICE, 11, "", NOW))
    await archive.set_feedback(1, ALICE, 11, "solved", now=NOW)
    await archive.offer_feedback(Feedback(2, GUILD, CHANNEL, BOB, 12, "", NOW))


# -- Opt-outs --


async def test_an_opted_out_members_messages_are_veiled_others_are_not() -> None:
    optouts = OptOuts()
    await optouts.set(GUILD, ALICE, True)  # without an archive: kept in memory only
    alice = record(1, ALICE, "my secret")
    bob = record(2, BOB, "hello")
    assert optouts.veiled(GUILD, bob) is bob
    assert optouts.veiled(OTHER_GUILD, alice) is alice  # opting out is per server
    veiled = optouts.veiled(GUILD, alice)
    assert (veiled.content, veiled.author, veiled.author_id, veiled.message_id) == (
        OPTED_OUT_TEXT,
        "a member who opted out",
        0,
        1,
    )
    assert optouts.veil_all(GUILD, [alice, bob]) == [veiled, bob]
    await optouts.set(GUILD, ALICE, False)
    assert optouts.veiled(GUILD, alice) is alice


async def test_opt_outs_are_kept_in_the_archive_and_read_at_start(archive: Archive) -> None:
    first = OptOuts()
    await first.attach(archive)
    await first.set(GUILD, ALICE, True)
    again = OptOuts()
    await again.attach(archive)
    assert again.opted_out(GUILD, ALICE) and not again.opted_out(GUILD, BOB)


async def test_the_tools_read_an_opted_out_members_earlier_messages_as_placeholders(archive: Archive) -> None:
    await fill(archive)
    optouts = OptOuts()
    await optouts.attach(archive)  # Alice opted out after writing
    tools_view = VeiledArchive(archive, optouts, GUILD)
    recent = await tools_view.recent(CHANNEL)
    assert [(m.author_name, m.content) for m in recent] == [
        ("a member who opted out", OPTED_OUT_TEXT),
        ("bob", "bob's secret plan"),
        ("a member who opted out", OPTED_OUT_TEXT),
    ]
    assert recent[0].attachments == () and recent[0].author_id == 0
    top = {(author.author_id, author.name): author.messages for author in (await tools_view.stats(CHANNEL)).top_authors}
    assert top == {(0, "a member who opted out"): 2, (BOB, "bob"): 1}
    # Her words match no search: even a placeholder found by them would tell the searcher they were said.
    assert await tools_view.search(CHANNEL, "hello") == []
    elsewhere = VeiledArchive(archive, optouts, OTHER_GUILD)  # she opted out in GUILD only
    assert [m.content for m in await elsewhere.recent(CHANNEL)][0] == "alice says hello"  # noqa: RUF015


def test_an_edit_does_not_unveil_a_placeholder_in_a_conversation() -> None:
    manager = ConversationManager(clock=lambda: NOW)
    conversation = manager.start(CHANNEL, [veil(record(1, ALICE, "secret")), record(2, BOB, "hi")])
    assert not conversation.edit(1, "secret, edited")
    assert conversation.edit(2, "hi, edited")
    assert [m.content for m in conversation.messages] == [OPTED_OUT_TEXT, "hi, edited"]


# -- Export --


async def test_an_export_holds_the_members_data_and_nothing_of_anyone_else(archive: Archive) -> None:
    await fill(archive)
    export = await export_member(archive, GUILD, ALICE)
    data = json.loads(export.data)
    assert [m["content"] for m in data["messages"]] == ["alice says hello", "alice again"]
    assert data["messages"][0]["attachments"][0]["text"] == "alice's notes"
    assert [f["fact"] for f in data["facts"]] == ["alice likes tea"]
    assert [(u["input_tokens"], u["output_tokens"]) for u in data["usage"]] == [(30, 20)]
    assert [(r["text"], r["every"], r["due_at"]) for r in data["reminders"]] == [
        ("alice's reminder", "daily", (NOW + timedelta(days=1)).isoformat())
    ]
    assert [(f["question_id"], f["verdict"]) for f in data["support_feedback"]] == [("1", "solved")]
    assert data["opted_out"] is True and data["opted_out_since"] == OPTED_OUT_AT.isoformat()
    assert data["messages_left_out"] == 0 and (export.messages, export.cut) == (2, 0)
    assert b"bob" not in export.data and b"coffee" not in export.data


async def test_an_export_stops_at_the_upload_limit_and_says_how_much_it_left_out(archive: Archive) -> None:
    for message_id in range(1, 1201):  # more than one page
        archive.add(archived(message_id, ALICE, f"message number {message_id} " + "x" * 100))
    await archive.flush()
    whole = await export_member(archive, GUILD, ALICE)
    assert whole.cut == 0 and len(json.loads(whole.data)["messages"]) == 1200

    limit = len(whole.data) // 3
    export = await export_member(archive, GUILD, ALICE, limit=limit)
    assert len(export.data) <= limit
    data = json.loads(export.data)
    assert 0 < len(data["messages"]) < 1200
    assert data["messages_left_out"] == export.cut == 1200 - len(data["messages"])
    assert data["messages"][0]["content"].startswith("message number 1 ")  # the oldest first


async def test_an_empty_export_is_valid_json(archive: Archive) -> None:
    data = json.loads((await export_member(archive, GUILD, ALICE)).data)
    assert (data["messages"], data["facts"], data["usage"], data["opted_out"]) == ([], [], [], False)


# -- Erasure --


class Journal:
    def __init__(self) -> None:
        self.forgotten: dict[int, set[int]] = {}
        self.authors: dict[int, set[int]] = {}

    def forget_messages(self, channel_id: int, message_ids: Iterable[int]) -> None:
        self.forgotten.setdefault(channel_id, set()).update(message_ids)

    def forget_author(self, author_id: int, channel_ids: Callable[[int], bool]) -> None:
        self.authors[author_id] = {channel for channel in (CHANNEL, OTHER_CHANNEL) if channel_ids(channel)}


class Ending:
    def __init__(self) -> None:
        self.deleted: dict[int, set[int]] = {}

    def delete_from_ending(self, channel_id: int, message_ids: Collection[int]) -> None:
        self.deleted.setdefault(channel_id, set()).update(message_ids)


class NoPins:
    async def forget_member(self, guild_id: int, member_id: int) -> int:
        return 0


async def test_erasing_clears_the_archive_the_live_conversation_and_its_summaries(archive: Archive) -> None:
    await fill(archive)
    manager = ConversationManager(clock=lambda: NOW)
    conversation = manager.start(CHANNEL, [record(1, ALICE, "alice says hello"), record(2, BOB, "bob's secret plan")])
    manager.record_message(CHANNEL, record(4, ALICE, "alice, not archived yet"))
    quoted = '<chat_message message_id="4" author="alice">alice, not archived yet</chat_message>'
    conversation.llm_history = [summary_turn("alice said hello", (1, 2)), ModelRequest([UserPromptPart(quoted)])]
    elsewhere = manager.start(OTHER_CHANNEL, [record(5, ALICE, "in another server", OTHER_CHANNEL)])
    quoting_her: list[ModelMessage] = [
        ModelRequest([UserPromptPart('<chat_message message_id="3" author="alice">alice again</chat_message>')])
    ]
    others: list[ModelMessage] = [ModelRequest([UserPromptPart("bob only")])]
    for name, saved_history in (("with her", quoting_her), ("without her", others)):
        await archive.save_snapshot(
            channel_id=CHANNEL, name=name, guild_id=GUILD, saved_by=BOB, saved_at=NOW,
            history=ModelMessagesTypeAdapter.dump_json(saved_history).decode(),
        )  # fmt: skip
    journal, ending = Journal(), Ending()
    ledger = UsageLedger(clock=lambda: NOW)
    ledger.record(GUILD, CHANNEL, ALICE, 30, 20, model="m")
    ledger.record(GUILD, CHANNEL, BOB, 7, 7, model="m")
    optouts = OptOuts()
    await optouts.attach(archive)
    erasure = MemberErasure(
        archive, manager, journal, ending, ledger, lambda channel: GUILD if channel == CHANNEL else 99, optouts,
        NoPins(),
    )  # fmt: skip

    erased = await erasure.erase(GUILD, ALICE)

    assert (erased.messages, erased.attachments, erased.facts, erased.usage_rows, erased.summaries) == (2, 1, 1, 1, 1)
    assert erased.conversations == 1 and erased.saved_conversations == 1 and "Erased 2 message(s)" in erased.describe()
    assert erased.reminders == 1 and "1 reminder(s)" in erased.describe()
    assert erased.feedback == 1 and "1 feedback verdict(s)" in erased.describe()
    assert [row.asker_id for row in await archive.guild_feedback(GUILD, NOW)] == [BOB]
    assert [r.text for r in await archive.member_reminders(GUILD, BOB)] == ["bob's reminder"]
    saved = await archive.snapshot_history(CHANNEL, "with her")
    assert saved is not None and "alice" not in saved and "(message deleted)" in saved
    assert {s.name: s.saved_at for s in await archive.snapshots(CHANNEL)} == {"with her": NOW, "without her": NOW}
    assert [m.author_id for m in conversation.messages] == [BOB]
    # What she said is gone from the model history, and the summary written from her message with it.
    history = str(conversation.llm_history)
    assert "not archived yet" not in history and "said hello" not in history and "(message deleted)" in history
    assert 'author="alice"' not in history  # nor who wrote it
    assert [m.message_id for m in elsewhere.messages] == [5]  # another server's conversation is not touched
    assert ending.deleted == {CHANNEL: {1, 3}}
    assert journal.forgotten == {CHANNEL: {1, 3, 4}}  # 4: in the conversation, not archived yet
    assert journal.authors == {ALICE: {CHANNEL}}  # her questions asked by command, in this server's channels
    # Today's counts in memory: hers are the server's still, under no one.
    today = ledger.summary(GUILD, CHANNEL)
    assert (today.server_tokens, today.top_members) == (64, [(BOB, 14)])
    assert {row.member_id: row.total_tokens for row in await ledger.guild_usage(GUILD, 1)} == {0: 50, BOB: 14}
    export = json.loads((await export_member(archive, GUILD, ALICE)).data)
    assert (export["messages"], export["facts"], export["usage"], export["reminders"]) == ([], [], [], [])
    assert export["support_feedback"] == []
    assert export["opted_out"] is True  # erasing is not opting in
    assert [m.content for m in await archive.recent(CHANNEL)] == ["bob's secret plan"]
    assert await archive.summaries(CHANNEL) == []


async def test_erasing_without_an_archive_clears_the_live_conversations() -> None:
    manager = ConversationManager(clock=lambda: NOW)
    conversation = manager.start(CHANNEL, [record(1, ALICE, "hello"), record(2, BOB, "hi")])
    erasure = MemberErasure(
        NULL_ARCHIVE, manager, Journal(), Ending(), UsageLedger(), lambda channel: GUILD, OptOuts(), NoPins()
    )
    erased = await erasure.erase(GUILD, ALICE)
    assert erased.conversations == 1 and erased.messages == 0
    assert [m.author_id for m in conversation.messages] == [BOB]
