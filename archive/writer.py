"""The writer task both archive backends share: it commits the queue (`archive.queued`) in batches.

One transaction per batch, made ready while the previous batch is on its way to the database; when a batch fails,
its writes are retried one by one, each in a savepoint of one transaction, so one bad write costs only itself. What
differs by database is each backend's: its writer connection (asyncpg's, or SQLite's shaped as asyncpg's), how a run
of writes of one kind is executed (`_execute_run`), what retention deletes (`_delete_older_than`), and the statements
as data (`file_text_usage_sql`, `next_id_sql`, the `Write`s).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from abc import abstractmethod
from collections.abc import Callable, Iterable
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime
from itertools import groupby
from operator import itemgetter
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from archive import Write
from archive.file_text import CHANNEL_OVER, MEMBER_OVER, FileTextUsage, day_of
from archive.queued import Op, QueuedWrites
from archive.tables import BackendTables

logger = logging.getLogger(__name__)

# A run of ops of one kind as its statements take it: a row of parameters per op.
Run = tuple[Write, list[tuple[Any, ...]]]
# Per prune committed, who waits for its count (None: the writer's own), and the messages it removed.
Pruned = list[tuple[asyncio.Future[int] | None, int]]


class WriterConnection(Protocol):
    """What the shared writer does on a backend's writer connection: asyncpg's `Connection` calls."""

    def transaction(self) -> AbstractAsyncContextManager[Any]:
        """A transaction, or a savepoint inside the one open: rolled back if its block raises."""
        ...

    async def fetch(self, sql: str, *args: Any) -> list[Any]: ...

    async def execute(self, sql: str, *args: Any) -> Any: ...


ConnectionT = TypeVar("ConnectionT", bound=WriterConnection)


class BatchWriter(QueuedWrites, BackendTables, Generic[ConnectionT]):
    """The writer task over a backend's connection and its dialect: the hooks and statements below."""

    # The writer's connection, held while the writer runs (set by the backend's `__init__`).
    _writer_connection: Callable[[], AbstractAsyncContextManager[ConnectionT]]
    # Who shared an attachment and the bytes of file text kept on its day, in its channel and from them (a
    # `FileTextUsage`), for the parameters (attachment id, the day's lowest id, its highest, the two notes).
    file_text_usage_sql: ClassVar[str]
    # A table's next id from the database, for the parameter (table name), where the database hands ids out to every
    # process (Postgres's identity sequences); None where this process is the archive's only writer and counts them.
    next_id_sql: ClassVar[str | None] = None

    @abstractmethod
    async def _execute_run(self, connection: ConnectionT, kind: Write, params: list[tuple[Any, ...]]) -> None:
        """Run the statements of a run of `kind`'s writes, prepared by `_prepared_rows`."""

    @abstractmethod
    async def _delete_older_than(self, connection: ConnectionT, cutoff_ms: int) -> int:
        """Delete what retention no longer keeps (before `cutoff_ms`); return the messages removed."""

    async def _prepared_rows(self, kind: Write, params: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        """The rows `kind`'s statements take for a run of its writes' params (no I/O): as queued, unless the backend
        adds what its statements need."""
        return params

    async def _lock_claims(self, connection: ConnectionT, runs: list[Run]) -> None:
        """Hold what the batch's count claims need before its statements run (`Write.claim_scope`): nothing where
        this process's writer is the archive's only one."""

    @functools.cached_property
    def _last_ids(self) -> dict[str, int]:
        """The last id handed out per table by `new_id`, where this process counts them."""
        return {}

    async def new_id(self, table: str) -> int:
        """A fresh ``id`` for a new row of ``table``: from the database's sequence, or counted here, as this process
        is the archive's only writer."""
        if self.next_id_sql is not None:
            ((next_id,),) = await self.read(self.next_id_sql, (table,))
            return int(next_id)
        if table not in self._last_ids:
            if not table.isidentifier():
                raise ValueError(f"not a table name: {table!r}")
            ((stored,),) = await self.read(f"SELECT coalesce(max(id), 0) FROM {table}")
            # Another call may have started counting while this one read.
            self._last_ids.setdefault(table, int(stored))
        self._last_ids[table] += 1
        return self._last_ids[table]

    async def _run_writer(self) -> None:
        loop = asyncio.get_running_loop()
        next_prune = loop.time() + self._prune_interval
        committing: asyncio.Task[None] | None = None
        async with self._writer_connection() as connection:
            while not (self._closing and not self._queue):
                await self._wait_for_work()
                batch = [self._queue.popleft() for _ in range(min(self._batch_size, len(self._queue)))]
                self._taken += len(batch)
                # Made ready while the previous batch is on its way, so this process and the database work at once.
                runs = await self._prepare_batch(batch)
                if committing is not None:
                    await committing
                    committing = None
                if batch:
                    sending = asyncio.Event()
                    committing = asyncio.create_task(self._commit(connection, batch, runs, sending))
                    # Only once the batch's statements are on their way is the loop free to prepare the next.
                    await sending.wait()
                self._release_waiters()
                if loop.time() >= next_prune and not self._closing:
                    next_prune = loop.time() + self._prune_interval
                    self._enqueue_prune(datetime.now(UTC), None)
            if committing is not None:
                await committing

    async def _commit(
        self, connection: ConnectionT, batch: list[Op], runs: list[Run] | None, sending: asyncio.Event
    ) -> None:
        try:
            await self._write_batch(connection, batch, runs, sending)
        finally:
            sending.set()
        self._done += len(batch)
        self._release_waiters()

    async def _prepare_batch(self, batch: list[Op]) -> list[Run] | None:
        try:
            return await self._prepare(batch)
        except Exception:
            logger.exception("history: batch of %d writes could not be prepared; trying one by one", len(batch))
            return None

    async def _write_batch(
        self, connection: ConnectionT, batch: list[Op], runs: list[Run] | None, sending: asyncio.Event
    ) -> None:
        """Commit a batch (as `runs`) in one transaction, setting `sending` as its statements go out; on failure,
        retry op by op so one bad write costs only itself."""
        pruned = None
        if runs is not None:
            try:
                async with connection.transaction():
                    sending.set()
                    pruned = await self._execute(connection, runs)
            except Exception:
                logger.exception("history: batch of %d writes failed; retrying one by one", len(batch))
        if pruned is None:
            pruned = await self._write_one_by_one(connection, batch)
        for done, count in pruned:
            if done is not None and not done.done():
                done.set_result(count)

    async def _write_one_by_one(self, connection: ConnectionT, batch: list[Op]) -> Pruned:
        pruned: Pruned = []
        try:
            async with connection.transaction():
                for op in batch:
                    try:
                        async with connection.transaction():  # a savepoint
                            pruned += await self._execute(connection, await self._prepare([op]))
                    except Exception as exc:
                        logger.exception("history: dropped %s write (key %r)", op[0].name, op[1][0])
                        self._fail_prunes([op], exc)
        except Exception as exc:
            logger.exception("history: could not commit; %d writes lost", len(batch))
            self._fail_prunes(batch, exc)
            return []
        return pruned

    async def _prepare(self, ops: list[Op]) -> list[Run]:
        """The ops' runs of one kind, in order, with what their statements take (no I/O)."""
        runs = []
        for kind, group in groupby(ops, key=itemgetter(0)):
            params = [p for _, p in group]
            if kind is self.writes.save_conversation:
                params = self._conversation_rows(params)
            else:
                params = await self._prepared_rows(kind, params)
            if params:
                runs.append((kind, params))
        return runs

    async def _execute(self, connection: ConnectionT, runs: list[Run]) -> Pruned:
        """Run prepared runs in order, once the batch holds its claims' locks; return (future, count) per prune."""
        await self._lock_claims(connection, runs)
        pruned = []
        for kind, params in runs:
            if kind is self.writes.prune:
                for cutoff, done in params:
                    pruned.append((done, await self._delete_older_than(connection, cutoff)))
            elif kind is self.writes.attachment_text and self._file_texts.budget is not None:
                for row in params:
                    await self._set_file_text(connection, row)
            else:
                await self._execute_run(connection, kind, params)
        return pruned

    async def _set_file_text(self, connection: ConnectionT, row: tuple[Any, ...]) -> None:
        """Store the text of an attachment-text write's `row` for its attachment, or the note of the file text budget
        it would go over."""
        attachment_id, text = row[0], row[1]
        low, high = day_of(attachment_id)
        kind = self.writes.attachment_text
        usages = await connection.fetch(self.file_text_usage_sql, attachment_id, low, high, CHANNEL_OVER, MEMBER_OVER)
        for usage in usages:  # none once the attachment's message is gone
            stored = self._file_texts.admitted(attachment_id, text, FileTextUsage(*usage))
            if stored is not text:
                (row,) = await self._prepared_rows(kind, [(attachment_id, stored)])
            await connection.execute(kind.statements[0], *row)

    def _fail_prunes(self, ops: Iterable[Op], exc: Exception) -> None:
        for kind, params in ops:
            if kind is self.writes.prune and params[1] is not None and not params[1].done():
                params[1].set_exception(exc)
