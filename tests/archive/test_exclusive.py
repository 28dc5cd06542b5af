"""Tests for one process per archive and shard (archive/exclusive.py): the SQLite file lock and Postgres's
advisory locks, taken as `ops.opening` takes them. Two claims in one process conflict as two processes' do: an
`flock` belongs to the open file, an advisory lock to the connection's session."""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path

import pytest

from archive.exclusive import ArchiveInUse, claim_archive, sqlite_lock_path
from ops.opening import claim_when_free, open_configured_archive
from tests.conftest import fresh_postgres_database


async def test_a_second_claim_on_a_sqlite_file_is_refused_naming_the_file_and_the_holder(tmp_path: Path) -> None:
    """While one claim holds the file, another is refused with its path and the holder's process id."""
    database = tmp_path / "data" / "parley.db"
    first = await claim_archive(f"sqlite:///{database}", frozenset())
    try:
        with pytest.raises(ArchiveInUse) as refused:
            await claim_archive(f"sqlite:///{database}", frozenset())
        assert str(refused.value) == f"{database} is in use by another Parley process (process {os.getpid()})"
        # Shards do not split a SQLite file: it has one writer.
        with pytest.raises(ArchiveInUse):
            await claim_archive(f"sqlite:///{database}", frozenset({1}))
    finally:
        await first.release()
    second = await claim_archive(f"sqlite:///{database}", frozenset())
    await second.release()
    assert sqlite_lock_path(database) == tmp_path / "data" / "parley.db.lock"


async def test_another_sqlite_file_is_not_held(tmp_path: Path) -> None:
    """A claim holds its own file only."""
    first = await claim_archive(f"sqlite:///{tmp_path / 'one.db'}", frozenset())
    second = await claim_archive(f"sqlite:///{tmp_path / 'two.db'}", frozenset())
    await first.release()
    await second.release()


async def test_the_archive_holds_its_claim_until_it_closes(make_settings, tmp_path: Path) -> None:
    """`open_configured_archive` claims before opening; closing the archive releases it for the next process."""
    settings = make_settings(database_url=f"sqlite:///{tmp_path / 'parley.db'}", archive_lock_wait_seconds=0)
    archive = await open_configured_archive(settings)
    try:
        with pytest.raises(ArchiveInUse):
            await open_configured_archive(settings)
    finally:
        await archive.close()
    archive = await open_configured_archive(settings)
    await archive.close()


async def test_a_refused_claim_leaves_the_holders_process_id_in_the_file(tmp_path: Path) -> None:
    """The refused process does not overwrite the lock file: the next refusal still names the holder."""
    database = tmp_path / "parley.db"
    first = await claim_archive(f"sqlite:///{database}", frozenset())
    try:
        for _ in range(2):
            with pytest.raises(ArchiveInUse, match=f"process {os.getpid()}"):
                await claim_archive(f"sqlite:///{database}", frozenset())
    finally:
        await first.release()


async def test_a_start_waits_for_the_holder_to_stop_as_a_redeploys_old_process_does(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Refused, a start says once that it waits, and takes the archive as soon as the holder lets go."""
    url = f"sqlite:///{tmp_path / 'parley.db'}"
    old = await claim_archive(url, frozenset())
    caplog.set_level(logging.INFO, logger="ops.opening")
    new = asyncio.create_task(claim_when_free(url, frozenset(), wait_seconds=60))
    try:
        while not caplog.records:  # noqa: ASYNC110 - the log line is the only sign the waiting has begun
            await asyncio.sleep(0.01)
        assert not new.done()
        await old.release()
        claim = await asyncio.wait_for(new, 10)
    finally:
        await old.release()
        new.cancel()
    await claim.release()
    [waiting] = [record.getMessage() for record in caplog.records]
    assert waiting.endswith(
        f"is in use by another Parley process (process {os.getpid()}): waiting up to 60 s for it to stop"
    )


async def test_a_start_gives_up_once_the_wait_is_over(tmp_path: Path) -> None:
    """Still held when ARCHIVE_LOCK_WAIT_SECONDS have passed: the refusal stands."""
    url = f"sqlite:///{tmp_path / 'parley.db'}"
    old = await claim_archive(url, frozenset())
    try:
        with pytest.raises(ArchiveInUse):
            await claim_when_free(url, frozenset(), wait_seconds=0.2)
    finally:
        await old.release()


# --- Postgres: per shard -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("held", "wanted", "refused_with"),
    [
        (frozenset(), frozenset(), "running some or all of the shards"),
        (frozenset(), frozenset({1}), "running every shard"),
        (frozenset({0, 1}), frozenset(), "running some or all of the shards"),
        (frozenset({0, 1}), frozenset({1, 2}), "running shard 1"),
        (frozenset({0}), frozenset({1}), None),
    ],
)
async def test_postgres_shards_are_claimed_one_process_each(
    postgres_server: str, held: frozenset[int], wanted: frozenset[int], refused_with: str | None
) -> None:
    """Overlapping shards, or every shard against any, are refused with the shard named; disjoint ones are not."""
    url = await fresh_postgres_database(postgres_server)
    first = await claim_archive(url, held)
    try:
        if refused_with is None:
            second = await claim_archive(url, wanted)
            await second.release()
        else:
            with pytest.raises(ArchiveInUse) as refused:
                await claim_archive(url, wanted)
            assert str(refused.value).endswith(f"is in use by another Parley process ({refused_with})")
            assert "parley_" in str(refused.value)  # the database is named, not its URL's credentials
    finally:
        await first.release()


async def test_a_refused_postgres_claim_keeps_none_of_its_locks(postgres_server: str) -> None:
    """Shards {0, 1} refused over shard 1 leave shard 0 free: nothing is held by a process that did not start."""
    url = await fresh_postgres_database(postgres_server)
    first = await claim_archive(url, frozenset({1}))
    try:
        with pytest.raises(ArchiveInUse):
            await claim_archive(url, frozenset({0, 1}))
        zero = await claim_archive(url, frozenset({0}))
        await zero.release()
    finally:
        await first.release()
    everything = await claim_archive(url, frozenset())
    await everything.release()
