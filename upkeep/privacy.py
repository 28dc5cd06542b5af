"""Members' data rights in a server: what Parley holds by or about a member, exported as JSON, and erased.

What is held: their archived messages with their files' names and the text read from them, the facts remembered about
them or told by them, their token counts, their reminders and timed posts still to come, the model they chose
(`/parley model`), their feedback on the support desk's answers, their part of the moderation log
(moderation/exported.py), whether they opted out, and until when they erased. An export is built a page of messages at
a time, encoded off the event loop, and stops at Discord's upload limit (saying so). An erasure deletes all of it from
the archive (their tokens stay the server's, under no one; the saved conversations that quote them are saved again
without them) and from this process's live conversations, decisions and ending conversations: a server's messages all
reach the one process that runs its shard, which is the one its command reaches. Conversation summaries written from
their messages are dropped; the channel's next conversations are summarised afresh when they end. Their pinned messages
leave the knowledge base. The erasure itself is kept (admission/optout.py): what they wrote until then is never stored
again by any path that reads it back from Discord; what they write afterwards is kept as usual. It goes when Parley
leaves the server.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from discord.utils import snowflake_time, time_snowflake
from pydantic_ai.messages import ModelMessagesTypeAdapter

from archive import (
    ArchivedMessage,
    Feedback,
    MemberData,
    MemberModelTable,
    Memory,
    MemoryTables,
    ModerationLog,
    Reminder,
    ReminderTable,
    TokenUsage,
)
from archive.members import MESSAGES_AT_ONCE
from conversation import ChannelConversation, ConversationManager, erased_history
from moderation.exported import exported_moderation
from prompting.context import quoted_by, quoted_message_ids

# Discord's upload limit without boosts (an interaction says its own: `Interaction.filesize_limit`).
DEFAULT_UPLOAD_LIMIT = 10 * 2**20
# Room kept under the limit for the closing of the JSON and the note of a cut.
_CLOSING_ROOM = 1024


@dataclass(frozen=True, slots=True)
class Export:
    """A member's data as a JSON file's bytes; `cut`: messages left out to stay under the upload limit."""

    data: bytes
    messages: int
    facts: int
    usage_rows: int
    cut: int


@dataclass(frozen=True, slots=True)
class Erased:
    """What an erasure removed: from the archive, and from the live conversations of the server."""

    messages: int
    attachments: int
    facts: int
    usage_rows: int
    summaries: int
    conversations: int
    saved_conversations: int = 0
    reminders: int = 0
    pins: int = 0
    feedback: int = 0
    reports: int = 0

    def describe(self) -> str:
        return (
            f"Erased {self.messages} message(s) with {self.attachments} file(s) and their text, {self.facts} remembered"
            f" fact(s), your id on {self.usage_rows} token-count row(s) (the server's totals stay, under no one),"
            f" {self.summaries} conversation summary(ies) written from your messages, {self.reminders} reminder(s),"
            f" {self.feedback} feedback verdict(s) on support answers,"
            f" and your messages in {self.conversations} live conversation(s) and {self.saved_conversations} saved"
            f" one(s). {self.pins} of your pinned message(s) left the knowledge base. {self.reports} report(s) you made"
            " to the moderators and the closed cases about you were erased. Nothing you wrote until now is kept again."
        )


class ExportedArchive(MemberData, ReminderTable, MemberModelTable, ModerationLog, Protocol):
    """The archive, as an export reads it: the member's data, their reminders, their model choice and their part of
    the moderation log."""


class ErasedArchive(MemberData, MemoryTables, ReminderTable, ModerationLog, Protocol):
    """The archive, as an erasure needs it: the member's data, the saved conversations that may quote them, their
    reminders and their part of the moderation log."""


class DecisionsKept(Protocol):
    """The decisions kept in memory for `/parley why` (deciding.journal.DecisionJournal): their excerpts quote
    messages."""

    def forget_messages(self, channel_id: int, message_ids: Iterable[int]) -> None: ...

    def forget_author(self, author_id: int, channel_ids: Callable[[int], bool]) -> None: ...


class TodaysUsage(Protocol):
    """Today's token counts in memory (usage.budget.UsageLedger)."""

    def anonymise(self, guild_id: int, member_id: int) -> None: ...


class Erasures(Protocol):
    """Where an erasure is kept, so that no path stores again what it erased (admission.optout.OptOuts)."""

    async def mark_erased(self, guild_id: int, member_id: int, upto_id: int) -> None: ...


class ErasedPins(Protocol):
    """The pinned messages in the knowledge base (edge/pins.py)."""

    async def forget_member(self, guild_id: int, member_id: int) -> int: ...


class EndingConversations(Protocol):
    """Conversations being summarised as they end (upkeep.conversations.ConversationUpkeep)."""

    def delete_from_ending(self, channel_id: int, message_ids: Collection[int]) -> None: ...


