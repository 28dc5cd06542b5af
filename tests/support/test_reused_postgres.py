"""A finished test's Postgres database is handed to the next test as a new copy of the template would be, or not
at all (tests/support/reused_postgres.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from uuid import uuid4

import asyncpg
import pytest

from archive.backends import open_archive
from tests.conftest import _execute
from tests.support.archive_contract_support import REFUSE_MODES_POSTGRES, msg
from tests.support.postgres_support import database_url
from tests.support.reused_postgres import emptied, schema_of


@pytest.fixture
async def copies(postgres_server: str, migrated_template: str) -> AsyncIterator[list[tuple[str, str]]]:
    """Two new copies of the template (name, URL), dropped after the test."""
    made = []
    for _ in range(2):
        name = f"parley_{uuid4().hex}"
        await _execute(postgres_server, f'CREATE DATABASE "{name}" TEMPLATE "{migrated_template}" STRATEGY FILE_COPY')
        made.append((name, database_url(postgres_server, name)))
    yield made
    await _execute(postgres_server, *(f'DROP DATABASE "{name}" WITH (FORCE)' for name, _ in made))


async def contents(url: str) -> set[str]:
    """Every table's row count and every sequence's state: what a test could find different in a database."""
    connection = await asyncpg.connect(url)
    try:
        tables = [
            row[0] for row in await connection.fetch("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        ]
        counts = {f"{table} {await connection.fetchval(f'SELECT count(*) FROM {table}')}" for table in tables}
        sequences = await connection.fetch(
            "SELECT sequencename, last_value FROM pg_sequences WHERE schemaname = 'public'"
        )
        return counts | {f"{name} {value}" for name, value in sequences}
    finally:
        await connection.close()


async def test_a_used_database_is_handed_on_as_a_new_copy(postgres_server: str, copies: list[tuple[str, str]]) -> None:
    """Rows written, sequences drawn from and a session left open: emptied, it holds what a new copy holds."""
    [(_, new_url), (used, used_url)] = copies
    archive = await open_archive(used_url, retention_days=0)
    archive.add(msg(1, "the deploy moved to Friday"))
    archive.add_summary(msg(1, "x").channel_id, "a summary", msg(1, "x").created_at, (1, 1))
    await archive.flush()
    left_open = await asyncpg.connect(used_url)
    assert await contents(used_url) != await contents(new_url)

    assert await emptied(postgres_server, used, used_url, await schema_of(new_url))

    assert left_open.is_closed() or not await _answers(left_open)
    await archive.close()
    assert await contents(used_url) == await contents(new_url)


async def test_a_database_whose_schema_changed_is_not_handed_on(
    postgres_server: str, copies: list[tuple[str, str]]
) -> None:
    """A trigger the test added stays out of the next test: the database is reported changed, not emptied."""
    [(_, new_url), (used, used_url)] = copies
    connection = await asyncpg.connect(used_url)
    try:
        await connection.execute(REFUSE_MODES_POSTGRES.format("INSERT"))
    finally:
        await connection.close()

    assert not await emptied(postgres_server, used, used_url, await schema_of(new_url))


async def _answers(connection: asyncpg.Connection) -> bool:
    """Whether the session still answers a query (false once the server ended it)."""
    try:
        await connection.fetchval("SELECT 1")
    except (asyncpg.PostgresError, asyncpg.InterfaceError, ConnectionError):
        return False
    return True
