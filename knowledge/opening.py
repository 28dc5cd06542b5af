"""The knowledge base the client holds, built from the settings over the archive it keeps its documents in."""

from __future__ import annotations

from archive.knowledge_types import KnowledgeStore
from config import Settings
from knowledge.base import KnowledgeBase

__all__ = ["KnowledgeBase", "open_knowledge"]


def open_knowledge(store: KnowledgeStore, settings: Settings) -> KnowledgeBase:
    """The knowledge base over `store` (the archive), ranking by full text, with KNOWLEDGE_MAX_DOCUMENTS."""
    return KnowledgeBase(store, max_documents=settings.knowledge_max_documents)
