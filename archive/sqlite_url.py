"""The SQLite archive's file, as ``DATABASE_URL`` names it."""

from __future__ import annotations

from pathlib import Path

_URL_PREFIX = "sqlite:///"


def sqlite_path_from_url(url: str) -> Path:
    """Return the file path of a ``sqlite:///relative`` or ``sqlite:////absolute`` URL.

    Raises ``ValueError`` for any other scheme or an empty path.
    """
    if not url.startswith(_URL_PREFIX):
        raise ValueError(
            f"DATABASE_URL must be sqlite:///relative/path.db or "
            f"sqlite:////absolute/path.db (only SQLite is supported), got {url!r}"
        )
    path = url.removeprefix(_URL_PREFIX)
    if not path or path == ":memory:":
        raise ValueError(f"DATABASE_URL must name a database file, got {url!r}")
    return Path(path)
