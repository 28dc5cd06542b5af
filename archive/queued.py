"""The write queue both archive backends share.

A write is queued, not awaited: the bot records every message, edit and decision without waiting on the
database, and the writer task (`archive.writer`) commits the queue in batches with the backend's statements
(`Write`s, named per kind in a `WriteKinds`). What is here is the same for SQLite and Postgres: the queue, `flush`,
and the writes that only enqueue, or enqueue and check what was committed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

from archive import ArchivedMessage, ArchiveWriteFailed, StoredConversation, TokenUsage, Write
from archive.claim import ArchiveClaim
from archive.file_text import FileTextBudget, FileTextGate
from archive.text import safe_text
from archive.times import to_day
from archive.times import to_ms as to_ms  # re-exported: edge/pins.py imports it from here

Op = tuple[Write, tuple[Any, ...]]


@dataclass(frozen=True, slots=True)
class WriteKinds:
    """A backend's statements for each kind of write the shared methods queue."""

    add: Write
    add_attachment: Write
    add_summary: Write
    delete_channel: Write
    edit: Write
    delete: Write
    delete_guild: Write
    forget: Write
    decision: Write
    set_threads: Write
    add_own_thread: Write
    set_state: Write
    usage: Write
    prune: Write
    save_conversation: Write
    drop_conversation: Write
    delete_summaries: Write
    attachment_text: Write
    keep_attachments: Write


