"""The knowledge base, built from the settings over the archive it keeps its documents in."""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any, Protocol

from archive import Archive
from config import Settings
from knowledge.base import KnowledgeBase
from knowledge.vectors import open_section_vectors

__all__ = ["KnowledgeBase", "open_knowledge"]


class Background(Protocol):
    """How work runs beside the bot (upkeep's BackgroundTasks, a layer above this one)."""

    def start(self, work: Coroutine[Any, Any, None], name: str) -> object: ...


async def open_knowledge(archive: Archive, settings: Settings, background: Background) -> KnowledgeBase:
    """The knowledge base over `archive`, with KNOWLEDGE_MAX_DOCUMENTS: ranking by full text, fused with vector
    search when EMBEDDING_MODEL is set and the database can keep vectors; the sections waiting for an embedding
    are then embedded in the background (`EmbeddedSections.keep_embedding`)."""
    vectors = await open_section_vectors(archive, settings.embedding_model, timeout=settings.embedding_timeout_seconds)
    if vectors is not None:
        background.start(vectors.keep_embedding(), "knowledge-embeddings")
    return KnowledgeBase(archive, vectors, max_documents=settings.knowledge_max_documents)
