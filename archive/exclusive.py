"""One process per archive, and per shard of a Postgres archive: a lock the process holds while the archive is open.

Two processes on one SQLite file, or running the same shard on one Postgres database, would both answer every
mention and both write the same conversations. So before opening, a process claims what it serves:

- SQLite: an exclusive `flock` on a file beside the database (`parley.db.lock`), which also names the holder's
  process id for the refusal. The file stays; only the lock on it matters.
- Postgres: session advisory locks on a connection of the claim's own (a pooled connection would hand them to
  whichever query came next): one per shard in SHARD_IDS, plus a shared one on the whole bot that a process
  running every shard (SHARD_IDS unset) takes exclusively. So two processes conflict when their shards overlap,
  or when either runs them all. https://www.postgresql.org/docs/current/explicit-locking.html#ADVISORY-LOCKS

Both are the kernel's or the server's, not a row or a file's contents: they go with the process however it ends,
kill -9 included (the kernel closes the file; the server ends the session when its socket closes), so no stale
lock is ever left to clear by hand.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
from pathlib import Path
from typing import Any

from archive import DatabaseUrlError, check_database_url, describe_database_url, is_postgres_url
from archive.claim import ArchiveClaim as ArchiveClaim  # re-exported: ops/opening.py imports it from here
from archive.sqlite_url import sqlite_path_from_url

# The first half of Parley's two-key advisory locks ("prly"); the second is the shard, or ALL_SHARDS. Two-key locks
# never collide with the single-key one the Postgres backend migrates under.
LOCK_SPACE = 0x70726C79
ALL_SHARDS = -1
_CONNECT_TIMEOUT = 10.0


class ArchiveInUse(Exception):
    """Another process holds the archive, or one of the shards this one would run; the message says which."""


def sqlite_lock_path(database: Path) -> Path:
    """The file whose lock stands for the database's: `parley.db.lock` beside `parley.db`."""
    return database.with_name(database.name + ".lock")


class FileClaim:
    """An exclusive `flock` on the SQLite archive's lock file, held until released or the process ends."""

    sole = True

    def __init__(self, descriptor: int) -> None:
        self._descriptor: int | None = descriptor

    @classmethod
    def take(cls, database: Path) -> FileClaim:
        """Lock `database`'s lock file (creating its folder and the file if needed) and write this process's id in it.

        Raises:
            ArchiveInUse: another process holds it; the message names the database and that process.
        """
        database.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(sqlite_lock_path(database), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(descriptor, 32, 0).decode(errors="replace").strip()
            os.close(descriptor)
            process = f" (process {holder})" if holder.isdigit() else ""
            raise ArchiveInUse(f"{database} is in use by another Parley process{process}") from None
        except BaseException:
            os.close(descriptor)
            raise
        os.ftruncate(descriptor, 0)
        os.pwrite(descriptor, f"{os.getpid()}\n".encode(), 0)
        return cls(descriptor)

    async def release(self) -> None:
        """Close the file, which drops the lock; it stays for the next process. Idempotent."""
        descriptor, self._descriptor = self._descriptor, None
        if descriptor is not None:
            os.close(descriptor)


async def claim_sqlite(database: Path) -> FileClaim:
    """`FileClaim.take` off the event loop (it creates a folder and a file)."""
    return await asyncio.to_thread(FileClaim.take, database)


class AdvisoryClaim:
    """Session advisory locks on a Postgres connection of their own, held until it closes."""

    sole = False  # other shards' processes share the database

    def __init__(self, connection: Any) -> None:
        self._connection: Any = connection

    async def release(self) -> None:
        """Close the connection, which ends the session and its locks. Idempotent."""
        import asyncpg

        connection, self._connection = self._connection, None
        if connection is None:
            return
        try:
            await connection.close(timeout=_CONNECT_TIMEOUT)
        except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError):
            connection.terminate()  # a server already gone: the session ends with the socket all the same


async def claim_postgres_shards(url: str, shard_ids: frozenset[int], where: str) -> AdvisoryClaim:
    """Take the locks for `shard_ids` (empty: every shard) on a new connection to `url`, or none at all.

    Raises:
        ArchiveInUse: another process holds one of them; the message names the shard and `where`.
        DatabaseUrlError: the server cannot be reached, or refuses the URL's user, password or database.
    """
    import asyncpg  # only for a Postgres archive

    try:
        connection = await asyncpg.connect(url, timeout=_CONNECT_TIMEOUT)
    except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError, ValueError) as error:
        reason = " ".join(str(error).split()) or type(error).__name__
        raise DatabaseUrlError(f"DATABASE_URL names {where}, which cannot be reached: {reason}") from None
    try:
        refused = await _first_refused(connection, shard_ids, where)
    except BaseException:
        connection.terminate()
        raise
    if refused:
        await connection.close()  # and with it whatever was taken before the refusal
        raise ArchiveInUse(refused)
    return AdvisoryClaim(connection)


async def _first_refused(connection: Any, shard_ids: frozenset[int], where: str) -> str | None:
    """Take the locks one by one; what another process holds, as the line that says so, or None once all are held."""
    in_use = f"{where} is in use by another Parley process"
    if not shard_ids:
        if not await connection.fetchval("SELECT pg_try_advisory_lock($1, $2)", LOCK_SPACE, ALL_SHARDS):
            return f"{in_use} (running some or all of the shards)"
        return None
    if not await connection.fetchval("SELECT pg_try_advisory_lock_shared($1, $2)", LOCK_SPACE, ALL_SHARDS):
        return f"{in_use} (running every shard)"
    for shard in sorted(shard_ids):
        if not await connection.fetchval("SELECT pg_try_advisory_lock($1, $2)", LOCK_SPACE, shard):
            return f"{in_use} (running shard {shard})"
    return None


async def claim_archive(url: str, shard_ids: frozenset[int]) -> ArchiveClaim:
    """Claim the archive `url` names for this process, running `shard_ids` (empty: every shard), before opening it.

    Raises:
        ArchiveInUse: another process holds it (SQLite), or one of the shards (Postgres).
        DatabaseUrlError: the URL is malformed, or (Postgres) the server cannot be reached or refuses it.
        OSError: (SQLite) the lock file cannot be created.
    """
    check_database_url(url)
    if is_postgres_url(url):
        return await claim_postgres_shards(url, shard_ids, describe_database_url(url))

    return await claim_sqlite(sqlite_path_from_url(url))