async def export_member(
    archive: ExportedArchive, guild_id: int, member_id: int, *, limit: int = DEFAULT_UPLOAD_LIMIT
) -> Export:
    """Everything the archive holds by or about the member in the server, as JSON of at most `limit` bytes: their
    messages oldest first, the newest left out past the limit (the file says how many)."""
    since = (await archive.opt_outs(member_id)).get((guild_id, member_id))
    erased = (await archive.erasures(member_id)).get((guild_id, member_id))
    facts = await archive.member_memories(guild_id, member_id)
    usage = await archive.member_usage(guild_id, member_id)
    head = {
        "server_id": str(guild_id),
        "member_id": str(member_id),
        "exported_at": datetime.now(UTC).isoformat(),
        "opted_out": since is not None,
        "opted_out_since": None if since is None else since.isoformat(),
        # What is kept of an erasure: that what they wrote until then is never archived again.
        "erased_until": None if erased is None else snowflake_time(erased).isoformat(),
        "facts": [_fact(fact, member_id) for fact in facts],
        "usage": [_usage(row) for row in usage],
        "reminders": [_reminder(reminder) for reminder in await archive.member_reminders(guild_id, member_id)],
        "model_choice": await archive.member_model(guild_id, member_id),
        "support_feedback": [_feedback(row) for row in await archive.member_feedback(guild_id, member_id)],
        "moderation": await exported_moderation(archive, guild_id, member_id),
    }
    opening = await asyncio.to_thread(_encode, head)
    messages = _MessagesPart(limit - len(opening) - _CLOSING_ROOM)
    ids = sorted(
        message_id for ids in (await archive.member_message_ids(guild_id, member_id)).values() for message_id in ids
    )
    for start in range(0, len(ids), MESSAGES_AT_ONCE):
        page = await archive.messages_by_id(ids[start : start + MESSAGES_AT_ONCE])
        if not messages.take(await asyncio.to_thread(_encode_messages, page)):
            break
    cut = len(ids) - messages.count
    data = b"".join([opening[:-1], b', "messages": [', b",".join(messages.encoded), b'], "messages_left_out": ',
                     str(cut).encode(), b"}"])  # fmt: skip
    return Export(data, messages.count, len(facts), len(usage), cut)


class _MessagesPart:
    """The encoded messages of an export, as many as fit in `room` bytes."""

    def __init__(self, room: int) -> None:
        self.room = room
        self.encoded: list[bytes] = []

    @property
    def count(self) -> int:
        return len(self.encoded)

    def take(self, encoded: list[bytes]) -> bool:
        """Keep what fits of `encoded`, in order; whether all of it did."""
        for message in encoded:
            if len(message) + 1 > self.room:
                return False
            self.encoded.append(message)
            self.room -= len(message) + 1
        return True


class MemberErasure:
    """Erases a member's data in a server: the archive's, then what this process keeps in memory."""

    def __init__(
        self,
        archive: ErasedArchive,
        manager: ConversationManager,
        decisions: DecisionsKept,
        ending: EndingConversations,
        usage: TodaysUsage,
        guild_of: Callable[[int], int],
        erasures: Erasures,
        pins: ErasedPins,
    ) -> None:
        self.archive = archive
        self.erasures = erasures
        self.pins = pins
        self.usage = usage
        self.manager = manager
        self.decisions = decisions
        self.ending = ending
        self.guild_of = guild_of

    async def erase(self, guild_id: int, member_id: int) -> Erased:
        """Delete everything held by or about the member in the server; what was removed, counted.

        Raises:
            ArchiveWriteFailed: the archive still holds some of it, or could not keep the erasure (the log says why);
                erasing again finishes the job.
        """
        # First: what the member wrote until now is withheld from every path that could store it again (catch-up,
        # the recheck, an edit, a pin) while, and after, the rest goes.
        await self.erasures.mark_erased(guild_id, member_id, time_snowflake(datetime.now(UTC), high=True))
        pins = await self.pins.forget_member(guild_id, member_id)
        archived = await self.archive.member_message_ids(guild_id, member_id)
        counts = await self.archive.member_counts(guild_id, member_id)
        conversations = self._clear_live(guild_id, member_id, archived)
        # Their questions asked by command are no archived message: their decisions are found by author.
        self.decisions.forget_author(member_id, lambda channel_id: self.guild_of(channel_id) == guild_id)
        for channel_id, message_ids in archived.items():
            self.decisions.forget_messages(channel_id, message_ids)
            self.ending.delete_from_ending(channel_id, message_ids)
        self.usage.anonymise(guild_id, member_id)
        every = [message_id for ids in archived.values() for message_id in ids]
        reminders = len(await self.archive.member_reminders(guild_id, member_id))
        reports = len(await self.archive.member_reports(guild_id, member_id))
        await self.archive.erase_member(guild_id, member_id, every)
        await self.archive.delete_member_reminders(guild_id, member_id)
        await self.archive.erase_member_moderation(guild_id, member_id)
        saved = await _erase_from_saved(self.archive, guild_id, member_id, every)
        return Erased(counts.messages, counts.attachments, counts.facts, counts.usage_rows, counts.summaries,
                      conversations, saved, reminders, pins, counts.feedback, reports)  # fmt: skip

    def _clear_live(self, guild_id: int, member_id: int, archived: dict[int, list[int]]) -> int:
        """Drop the member's messages from the server's live conversations (and the summaries in their model
        history written from them); how many conversations changed."""
        changed = 0
        for conversation in self.manager.live():
            channel_id = conversation.channel_id
            if self.guild_of(channel_id) != guild_id:
                continue
            message_ids = _quotable(conversation, member_id, archived.get(channel_id, ()))
            # Decisions on messages not archived (yet) quote them too.
            self.decisions.forget_messages(channel_id, message_ids)
            if conversation.erase(message_ids):
                self.manager.changed(channel_id)
                changed += 1
        return changed


