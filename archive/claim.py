"""What a process holds while it serves from an archive (`archive.exclusive` takes it; the backends release it)."""

from __future__ import annotations

from typing import Protocol


class ArchiveClaim(Protocol):
    """What a process holds while it serves from an archive; released by the archive's `close`, or by any exit."""

    async def release(self) -> None: ...
