"""The knowledge base's documents and their sections, with a full-text index, on both backends.

A document is what an admin added to a server (a file) or a pinned message, split into sections
(knowledge/sections.py); `source` names it uniquely in its server, so adding it again replaces it. A document
with a channel (a pin) is found only by askers who may read that channel; one without is server-wide.

Adding a document is one queued write, so the writer commits it (the old version's removal, the document and
every section) in one transaction: a failure leaves the old version as it was, never half a document. That
write carries its document as one JSON parameter, because each of its statements needs a different part of it
and a statement must bind every parameter it is given. The search SQL differs per backend (FTS5's bm25,
Postgres's tsvector and ts_rank), so each backend names its own `KnowledgeDialect`.
"""

from __future__ import annotations

import asyncio
import json
from abc import abstractmethod
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from archive import ArchiveWriteFailed, Write, folded_words
from archive.knowledge_types import (
    KnowledgeAdded,
    KnowledgeDocument,
    KnowledgeDocumentInfo,
    KnowledgeHit,
    KnowledgeSection,
    KnowledgeStore,
    NoRoomForDocument,
)
from archive.tables import BackendTables

__all__ = [
    "POSTGRES_KNOWLEDGE",
    "SQLITE_KNOWLEDGE",
    "KnowledgeAdded",
    "KnowledgeDialect",
    "KnowledgeDocument",
    "KnowledgeDocumentInfo",
    "KnowledgeHit",
    "KnowledgeSection",
    "KnowledgeStore",
    "KnowledgeTables",
    "NoRoomForDocument",
]
from archive.text import safe_text
from archive.times import from_ms, to_ms


@dataclass(frozen=True, slots=True)
class KnowledgeDialect:
    """A backend's statements for the knowledge tables.

    `search_sql` takes :match, :guild, :channels and :limit; `sections_sql` :ids, :guild and :channels; `ids`
    turns a list of ids into what :channels and :ids take on that backend.
    """

    add: Write
    search_sql: str
    sections_sql: str
    ids: Callable[[Collection[int]], Any]


_HIT_COLUMNS = "d.id, s.id, d.title, s.heading, s.text, d.source, d.channel_id"
_DOCUMENT_FIELDS = "guild_id, source, title, channel_id, added_by, added_at"
# The channels the asker may read, as a condition on the document `d`.
_READABLE = "(d.channel_id IS NULL OR d.channel_id IN (SELECT value FROM json_each(:channels)))"
_READABLE_POSTGRES = "(d.channel_id IS NULL OR d.channel_id = ANY(CAST(:channels AS BIGINT[])))"


def _json_field(name: str, cast: str) -> str:
    return f"CAST(json_extract(?1, '$.{name}') AS {cast})"


def _jsonb_field(name: str, cast: str) -> str:
    return f"CAST(CAST(?1 AS jsonb) ->> '{name}' AS {cast})"


def _add_write(name: str, field: Callable[[str, str], str], insert_sections: str) -> Write:
    """The add of one document (?1: `_document_json`): the old version of its source out, then it and its
    sections in. The document goes in only if there is room, in one count claim: it replaces one, is a channel's,
    its server has no bound (`most` 0), or the server has fewer than `most` server-wide documents; its sections go
    in only if it did."""
    guild = field("guild_id", "BIGINT")
    same_source = f"guild_id = {guild} AND source = {field('source', 'TEXT')}"
    values = ", ".join(
        field(column, "TEXT" if column in {"source", "title"} else "BIGINT")
        for column in ("id", *_DOCUMENT_FIELDS.split(", "))
    )
    most = field("most", "BIGINT")
    room = (
        f"{field('replacing', 'BIGINT')} = 1 OR {field('channel_id', 'BIGINT')} IS NOT NULL OR {most} = 0"
        f" OR (SELECT count(*) FROM knowledge_documents WHERE guild_id = {guild} AND channel_id IS NULL) < {most}"
    )
    stored = f"EXISTS (SELECT 1 FROM knowledge_documents WHERE id = {field('id', 'BIGINT')})"
    return Write(
        name,
        (
            "DELETE FROM knowledge_sections WHERE document_id IN"
            f" (SELECT id FROM knowledge_documents WHERE {same_source})",
            f"DELETE FROM knowledge_documents WHERE {same_source}",
            f"INSERT INTO knowledge_documents (id, {_DOCUMENT_FIELDS}) SELECT {values} WHERE {room}",
            f"{insert_sections} WHERE {stored}",
        ),
        claim_scope=_guild_of,
    )


def _guild_of(params: tuple[Any, ...]) -> int:
    """The server an add write (?1: `_document_json`) claims a document in."""
    return int(json.loads(params[0])["guild_id"])