async def _erase_from_saved(archive: ErasedArchive, guild_id: int, member_id: int, message_ids: list[int]) -> int:
    """Take the member's messages (`message_ids`, and any quoted as theirs: their questions asked by command) out of
    the server's saved conversations that quote them; how many changed."""
    changed = 0
    for channel_id in await archive.snapshot_channels(guild_id):
        for saved in await archive.snapshots(channel_id):
            history = await archive.snapshot_history(channel_id, saved.name)
            erased = None if history is None else await asyncio.to_thread(_erased_json, history, member_id, message_ids)
            if erased is not None:
                await archive.save_snapshot(
                    channel_id=channel_id, name=saved.name, guild_id=guild_id, saved_by=saved.saved_by,
                    saved_at=saved.saved_at, history=erased,
                )  # fmt: skip
                changed += 1
    return changed


def _erased_json(history: str, member_id: int, message_ids: list[int]) -> str | None:
    """A saved model history (JSON) without the member's messages, or None if it did not quote them."""
    messages = ModelMessagesTypeAdapter.validate_json(history)
    erased = erased_history(messages, {*message_ids, *quoted_by(messages, member_id)})
    return None if erased == messages else ModelMessagesTypeAdapter.dump_json(erased).decode()


def _quotable(conversation: ChannelConversation, member_id: int, archived: Iterable[int]) -> set[int]:
    """The member's messages the conversation may hold or quote: those it holds, and archived ones no older than
    the oldest it quotes (older ones never reached it, and marking each as deleted would only grow it)."""
    own = {message.message_id for message in conversation.messages if message.author_id == member_id}
    own |= quoted_by(conversation.llm_history, member_id)
    quoted = quoted_message_ids(conversation.llm_history)
    oldest = min([*own, *(message.message_id for message in conversation.messages), *(quoted or ())], default=None)
    if oldest is None:
        return own
    return own | {message_id for message_id in archived if message_id >= oldest}


def _encode_messages(messages: list[ArchivedMessage]) -> list[bytes]:
    return [_encode(_message(message)) for message in messages]


def _encode(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode()


def _message(message: ArchivedMessage) -> dict[str, Any]:
    return {
        "id": str(message.message_id),
        "channel_id": str(message.channel_id),
        "created_at": message.created_at.isoformat(),
        "edited_at": None if message.edited_at is None else message.edited_at.isoformat(),
        "author_name": message.author_name,
        "content": message.content,
        "reply_to_message_id": None if message.reply_to_message_id is None else str(message.reply_to_message_id),
        "attachments": [
            {
                "id": str(file.attachment_id),
                "filename": file.filename,
                "content_type": file.content_type,
                "size": file.size,
                "text": file.text,
            }
            for file in message.attachments
        ],
    }


def _fact(fact: Memory, member_id: int) -> dict[str, Any]:
    return {
        "id": str(fact.id),
        "channel_id": str(fact.channel_id),
        "fact": fact.fact,
        "about_you": fact.about_id == member_id,
        "told_by_you": fact.said_by_id == member_id,
        "source_message_id": str(fact.source_message_id),
        "created_at": fact.created_at.isoformat(),
    }


def _usage(row: TokenUsage) -> dict[str, Any]:
    return {
        "day": row.day.isoformat(),
        "channel_id": str(row.channel_id),
        "model": row.model,
        "input_tokens": row.input_tokens,
        "cached_input_tokens": row.cached_input_tokens,
        "output_tokens": row.output_tokens,
        "answers": row.answers,
        "judge_calls": row.judge_calls,
    }


def _reminder(reminder: Reminder) -> dict[str, Any]:
    return {
        "id": str(reminder.id),
        "channel_id": str(reminder.channel_id),
        "text": reminder.text,
        "due_at": reminder.due_at.isoformat(),
        "every": reminder.every or None,
        "post_here": reminder.post_here,
        "scheduled_prompt": reminder.prompt,
        "created_at": reminder.created_at.isoformat(),
    }


def _feedback(row: Feedback) -> dict[str, Any]:
    return {
        "question_id": str(row.question_id),
        "channel_id": str(row.channel_id),
        "verdict": row.verdict or None,
        "offered_at": row.offered_at.isoformat(),
        "decided_at": None if row.decided_at is None else row.decided_at.isoformat(),
    }
