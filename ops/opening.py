"""Opening the archive DATABASE_URL names, with one line for the deployer when it cannot be opened or followed."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
from collections.abc import Iterator
from typing import TYPE_CHECKING

from archive import Archive, DatabaseUrlError, describe_database_url
from archive.backends import open_archive
from archive.exclusive import ArchiveClaim, ArchiveInUse, claim_archive
from archive.file_text import FileTextBudget
from config import Settings
from ops.shared import SharedSettings, follow_other_processes

if TYPE_CHECKING:
    from archive.changes import ChangeListener


log = logging.getLogger(__name__)
# How often a start that finds its archive held tries again while it waits (ARCHIVE_LOCK_WAIT_SECONDS).
_CLAIM_RETRY_SECONDS = 0.5


class ArchiveUnavailable(Exception):
    """The archive DATABASE_URL names cannot be opened or created (or its server reached)."""


async def open_configured_archive(settings: Settings) -> Archive:
    """The archive of DATABASE_URL, opened (created if new), held by this process for the shards it runs.

    Raises:
        ArchiveInUse: another process serves from it (SQLite), or runs one of this process's shards (Postgres).
        ArchiveUnavailable: it cannot be opened; the message names where it is, never its credentials.
    """
    url = settings.database_url
    with _unavailable_said(url):
        claim = await claim_when_free(url, settings.shard_ids, settings.archive_lock_wait_seconds)
    try:
        with _unavailable_said(url):
            return await open_archive(
                url,
                retention_days=settings.history_retention_days,
                file_text_budget=FileTextBudget(
                    settings.archive_file_text_channel_bytes, settings.archive_file_text_member_bytes
                ),
                claim=claim,
            )
    except BaseException:
        await claim.release()
        raise


async def claim_when_free(url: str, shard_ids: frozenset[int], wait_seconds: float) -> ArchiveClaim:
    """Claim the archive for `shard_ids`; while another process holds it, try again for up to `wait_seconds`.

    On a redeploy the host may start the new process before the old one has stopped (Railway stops the old one
    once the new one runs: https://docs.railway.com/guides/deployment-teardown), so the first refusal is
    waited out rather than made a failed start. Neither lock has a notification to await: this polls.

    Raises:
        ArchiveInUse: still held once `wait_seconds` have passed.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_seconds
    announced = False
    while True:
        try:
            return await claim_archive(url, shard_ids)
        except ArchiveInUse as refusal:
            left = deadline - loop.time()
            if left <= 0:
                raise
            if not announced:
                log.info("%s: waiting up to %g s for it to stop", refusal, wait_seconds)
                announced = True
            await asyncio.sleep(min(_CLAIM_RETRY_SECONDS, left))


@contextlib.contextmanager
def _unavailable_said(url: str) -> Iterator[None]:
    """What goes wrong opening the archive, as the one line of ArchiveUnavailable."""
    try:
        yield
    except DatabaseUrlError as error:
        raise ArchiveUnavailable(str(error)) from None
    except (OSError, sqlite3.Error, RuntimeError) as error:
        where = describe_database_url(url)
        raise ArchiveUnavailable(f"DATABASE_URL names {where}, which cannot be opened: {error}") from error


async def follow(settings: Settings, archive: Archive, shared: SharedSettings) -> ChangeListener | None:
    """With a Postgres archive, other processes' changes to the shared settings, as they are committed."""
    try:
        return await follow_other_processes(settings.database_url, archive, shared)
    except DatabaseUrlError as error:
        raise ArchiveUnavailable(str(error)) from None