class QueuedWrites(ABC):
    """The queue of writes a backend's writer task commits, and the writes that go through it."""

    writes: ClassVar[WriteKinds]
    # What the process holds while the archive is open (archive/exclusive.py): released last by `close`.
    _claim: ArchiveClaim | None = None
    # The key of a channel's next message in the full-text index, where the backend's index wants one from the
    # writer's side (SQLite's: a channel's messages are one rowid range); the last field of an add's row.
    _search_key: Callable[[int], int] | None = None
    # The backend's connections, closed in this order by `close` once the writer has stopped.
    _connections: tuple[Callable[[], Awaitable[None]], ...] = ()

    def _start_queue(
        self,
        *,
        retention_days: int,
        batch_size: int,
        flush_interval: float,
        prune_interval: float,
        file_text_budget: FileTextBudget | None,
    ) -> None:
        self._retention = timedelta(days=retention_days)
        self._file_texts = FileTextGate(file_text_budget)
        self._batch_size = batch_size
        self._flush_interval = flush_interval
        self._prune_interval = prune_interval
        self._writer_task: asyncio.Task[None] | None = None
        self._queue: deque[Op] = deque()
        self._wake = asyncio.Event()
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []
        # Ops handed to the writer so far / finished (committed or logged).
        self._taken = 0
        self._done = 0
        self._closing = False
        # Per channel, how to read its conversation's latest state: a busy channel changes it with every
        # message, and only the state at commit time is worth writing, once per batch.
        self._unsaved_conversations: dict[int, Callable[[], StoredConversation]] = {}

    @abstractmethod
    async def _run_writer(self) -> None:
        """Commit the queue in batches until the archive closes and the queue is empty."""

    async def close(self) -> None:
        """Commit everything still queued, stop the writer, close the backend's connections and release the claim."""
        try:
            await self._stop_writer()
        finally:
            try:
                for close_connection in self._connections:
                    await close_connection()
            finally:
                await self._release_claim()

    async def _release_claim(self) -> None:
        claim, self._claim = self._claim, None
        if claim is not None:
            await claim.release()

    def _start_writer(self) -> None:
        """Queue the first prune and start the writer task (once the archive is open)."""
        self._enqueue_prune(datetime.now(UTC), None)
        self._writer_task = asyncio.create_task(self._run_writer(), name="history-writer")

    async def _stop_writer(self) -> None:
        """Refuse new writes and wait until the writer has committed everything queued."""
        self._closing = True
        self._wake.set()
        if self._writer_task is not None:
            await self._writer_task

    async def _wait_for_work(self) -> None:
        """Until a batch is full, someone waits on a flush, the archive closes, or `flush_interval` has passed."""
        if self._closing or self._waiters or len(self._queue) >= self._batch_size:
            return
        self._wake.clear()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self._flush_interval):
                await self._wake.wait()

    @abstractmethod
    async def all_forget_markers(self) -> dict[int, int]: ...

    @abstractmethod
    async def thread_channels(self) -> set[int]: ...

    @abstractmethod
    async def get_state(self, name: str) -> str | None: ...

    async def flush(self) -> None:
        """Wait until every write queued before this call is committed (or logged as failed)."""
        waiter = self._commit_soon()
        if waiter is not None:
            await waiter

    def _commit_soon(self) -> asyncio.Future[None] | None:
        """Have the writer commit every write queued so far now, not after `flush_interval`; the future is done
        once it has (None: nothing is queued or under way)."""
        target = self._taken + len(self._queue)
        if target <= self._done:
            return None
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append((target, waiter))
        self._wake.set()
        return waiter

    def _sole_writer(self) -> bool:
        """Whether no other process can write the archive while this one has it open (`ArchiveClaim.sole`)."""
        return self._claim is not None and self._claim.sole

    @property
    def pending_writes(self) -> int:
        """Writes queued or being committed; for metrics and producer backpressure."""
        return len(self._queue) + self._taken - self._done

    def set_attachment_text(self, attachment_id: int, text: str) -> None:
        """Keep the text read from an archived attachment, for search (no-op once its message is gone).

        Made safe here, as message text is at the edge: a file can hold NUL anywhere (Postgres text refuses it,
        SQLite's string functions stop at it) and lone surrogates (UTF-8 cannot encode them).
        """
        self._enqueue(self.writes.attachment_text, (attachment_id, safe_text(text)))

    def keep_attachments(self, message_id: int, attachment_ids: Iterable[int]) -> None:
        """Drop the files an edit took off a stored message, with their text: only `attachment_ids` remain."""
        # A JSON array: one parameter either backend's SQL takes apart (SQLite binds no lists).
        self._enqueue(self.writes.keep_attachments, (message_id, json.dumps(sorted(attachment_ids))))

    def add(self, message: ArchivedMessage) -> None:
        """Archive a message, replacing any stored version with the same id."""
        m = message
        edited = None if m.edited_at is None else to_ms(m.edited_at)
        row: tuple[Any, ...] = (
            m.message_id, m.guild_id, m.channel_id, m.author_id, m.author_name,
            m.content, to_ms(m.created_at), edited, m.is_bot, m.reply_to_message_id,
            " ".join(map(str, sorted(m.mention_ids))), m.reply_to_author_id, m.mentions_everyone,
        )  # fmt: skip
        if self._search_key is not None:
            row += (self._search_key(m.channel_id),)
        self._enqueue(self.writes.add, row)
        for a in m.attachments:
            self._enqueue(
                self.writes.add_attachment,
                (a.attachment_id, m.message_id, m.channel_id, a.filename, a.content_type, a.size),
            )

    def delete_channel(self, channel_id: int) -> None:
        """Remove a channel's messages, decisions and settings.

        Its token counts stay: they are what the server spent, not anything said, and dropping them
        would let deleting a channel refund the server's daily budget. Retention prunes them.
        """
        self._enqueue(self.writes.delete_channel, (channel_id,))

    def add_summary(self, channel_id: int, summary: str, ended_at: datetime, message_ids: tuple[int, int]) -> None:
        """Keep the summary of a conversation of the channel that ended at `ended_at`.

        `message_ids` are the oldest and newest message ids it was written from: deleting any message
        of the channel between them deletes the summary too.
        """
        first_id, last_id = message_ids
        self._enqueue(self.writes.add_summary, (channel_id, to_ms(ended_at), summary, first_id, last_id))

    def edit(self, message_id: int, content: str, edited_at: datetime) -> None:
        """Replace a stored message's text (no-op if the message isn't archived)."""
        self._enqueue(self.writes.edit, (message_id, content, to_ms(edited_at)))

    def delete(self, message_ids: Iterable[int]) -> None:
        """Remove messages, and the decisions about them and memories made from them."""
        for message_id in message_ids:
            self._enqueue(self.writes.delete, (message_id,))

    def delete_guild(self, guild_id: int) -> None:
        """Remove everything stored for a guild's channels, and the guild's token counts."""
        self._enqueue(self.writes.delete_guild, (guild_id,))

    def save_conversation(self, channel_id: int, state: Callable[[], StoredConversation]) -> None:
        """Keep the channel's live conversation; `state` is called when the write is committed, for the latest."""
        if channel_id not in self._unsaved_conversations:
            self._enqueue(self.writes.save_conversation, (channel_id,))
        self._unsaved_conversations[channel_id] = state

    def drop_conversation(self, channel_id: int) -> None:
        """Forget the channel's kept conversation (it ended)."""
        self._unsaved_conversations.pop(channel_id, None)
        self._enqueue(self.writes.drop_conversation, (channel_id,))

    def delete_summaries(self, channel_id: int) -> None:
        """Remove every kept conversation summary of the channel."""
        self._enqueue(self.writes.delete_summaries, (channel_id,))

    def record_decision(
        self,
        *,
        channel_id: int,
        message_id: int,
        author_name: str,
        excerpt: str,
        responded: bool,
        reason: str,
        tier: str,
        confidence: float | None = None,
        decided_at: datetime | None = None,
        author_id: int = 0,
    ) -> None:
        """Log whether the bot replied to a message (by `author_id`; 0: no one's) and why."""
        when = to_ms(decided_at or datetime.now(UTC))
        self._enqueue(
            self.writes.decision,
            (channel_id, message_id, author_name, excerpt, responded, reason, tier, confidence, when, author_id),
        )

    def record_usage(self, usage: TokenUsage) -> None:
        """Add an answer's, a judge call's or a summary's tokens to its day's row for that server, channel, member
        and model."""
        self._enqueue(
            self.writes.usage,
            (
                to_day(usage.day), usage.guild_id, usage.channel_id, usage.member_id, usage.model,
                usage.input_tokens, usage.cached_input_tokens, usage.output_tokens, usage.answers, usage.judge_calls,
                usage.images,
            ),
        )  # fmt: skip

    async def set_thread_setting(self, channel_id: int, guild_id: int, threads: bool) -> None:
        """Store whether an @mention in the channel opens a thread; returns once it is committed.

        Raises:
            ArchiveWriteFailed: the write was dropped (the writer logs why), so the stored setting is unchanged.
        """
        self._enqueue(self.writes.set_threads, (channel_id, guild_id, threads, to_ms(datetime.now(UTC))))
        await self.flush()
        if (channel_id in await self.thread_channels()) != threads:
            raise ArchiveWriteFailed(f"the thread setting of channel {channel_id} could not be stored")

    def add_own_thread(self, thread_id: int, parent_id: int, guild_id: int) -> None:
        """Note a thread Parley opened, so a restart still treats its messages as meant for Parley."""
        self._enqueue(self.writes.add_own_thread, (thread_id, parent_id, guild_id, to_ms(datetime.now(UTC))))

    async def set_forget_marker(self, channel_id: int, guild_id: int, after_id: int) -> None:
        """Store that the channel's context starts after message id ``after_id``; returns once it is committed.

        Raises:
            ArchiveWriteFailed: the write was dropped (the writer logs why), so the stored marker is unchanged.
        """
        self._enqueue(self.writes.forget, (channel_id, guild_id, after_id))
        await self.flush()
        if (await self.all_forget_markers()).get(channel_id) != after_id:
            raise ArchiveWriteFailed(f"the forget marker of channel {channel_id} could not be stored")

    async def prune(self, now: datetime | None = None) -> int:
        """Delete messages and decisions older than the retention; return messages removed."""
        if not self._retention:
            return 0
        done: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._enqueue_prune(now or datetime.now(UTC), done)
        self._wake.set()
        return await done

    async def set_state(self, name: str, value: str) -> None:
        """Store `value` under `name`; returns once it is committed.

        Raises:
            ArchiveWriteFailed: the write was dropped (the writer logs why).
        """
        self._enqueue(self.writes.set_state, (name, value))
        await self.flush()
        if await self.get_state(name) != value:
            raise ArchiveWriteFailed(f"the value of {name!r} could not be stored")

    def _enqueue(self, kind: Write, params: tuple[Any, ...]) -> None:
        if self._closing:
            raise RuntimeError(f"{type(self).__name__} is closed")
        self._queue.append((kind, params))
        if len(self._queue) >= self._batch_size:
            self._wake.set()

    def _enqueue_prune(self, now: datetime, done: asyncio.Future[int] | None) -> None:
        if self._retention:
            self._enqueue(self.writes.prune, (to_ms(now - self._retention), done))

    def _release_waiters(self) -> None:
        pending = []
        for target, waiter in self._waiters:
            if target > self._done:
                pending.append((target, waiter))
            elif not waiter.done():
                waiter.set_result(None)
        self._waiters = pending

    def _conversation_rows(self, params: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        rows = []
        for (channel_id,) in params:
            state = self._unsaved_conversations.pop(channel_id, None)
            if state is not None:  # else dropped since it was queued
                stored = state()
                rows.append((channel_id, to_ms(stored.last_activity), stored.state))
        return rows
