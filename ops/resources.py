"""What the client is built over, opened before it exists and closed after it: the archive and the stores kept in it.

As discord.py's examples/advanced_startup.py has it: `main` opens the resources, hands them to the client, and they
outlive it. With DATABASE_URL empty the archive is the null one (archive/null.py) and there are no stores in it.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from archive import Archive
from archive.null import NULL_ARCHIVE
from config import Settings
from knowledge.opening import KnowledgeBase, open_knowledge
from memory.store import MemoryStore
from ops.opening import open_configured_archive
from upkeep.background import BackgroundTasks
from usage.budget import UsageLedger

__all__ = ["Resources", "open_resources"]


@dataclass(frozen=True, slots=True)
class Resources:
    """The opened archive (the null archive when it is off), today's tokens taken up from it, and the stores in it
    (None when it is off). `Resources()`: DATABASE_URL empty, nothing to open or close."""

    archive: Archive = NULL_ARCHIVE
    usage: UsageLedger = field(default_factory=UsageLedger)
    memory: MemoryStore | None = None
    knowledge: KnowledgeBase | None = None


@contextlib.asynccontextmanager
async def open_resources(settings: Settings) -> AsyncIterator[Resources]:
    """The archive DATABASE_URL names, opened (or the null one), with today's tokens read from it and the memory store
    and the knowledge base in it; on leaving, the knowledge base's embedding stops, the tokens are no longer written
    there, and the archive closes.

    Raises:
        ArchiveInUse, ArchiveUnavailable: as `open_configured_archive`, before anything else is opened.
    """
    if not settings.archive_enabled:
        yield Resources()
        return
    archive = await open_configured_archive(settings)
    embedding = BackgroundTasks()
    usage = UsageLedger()
    try:
        await usage.attach(archive)
        knowledge = await open_knowledge(archive, settings, embedding)
        yield Resources(archive, usage, await MemoryStore.open(archive), knowledge)
    finally:
        await embedding.close()
        usage.detach()
        await archive.close()
