"""Who holds the open archive, for the modules that write to it without opening or closing it (bot.py's
OpenStores)."""

from __future__ import annotations

from typing import Protocol

from archive import Archive


class ArchiveHolder(Protocol):
    """The archive's holder: the null archive (archive/null.py) without DATABASE_URL and after close."""

    @property
    def archive(self) -> Archive: ...
