"""What every table mixin of the archive takes from its backend: the write queue and the read connection.

The mixins (`stores.py`, `members.py`, `digests.py`, `reminders.py`, `moderation.py`, `knowledge.py`,
`pin_channels.py`, `vectors.py`) each add named reads and writes of their tables; `QueuedWrites`, `BatchWriter` and
the two backends give them these four, so each mixin is written once for SQLite and Postgres.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

from archive import Write


class BackendTables(ABC):
    """The queue and read connection a backend lends its table mixins."""

    @abstractmethod
    def _enqueue(self, kind: Write, params: tuple[Any, ...]) -> None: ...

    @abstractmethod
    async def flush(self) -> None: ...

    @abstractmethod
    def _commit_soon(self) -> object: ...

    @abstractmethod
    def _sole_writer(self) -> bool: ...

    @abstractmethod
    async def read(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[tuple[Any, ...]]: ...

    @abstractmethod
    async def new_id(self, table: str) -> int: ...
