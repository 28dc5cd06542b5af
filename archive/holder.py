"""Who holds the open archive, for the modules that write to it without opening or closing it."""

from __future__ import annotations

from typing import Protocol

from archive import Archive


class ArchiveHolder(Protocol):
    """The client, as the archive's holder: the null archive (archive/null.py) without DATABASE_URL and after close."""

    @property
    def archive(self) -> Archive: ...
