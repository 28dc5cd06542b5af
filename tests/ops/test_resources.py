"""ops/resources.py: the archive and the stores in it, opened before the client is built and closed after it."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from archive import Archive
from archive.exclusive import ArchiveInUse
from archive.null import archive_off
from bot import build_client
from config import Settings
from ops.opening import ArchiveUnavailable
from ops.resources import open_resources

GUILD, CHANNEL, ALICE = 11, 22, 33


def archived(make_settings: Callable[..., Settings], tmp_path: Path, **overrides: object) -> Settings:
    return make_settings(
        llm_base_url="http://127.0.0.1:9/v1", database_url=f"sqlite:///{tmp_path / 'parley.db'}", **overrides
    )


async def test_without_database_url_the_client_is_built_over_the_null_archive_and_nothing_is_written(
    make_settings: Callable[..., Settings], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    settings = make_settings(llm_base_url="http://127.0.0.1:9/v1", database_url="")
    async with open_resources(settings) as resources:
        client = build_client(settings, resources)
        assert archive_off(client.archive)
        assert client.memory is None and client.knowledge is None
        client.usage.record(GUILD, CHANNEL, ALICE, 10, 5, model="m")
        assert client.usage.server_tokens(GUILD) == 15  # counted in memory all the same
        await client.close()
    assert await asyncio.to_thread(os.listdir, tmp_path) == []


async def test_the_client_receives_the_opened_archive_and_the_stores_in_it(
    make_settings: Callable[..., Settings], tmp_path: Path
) -> None:
    settings = archived(make_settings, tmp_path)
    async with open_resources(settings) as resources:
        client = build_client(settings, resources)
        assert client.archive is resources.archive and not archive_off(client.archive)
        assert client.memory is resources.memory is not None
        assert client.knowledge is resources.knowledge is not None
        assert client.usage is resources.usage
        await client.close()
        # The client is closed, its parts keep nothing more; the archive stays open until its opener closes it.
        assert archive_off(client.archive) and client.memory is None
        await resources.archive.set_state("still open", "yes")
        assert await resources.archive.get_state("still open") == "yes"


async def test_todays_tokens_are_taken_up_again_before_the_client_is_built(
    make_settings: Callable[..., Settings], tmp_path: Path
) -> None:
    settings = archived(make_settings, tmp_path)
    async with open_resources(settings) as resources:
        resources.usage.record(GUILD, CHANNEL, ALICE, 30, 20, model="m")
    async with open_resources(settings) as resources:
        assert resources.usage.server_tokens(GUILD) == 50


async def test_leaving_closes_the_archive_so_another_process_may_open_it(
    make_settings: Callable[..., Settings], tmp_path: Path
) -> None:
    settings = archived(make_settings, tmp_path, archive_lock_wait_seconds=0)
    async with open_resources(settings) as first:
        with pytest.raises(ArchiveInUse):
            async with open_resources(settings):
                pass
        archive: Archive = first.archive
    async with open_resources(settings) as again:
        assert await again.archive.get_state("anything") is None
    with pytest.raises(ValueError, match="closed"):  # aiosqlite's word for a closed connection
        await archive.get_state("anything")


async def test_an_archive_that_cannot_be_opened_stops_before_the_client_exists(
    make_settings: Callable[..., Settings], tmp_path: Path
) -> None:
    (tmp_path / "a folder").mkdir()
    settings = make_settings(llm_base_url="http://127.0.0.1:9/v1", database_url=f"sqlite:///{tmp_path / 'a folder'}")
    with pytest.raises(ArchiveUnavailable, match="cannot be opened"):
        async with open_resources(settings):
            pytest.fail("no resources without their archive")


def test_a_client_built_without_the_archive_its_settings_name_is_refused(
    make_settings: Callable[..., Settings], tmp_path: Path
) -> None:
    with pytest.raises(ValueError, match="open the archive first"):
        build_client(archived(make_settings, tmp_path))
