"""What a process holds while it serves from an archive (`archive.exclusive` takes it; the backends release it)."""

from __future__ import annotations

from typing import Protocol


class ArchiveClaim(Protocol):
    """What a process holds while it serves from an archive; released by the archive's `close`, or by any exit.

    `sole`: no other process can write the archive while it is held (a SQLite file's lock; a Postgres shard's is
    not, since processes of other shards share the database).
    """

    sole: bool

    async def release(self) -> None: ...
