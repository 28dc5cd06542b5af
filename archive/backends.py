"""Opening the archive a `DATABASE_URL` names: the one place that knows both backends, so the archive's package and
its modules never import them (they import the package's record types: the other way would be a circle)."""

from __future__ import annotations

from typing import Any

from archive import Archive, check_database_url, is_postgres_url
from archive.sqlite_url import sqlite_path_from_url


async def open_archive(url: str, **options: Any) -> Archive:
    """Open (and migrate) the archive ``url`` names: ``sqlite:///path`` or ``postgresql://…``.

    ``options`` are the backend's `open` keywords (retention_days, flush_interval, batch_size, prune_interval,
    file_text_budget).

    Raises:
        DatabaseUrlError: the URL is malformed, or (Postgres) the server cannot be reached or refuses it.
    """
    check_database_url(url)
    if is_postgres_url(url):
        from archive.postgres import PostgresArchive  # asyncpg is loaded only when asked for

        return await PostgresArchive.open(url, **options)
    from archive.sqlite import SQLiteArchive  # aiosqlite is loaded only when asked for

    return await SQLiteArchive.open(sqlite_path_from_url(url), **options)