SQLITE_KNOWLEDGE = KnowledgeDialect(
    add=_add_write(
        "add_knowledge",
        _json_field,
        "INSERT INTO knowledge_sections (document_id, position, heading, text)"
        " SELECT json_extract(?1, '$.id'), key, json_extract(value, '$.heading'), json_extract(value, '$.text')"
        " FROM json_each(?1, '$.sections')",
    ),
    # The heading weighs twice a word of the text: a question naming a section's subject should find it first.
    # CROSS JOIN fixes SQLite's join order: without statistics its planner would walk the server's documents and
    # their sections instead of looking up the matched or asked-for sections by id (4 ms for 20 ids at 10,000
    # sections, bench/bench_knowledge.py). https://www.sqlite.org/optoverview.html#crossjoin
    search_sql=f"""
        SELECT {_HIT_COLUMNS}, -bm25(knowledge_fts, 2.0, 1.0) AS score
        FROM knowledge_fts
            CROSS JOIN knowledge_sections AS s ON s.id = knowledge_fts.rowid
            CROSS JOIN knowledge_documents AS d ON d.id = s.document_id
        WHERE knowledge_fts MATCH :match AND d.guild_id = :guild AND {_READABLE}
        ORDER BY score DESC, s.id
        LIMIT :limit
    """,
    sections_sql=f"""
        SELECT {_HIT_COLUMNS}, 0.0
        FROM knowledge_sections AS s CROSS JOIN knowledge_documents AS d ON d.id = s.document_id
        WHERE s.id IN (SELECT value FROM json_each(:ids)) AND d.guild_id = :guild AND {_READABLE}
    """,
    ids=lambda values: json.dumps(sorted(values)),
)

POSTGRES_KNOWLEDGE = KnowledgeDialect(
    # The words are folded in Python (archive.folded_words), as for messages, so that both backends match alike.
    add=_add_write(
        "add_knowledge",
        _jsonb_field,
        "INSERT INTO knowledge_sections (document_id, position, heading, text, words)"
        f" SELECT {_jsonb_field('id', 'BIGINT')}, s.position, s.heading, s.text,"
        " setweight(to_tsvector('simple', s.heading_words), 'B') || to_tsvector('simple', s.text_words)"
        " FROM jsonb_to_recordset(CAST(?1 AS jsonb) -> 'sections')"
        " AS s(position INTEGER, heading TEXT, text TEXT, heading_words TEXT, text_words TEXT)",
    ),
    search_sql=f"""
        SELECT {_HIT_COLUMNS}, ts_rank(s.words, query) AS score
        FROM knowledge_sections AS s JOIN knowledge_documents AS d ON d.id = s.document_id,
            to_tsquery('simple', :match) AS query
        WHERE s.words @@ query AND d.guild_id = :guild AND {_READABLE_POSTGRES}
        ORDER BY score DESC, s.id
        LIMIT :limit
    """,
    sections_sql=f"""
        SELECT {_HIT_COLUMNS}, 0.0 FROM knowledge_sections AS s JOIN knowledge_documents AS d ON d.id = s.document_id
        WHERE s.id = ANY(CAST(:ids AS BIGINT[])) AND d.guild_id = :guild AND {_READABLE_POSTGRES}
    """,
    ids=list,
)

_REMOVE = Write(
    "remove_knowledge",
    ("DELETE FROM knowledge_sections WHERE document_id = ?1", "DELETE FROM knowledge_documents WHERE id = ?1"),
)
_SECTION_IDS = "SELECT id FROM knowledge_sections WHERE document_id = ? ORDER BY position"
_DOCUMENTS_SQL = """
    SELECT d.id, d.source, d.title, d.channel_id, count(s.id), d.added_by, d.added_at
    FROM knowledge_documents AS d LEFT JOIN knowledge_sections AS s ON s.document_id = d.id
    WHERE d.guild_id = ? GROUP BY d.id ORDER BY d.id
"""


