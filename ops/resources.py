"""What the client is built over, opened before it exists and closed after it: the archive and the stores kept in it.

As discord.py's examples/advanced_startup.py has it: `main` opens the resources, hands them to the client, and they
outlive it. With DATABASE_URL empty the archive is the null one (archive/null.py) and there are no stores in it.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

from archive import Archive
from archive.null import NULL_ARCHIVE
from config import Settings
from knowledge.opening import KnowledgeBase, open_knowledge
from memory.store import MemoryStore
from ops.opening import open_configured_archive
from upkeep.background import BackgroundTasks

__all__ = ["NO_RESOURCES", "Resources", "open_resources"]


@dataclass(frozen=True, slots=True)
class Resources:
    """The opened archive (the null archive when it is off), and the stores in it (None when it is off)."""

    archive: Archive
    memory: MemoryStore | None = None
    knowledge: KnowledgeBase | None = None


# DATABASE_URL empty: nothing to open, nothing to close.
NO_RESOURCES = Resources(NULL_ARCHIVE)


@dataclass(slots=True)
class _KnowledgeHost:
    """What the knowledge base is opened with: the settings, and where its sections are embedded meanwhile."""

    settings: Settings
    background: BackgroundTasks


@contextlib.asynccontextmanager
async def open_resources(settings: Settings) -> AsyncIterator[Resources]:
    """The archive DATABASE_URL names, opened (or the null one), with the memory store and the knowledge base in it;
    on leaving, the knowledge base's embedding stops, then the archive closes.

    Raises:
        ArchiveInUse, ArchiveUnavailable: as `open_configured_archive`, before anything else is opened.
    """
    if not settings.archive_enabled:
        yield NO_RESOURCES
        return
    archive = await open_configured_archive(settings)
    embedding = BackgroundTasks()
    try:
        knowledge = await open_knowledge(archive, _KnowledgeHost(settings, embedding))
        yield Resources(archive, await MemoryStore.open(archive), knowledge)
    finally:
        await embedding.close()
        await archive.close()
