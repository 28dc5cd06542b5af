"""An empty SQLite archive of the newest schema, migrated once per process and copied wherever a test wants one.

Opening a copy takes about 3 ms where migrating a new file takes 30-50 (25 migrations, each a transaction of its
own), and the fast suite opens several hundred: the `archive_url` fixture's SQLite files and the end-to-end bots'.
The Postgres tests do the same with a database (`migrated_template` in tests/conftest.py); the migration itself is
tested on files and databases that start empty (`unmigrated_archive_url`).
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

from archive.backends import open_archive

_migrated: Path | None = None


async def place_migrated_sqlite(path: Path) -> None:
    """Put at `path` (its folder made if missing) an archive `open_archive` has migrated that holds no rows."""
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(await _migrated_file(), path)


async def _migrated_file() -> Path:
    """This process's migrated file, made on first use; closed (so checkpointed: one file, no -wal beside it)."""
    global _migrated
    if _migrated is None:
        folder = Path(tempfile.mkdtemp(prefix="parley-migrated-"))
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        archive = await open_archive(f"sqlite:///{folder / 'parley.db'}", retention_days=0)
        await archive.close()
        _migrated = folder / "parley.db"
    return _migrated
