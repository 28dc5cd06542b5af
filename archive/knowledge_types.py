"""The knowledge base's values and its store's Protocol (archive/knowledge.py has the tables; knowledge/ the rules).

Apart from archive/knowledge.py so that the archive's `Archive` Protocol can name the store without a circle.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple, Protocol

__all__ = [
    "KnowledgeAdded",
    "KnowledgeDocument",
    "KnowledgeDocumentInfo",
    "KnowledgeHit",
    "KnowledgeSearch",
    "KnowledgeSection",
    "KnowledgeStore",
    "NoRoomForDocument",
]


class KnowledgeSection(NamedTuple):
    """A part of a document: its heading path ("Install > Docker"; "" when it has none) and its text."""

    heading: str
    text: str


@dataclass(frozen=True, slots=True)
class KnowledgeDocument:
    """A document to add: `source` is unique in its server (`file:<name>`, `pin:<channel_id>:<message_id>`);
    `channel_id` is None for a server-wide document, else the only channel whose readers may find it."""

    guild_id: int
    source: str
    title: str
    sections: Sequence[KnowledgeSection]
    added_by: int
    added_at: datetime
    channel_id: int | None = None


class KnowledgeDocumentInfo(NamedTuple):
    """A stored document as listed: its id, where it came from, and how many sections it has."""

    id: int
    source: str
    title: str
    channel_id: int | None
    sections: int
    added_by: int
    added_at: datetime


class KnowledgeHit(NamedTuple):
    """A section found by a search: its document, heading and a quote of its text; a higher score is better."""

    document_id: int
    section_id: int
    title: str
    heading: str
    quote: str
    source: str
    channel_id: int | None
    score: float


class KnowledgeAdded(NamedTuple):
    """What adding a document stored: its id, its sections' ids in order, and the ids of the sections of the
    version it replaced (gone now)."""

    document_id: int
    section_ids: list[int]
    replaced_section_ids: list[int]


class NoRoomForDocument(Exception):
    """A new server-wide document found its server's bound of documents reached (archive/knowledge.py's claim)."""


class KnowledgeStore(Protocol):
    """The knowledge base's documents and sections (knowledge/base.py's rules)."""

    async def add_knowledge(self, document: KnowledgeDocument, *, most: int = 0) -> KnowledgeAdded: ...
    async def remove_knowledge(self, guild_id: int, document_id: int) -> list[int] | None: ...
    async def knowledge_document_id(self, guild_id: int, source: str) -> int | None: ...
    async def has_knowledge(self, guild_id: int) -> bool: ...
    async def knowledge_documents(self, guild_id: int) -> list[KnowledgeDocumentInfo]: ...
    async def search_knowledge(
        self, guild_id: int, query: str, *, limit: int, channel_ids: Collection[int]
    ) -> list[KnowledgeHit]: ...
    async def sections_by_id(
        self, section_ids: Sequence[int], *, guild_id: int, channel_ids: Collection[int]
    ) -> list[KnowledgeHit]: ...


class KnowledgeSearch(Protocol):
    """What the answer agent's `search_knowledge` tool needs of the knowledge base (knowledge/base.py's
    `KnowledgeBase`): whether a server has documents, and a search within it."""

    async def has_documents(self, guild_id: int) -> bool: ...

    async def search(
        self, guild_id: int, query: str, *, limit: int = 5, channel_ids: Collection[int]
    ) -> list[KnowledgeHit]: ...