class KnowledgeTables(BackendTables):
    """`KnowledgeStore` on a backend's queue and read connection."""

    knowledge_dialect: ClassVar[KnowledgeDialect]

    @abstractmethod
    def _memory_match(self, query: str, op: str) -> str | None:
        """Free text as the backend's match expression: all its words with "AND", any with "OR"; None: no word."""

    async def add_knowledge(self, document: KnowledgeDocument, *, most: int = 0) -> KnowledgeAdded:
        """Store `document` in place of any with its source in its server, if there is room for it: a new
        server-wide document needs its server to have fewer than `most` (0: no bound), counted in one claim with
        the insert (`_add_write`); returns once committed.

        Raises:
            NoRoomForDocument: the server has `most` server-wide documents; nothing changed.
            ArchiveWriteFailed: nothing was stored (the writer logs why); a replaced version is still there.
        """
        document_id = await self.new_id("knowledge_documents")
        replaced_id = await self.knowledge_document_id(document.guild_id, document.source)
        replaced = await self._section_ids(replaced_id) if replaced_id is not None else []
        # Folding a long document's words takes milliseconds: off the event loop.
        payload = await asyncio.to_thread(_document_json, document_id, document, most, replaced_id is not None)
        self._enqueue(self.knowledge_dialect.add, (payload,))
        await self.flush()
        section_ids = await self._section_ids(document_id)
        stored = await self.read("SELECT 1 FROM knowledge_documents WHERE id = ?", (document_id,))
        if not stored and await self._full(document, most):
            raise NoRoomForDocument(document.source)
        if not stored or len(section_ids) != len(document.sections):
            raise ArchiveWriteFailed(f"the document {document.source!r} could not be stored")
        return KnowledgeAdded(document_id, section_ids, replaced)

    async def _full(self, document: KnowledgeDocument, most: int) -> bool:
        if not most or document.channel_id is not None:
            return False
        documents = await self.knowledge_documents(document.guild_id)
        return sum(info.channel_id is None for info in documents) >= most

    async def remove_knowledge(self, guild_id: int, document_id: int) -> list[int] | None:
        """Delete the server's document `document_id`; returns once committed, with its sections' ids, or None if
        the server has no such document.

        Raises:
            ArchiveWriteFailed: the document is still there (the writer logs why).
        """
        found = await self.read(
            "SELECT 1 FROM knowledge_documents WHERE id = ? AND guild_id = ?", (document_id, guild_id)
        )
        if not found:
            return None
        section_ids = await self._section_ids(document_id)
        self._enqueue(_REMOVE, (document_id,))
        await self.flush()
        if await self.read("SELECT 1 FROM knowledge_documents WHERE id = ?", (document_id,)):
            raise ArchiveWriteFailed(f"the document {document_id} could not be removed")
        return section_ids

    async def knowledge_document_id(self, guild_id: int, source: str) -> int | None:
        """The id of the server's document from `source`, or None."""
        rows = await self.read(
            "SELECT id FROM knowledge_documents WHERE guild_id = ? AND source = ?", (guild_id, source)
        )
        return next((int(document_id) for (document_id,) in rows), None)

    async def has_knowledge(self, guild_id: int) -> bool:
        """Whether the server has any document."""
        return bool(await self.read("SELECT 1 FROM knowledge_documents WHERE guild_id = ? LIMIT 1", (guild_id,)))

    async def knowledge_documents(self, guild_id: int) -> list[KnowledgeDocumentInfo]:
        """The server's documents, oldest first."""
        rows = await self.read(_DOCUMENTS_SQL, (guild_id,))
        return [
            KnowledgeDocumentInfo(
                int(document_id), source, title, _maybe_int(channel_id), int(count), int(added_by), from_ms(added_at)
            )
            for document_id, source, title, channel_id, count, added_by, added_at in rows
        ]

    async def search_knowledge(
        self, guild_id: int, query: str, *, limit: int, channel_ids: Collection[int]
    ) -> list[KnowledgeHit]:
        """The server's sections that best match any of `query`'s words, best first, among the server-wide
        documents and those of `channel_ids`; each hit's quote is the section's whole text."""
        match = self._memory_match(query, "OR")
        if match is None or limit <= 0:
            return []
        dialect = self.knowledge_dialect
        params = {"match": match, "guild": guild_id, "channels": dialect.ids(channel_ids), "limit": limit}
        return [_hit(row) for row in await self.read(dialect.search_sql, params)]

    async def sections_by_id(
        self, section_ids: Sequence[int], *, guild_id: int, channel_ids: Collection[int]
    ) -> list[KnowledgeHit]:
        """These sections in the given order (score 0.0), leaving out those not in the server's documents that
        `channel_ids`' readers may read; each quote is the section's whole text."""
        if not section_ids:
            return []
        dialect = self.knowledge_dialect
        params = {"ids": dialect.ids(section_ids), "guild": guild_id, "channels": dialect.ids(channel_ids)}
        found = {hit.section_id: hit for hit in map(_hit, await self.read(dialect.sections_sql, params))}
        return [found[section_id] for section_id in section_ids if section_id in found]

    async def _section_ids(self, document_id: int) -> list[int]:
        return [int(section_id) for (section_id,) in await self.read(_SECTION_IDS, (document_id,))]


def _document_json(document_id: int, document: KnowledgeDocument, most: int, replacing: bool) -> str:
    """The add write's one parameter: the document's fields, its sections (with their folded words, which
    Postgres indexes), and its claim's bound (`most`) and whether it replaces a document."""
    sections = [
        {
            "position": position,
            "heading": safe_text(section.heading),
            "text": safe_text(section.text),
            "heading_words": folded_words(section.heading),
            "text_words": folded_words(section.text),
        }
        for position, section in enumerate(document.sections)
    ]
    return json.dumps(
        {
            "id": document_id,
            "guild_id": document.guild_id,
            "source": safe_text(document.source),
            "title": safe_text(document.title),
            "channel_id": document.channel_id,
            "added_by": document.added_by,
            "added_at": to_ms(document.added_at),
            "most": most,
            "replacing": int(replacing),
            "sections": sections,
        }
    )


def _hit(row: tuple[Any, ...]) -> KnowledgeHit:
    document_id, section_id, title, heading, text, source, channel_id, score = row
    return KnowledgeHit(
        int(document_id), int(section_id), title, heading, text, source, _maybe_int(channel_id), float(score)
    )


def _maybe_int(value: Any) -> int | None:
    return None if value is None else int(value)
