"""Changes another process made to the shared settings, as Postgres announces them (LISTEN/NOTIFY).

Processes sharing one Postgres archive each keep some of its tables in memory (profiles, forget markers, thread
settings, the threads Parley opened, the members who opted out, the access lists, whether a server has knowledge
documents). A write to one of them notifies `parley_<table>` with the row's channel (or server, or member) id, from
a trigger in the writing transaction (schema v13; v16 for opt-outs, v17 for the access lists, v26 for the knowledge
documents), so the notification goes out when the change is committed. `ChangeListener` listens on a connection of
its own, outside the archive's pool: a pooled connection is reset on release, and a transaction-mode pooler
(PgBouncer) would drop its LISTEN. When that connection is lost, what was notified meanwhile is lost with it: once
listening again, the listener asks for everything to be read again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

import asyncpg

from archive import DatabaseUrlError, describe_database_url

log = logging.getLogger("parley.archive.changes")

# The tables whose changes are announced, each on the channel `parley_<table>`.
SHARED_TABLES = (
    "profile_settings", "forget_markers", "thread_settings", "own_threads", "opt_outs", "access_entries", "erasures",
    "knowledge_documents",
)  # fmt: skip
CHANNEL_PREFIX = "parley_"

OnChange = Callable[[str, int], Awaitable[None]]
OnMissed = Callable[[], Awaitable[None]]

# A lost connection is tried again this often; a live one is checked this often (a dropped network sends nothing).
RETRY_SECONDS = 5.0
CHECK_SECONDS = 30.0
_CONNECT_TIMEOUT = 10.0
# What a lost or unreachable server raises.
_CONNECTION_ERRORS = (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError)


class ChangeListener:
    """Calls `on_change(table, id)` for each change committed to a shared table, one at a time in order, and
    `on_missed()` after listening again on a new connection.

    `start()` listens before it returns, so whatever the caller reads after it is either read or notified.
    """

    def __init__(
        self,
        url: str,
        on_change: OnChange,
        on_missed: OnMissed,
        *,
        retry_seconds: float = RETRY_SECONDS,
        check_seconds: float = CHECK_SECONDS,
    ) -> None:
        self._url = url
        self._on_change = on_change
        self._on_missed = on_missed
        self._retry_seconds = retry_seconds
        self._check_seconds = check_seconds
        self._changes: asyncio.Queue[tuple[str, int]] = asyncio.Queue()
        self._tasks: list[asyncio.Task[None]] = []
        self.connection: asyncpg.Connection | None = None

    async def start(self) -> None:
        """Listen now, and again whenever the connection is lost, until `close()`.

        Raises:
            DatabaseUrlError: the first connection failed; the message names the database, never the password.
        """
        try:
            connection = await self._listen()
        except _CONNECTION_ERRORS as error:
            reason = " ".join(str(error).split()) or type(error).__name__
            where = describe_database_url(self._url)
            problem = f"DATABASE_URL names {where}, where Parley cannot listen for changes: {reason}"
            raise DatabaseUrlError(problem) from None
        self._tasks = [
            asyncio.create_task(self._keep_listening(connection), name="archive-changes"),
            asyncio.create_task(self._apply_changes(), name="archive-changes-apply"),
        ]

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        if self.connection is not None:
            with contextlib.suppress(*_CONNECTION_ERRORS):
                await self.connection.close(timeout=_CONNECT_TIMEOUT)
            self.connection = None

    async def _listen(self) -> asyncpg.Connection:
        connection: asyncpg.Connection = await asyncpg.connect(self._url, timeout=_CONNECT_TIMEOUT)
        try:
            for table in SHARED_TABLES:
                await connection.add_listener(CHANNEL_PREFIX + table, self._notified)
        except BaseException:
            connection.terminate()
            raise
        self.connection = connection
        return connection

    def _notified(self, connection: object, pid: int, channel: str, payload: str) -> None:
        try:
            self._changes.put_nowait((channel.removeprefix(CHANNEL_PREFIX), int(payload)))
        except ValueError:
            log.warning("ignoring a notification on %s without an id: %r", channel, payload)

    async def _apply_changes(self) -> None:
        while True:
            table, key = await self._changes.get()
            try:
                await self._on_change(table, key)
            except Exception:
                # The next change, or the next reconnection, reads again; the listener must go on.
                log.exception("could not take up the change to %s %s", table, key)

    async def _keep_listening(self, connection: asyncpg.Connection) -> None:
        while True:
            await self._until_lost(connection)
            log.warning("lost the Postgres connection that listens for other processes' changes; listening again")
            connection.terminate()
            self.connection = None
            connection = await self._listen_again()
            try:
                await self._on_missed()
            except Exception:
                log.exception("could not read the shared settings again")

    async def _until_lost(self, connection: asyncpg.Connection) -> None:
        lost = asyncio.Event()
        connection.add_termination_listener(lambda _: lost.set())
        while not lost.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._check_seconds):
                    await lost.wait()
            if not lost.is_set():
                try:
                    await connection.execute("SELECT 1", timeout=_CONNECT_TIMEOUT)
                except _CONNECTION_ERRORS:
                    return

    async def _listen_again(self) -> asyncpg.Connection:
        while True:
            try:
                return await self._listen()
            except _CONNECTION_ERRORS as error:
                log.warning("cannot listen for other processes' changes yet (%s); trying again", error)
                await asyncio.sleep(self._retry_seconds)
