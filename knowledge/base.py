"""The knowledge base: the one service the search tool, the admins' commands and pins add, remove and search with.

Full-text ranking (the archive's) is the default. With a `SectionVectors` (embeddings, the `vectors` feature) a
search also asks it for the sections nearest in meaning, and the two rankings are fused by weighted reciprocal
rank fusion (Cormack, Clarke and Büttcher, SIGIR 2009: a section's score is the sum over the rankings of
weight / (k + its rank), with k = 60): ranks, not scores, are fused, because bm25's and a cosine's scales have
nothing in common. Each ranking gives as many candidates as hits are asked for, and the vectors' weigh
`VECTOR_WEIGHT` to full text's 1: measured on the knowledge bench (docs/benchmarks.md), a reworded question's
section is then found about as often as by the vectors alone (27%, full text 8%), and a question in the
documents' own words as often as by full text (0.97 to 0.99); more candidates, or equal weights, let the
words' near misses push the meaning's hit out of the first five. The vectors are an addition, never a
dependency: if they fail, a search falls back to full text and an added document stays added (the log says what
failed).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Collection, Iterable, Sequence
from typing import NamedTuple, Protocol

from archive.knowledge_types import (
    KnowledgeDocument,
    KnowledgeDocumentInfo,
    KnowledgeHit,
    KnowledgeStore,
    NoRoomForDocument,
)
from knowledge.confidence import Evidence

__all__ = [
    "QUOTE_CHARS",
    "RRF_K",
    "VECTOR_WEIGHT",
    "Consulted",
    "KnowledgeBase",
    "KnowledgeFull",
    "SectionVectors",
    "excerpt",
    "indexed_text",
    "reciprocal_rank_fusion",
]

logger = logging.getLogger(__name__)

RRF_K = 60
VECTOR_WEIGHT = 1.5
# The longest quote of a section a hit carries: five hits stay a few thousand characters of the model's context.
QUOTE_CHARS = 600
_WORD = re.compile(r"\w+")


class SectionVectors(Protocol):
    """Vector search over the knowledge base's sections (the `vectors` feature implements it)."""

    async def queue(self, guild_id: int, sections: Sequence[tuple[int, str]]) -> None:
        """Keep these (section id, text) of the server's to be embedded (committed before this returns)."""
        ...

    async def embed_waiting(self) -> int:
        """Embed what is queued (a failure leaves it queued); how many sections were embedded."""
        ...

    async def forget(self, section_ids: Sequence[int]) -> None:
        """Drop these sections' vectors (their sections are gone)."""
        ...

    async def nearest(self, guild_id: int, query: str, limit: int) -> list[int]:
        """The ids of the server's sections nearest in meaning to `query`, best first."""
        ...

    async def similarity(self, query: str, text: str) -> float | None:
        """The cosine similarity of `query` and `text`; None when they cannot be embedded."""
        ...


class Consulted(NamedTuple):
    """A search's hits and the evidence that they answer its question (knowledge/confidence.py judges it)."""

    hits: list[KnowledgeHit]
    evidence: Evidence


class KnowledgeFull(Exception):
    """The server has as many server-wide documents as it may keep; the message says so for the admin."""


class KnowledgeBase:
    """Adds, lists, removes and searches each server's documents (the store's) and, if given, their vectors.

    `max_documents` bounds a server's server-wide documents (admins' files; 0: no bound); a channel's documents
    (pins) are bounded by Discord's own cap on a channel's pins.
    """

    def __init__(self, store: KnowledgeStore, vectors: SectionVectors | None = None, *, max_documents: int = 0) -> None:
        self._store = store
        self._vectors = vectors
        self._max_documents = max_documents
        # One change at a time in this process, so that a document's vectors follow its sections in the order the
        # changes were made (the bound is the archive's count claim, which holds across processes too).
        self._changing = asyncio.Lock()
        # Whether each server has documents, as last read: every model request of an answer asks (tools/registry.py),
        # a read Postgres answers in about half a millisecond. Forgotten on each change, this process's or another's.
        self._has_documents: dict[int, bool] = {}
        # Counts what was forgotten, so that a read a change overtook is not kept.
        self._forgotten = 0

    async def add(self, document: KnowledgeDocument) -> int:
        """Store `document` in place of any with its source in its server, and index its sections; its id.

        Raises:
            KnowledgeFull: it is a new server-wide document and the server has `max_documents` of them.
            archive.ArchiveWriteFailed: nothing changed.
        """
        async with self._changing:
            try:
                added = await self._store.add_knowledge(document, most=self._max_documents)
            except NoRoomForDocument:
                raise KnowledgeFull(
                    f"This server already has {self._max_documents} documents, the most it may keep"
                    f" (KNOWLEDGE_MAX_DOCUMENTS={self._max_documents}): remove one first."
                ) from None
            finally:
                # Whatever came of it: a write that failed here may still have been committed.
                self.forget_cached(document.guild_id)
            await self._forget(added.replaced_section_ids)
            queued = await self._queue(document, added.section_ids)
        # Embedding waits for the provider and for whatever else is queued: outside the lock, so other changes
        # (a removal, another pin) need not wait for it. A section removed meanwhile keeps no vector
        # (archive/vectors.py stores one only while its text is still queued).
        if queued and self._vectors is not None:
            try:
                await self._vectors.embed_waiting()
            except Exception:
                logger.exception("knowledge: the sections of %s could not be indexed by meaning", document.source)
        return added.document_id

    async def _queue(self, document: KnowledgeDocument, section_ids: Sequence[int]) -> bool:
        """Queue the document's sections to be embedded; whether any was (a failure is logged: full text only)."""
        if self._vectors is None or not section_ids:
            return False
        texts = [indexed_text(section.heading, section.text) for section in document.sections]
        try:
            await self._vectors.queue(document.guild_id, list(zip(section_ids, texts, strict=True)))
        except Exception:
            logger.exception("knowledge: the sections of %s could not be indexed by meaning", document.source)
            return False
        return True

    async def remove(self, guild_id: int, document_id: int) -> bool:
        """Remove the server's document `document_id` with its vectors; False if the server has no such document."""
        async with self._changing:
            try:
                removed = await self._store.remove_knowledge(guild_id, document_id)
            finally:
                self.forget_cached(guild_id)
            if removed is None:
                return False
            await self._forget(removed)
            return True

    async def remove_source(self, guild_id: int, source: str) -> bool:
        """Remove the server's document from `source` (a pin that was unpinned); False if there is none."""
        document_id = await self._store.knowledge_document_id(guild_id, source)
        return document_id is not None and await self.remove(guild_id, document_id)

    async def has_documents(self, guild_id: int) -> bool:
        """Whether the server has any document (the search tool is offered only then); read once, then kept until
        `forget_cached`."""
        known = self._has_documents.get(guild_id)
        if known is not None:
            return known
        forgotten = self._forgotten
        has = await self._store.has_knowledge(guild_id)
        if forgotten == self._forgotten:
            self._has_documents[guild_id] = has
        return has

    def forget_cached(self, guild_id: int | None = None) -> None:
        """Read whether the server (None: every server) has documents again when next asked: its documents changed,
        here or in another process sharing the archive (ops/shared.py)."""
        self._forgotten += 1
        if guild_id is None:
            self._has_documents.clear()
        else:
            self._has_documents.pop(guild_id, None)

    async def documents(self, guild_id: int) -> list[KnowledgeDocumentInfo]:
        """The server's documents, oldest first."""
        return await self._store.knowledge_documents(guild_id)

    async def search(
        self, guild_id: int, query: str, *, limit: int = 5, channel_ids: Collection[int]
    ) -> list[KnowledgeHit]:
        """The server's sections best matching `query`, best first, among its server-wide documents and those of
        `channel_ids` (the channels the asker may read); each quote is the passage of the section that matched."""
        hits, _, _ = await self._ranked(guild_id, query, limit, channel_ids)
        return [hit._replace(quote=excerpt(hit.quote, query)) for hit in hits]

    async def consult(self, guild_id: int, query: str, *, limit: int = 5, channel_ids: Collection[int]) -> Consulted:
        """`search`'s hits with the evidence that they answer `query`, for `knowledge.confidence.answers`: the
        best full-text score and the similarity of `query` and the section nearest it in meaning."""
        hits, text_score, nearest = await self._ranked(guild_id, query, limit, channel_ids)
        similarity = await self._similarity(query, nearest)
        quoted = [hit._replace(quote=excerpt(hit.quote, query)) for hit in hits]
        return Consulted(quoted, Evidence(similarity, text_score))

    async def _ranked(
        self, guild_id: int, query: str, limit: int, channel_ids: Collection[int]
    ) -> tuple[list[KnowledgeHit], float, KnowledgeHit | None]:
        """The best `limit` hits (whole sections), full text's best score, and the hit nearest in meaning."""
        if limit <= 0:
            return [], 0.0, None
        by_text = await self._store.search_knowledge(guild_id, query, limit=limit, channel_ids=channel_ids)
        text_score = by_text[0].score if by_text else 0.0
        nearest = await self._nearest(guild_id, query, limit)
        if not nearest:
            return by_text[:limit], text_score, None
        found = {hit.section_id: hit for hit in by_text}
        # The vectors know nothing of channels: only sections the asker may read are read back.
        missing = [section_id for section_id in nearest if section_id not in found]
        for hit in await self._store.sections_by_id(missing, guild_id=guild_id, channel_ids=channel_ids):
            found[hit.section_id] = hit
        readable = [section_id for section_id in nearest if section_id in found]
        hits = _fused(by_text, readable, found, limit)
        return hits, text_score, found[readable[0]] if readable else None

    async def _similarity(self, query: str, hit: KnowledgeHit | None) -> float:
        if self._vectors is None or hit is None:
            return 0.0
        try:
            similarity = await self._vectors.similarity(query, indexed_text(hit.heading, hit.quote))
        except Exception:
            logger.exception("knowledge: the question's similarity to its nearest section could not be measured")
            return 0.0
        return similarity or 0.0

    async def _nearest(self, guild_id: int, query: str, limit: int) -> list[int]:
        if self._vectors is None:
            return []
        try:
            return await self._vectors.nearest(guild_id, query, limit)
        except Exception:
            logger.exception("knowledge: the search by meaning failed; searching the words alone")
            return []

    async def _forget(self, section_ids: Sequence[int]) -> None:
        if self._vectors is None or not section_ids:
            return
        try:
            await self._vectors.forget(section_ids)
        except Exception:
            # The sections are gone from the archive, so a vector left behind is never read back (`_ranked` reads
            # each section from the archive); it costs space until the vectors are rebuilt.
            logger.exception("knowledge: the vectors of %d removed sections could not be dropped", len(section_ids))


def _fused(
    by_text: list[KnowledgeHit], nearest: list[int], found: dict[int, KnowledgeHit], limit: int
) -> list[KnowledgeHit]:
    """The best `limit` of both rankings by weighted reciprocal rank fusion, each hit scored with its fused score."""
    fused = reciprocal_rank_fusion([[hit.section_id for hit in by_text], nearest], weights=(1.0, VECTOR_WEIGHT))
    return [found[section_id]._replace(score=score) for section_id, score in fused.items()][:limit]


def reciprocal_rank_fusion(
    rankings: Iterable[Sequence[int]], k: int = RRF_K, weights: Sequence[float] | None = None
) -> dict[int, float]:
    """Each id's fused score, sum of weight / (k + rank) over the rankings it is in (rank 1 first; each ranking's
    weight 1 unless `weights` gives them), best first; ties keep the order in which the ids first appear."""
    scores: dict[int, float] = {}
    for number, ranking in enumerate(rankings):
        weight = 1.0 if weights is None else weights[number]
        for rank, item in enumerate(dict.fromkeys(ranking), start=1):
            scores[item] = scores.get(item, 0.0) + weight / (k + rank)
    return dict(sorted(scores.items(), key=lambda entry: -entry[1]))


def excerpt(text: str, query: str, max_chars: int = QUOTE_CHARS) -> str:
    """`text` whole if it fits in `max_chars`, else the `max_chars` around its first word of `query` (from that
    line's start, or its sentence's), cut at spaces and marked with "…" where text was left out."""
    if len(text) <= max_chars:
        return text
    words = {word.casefold() for word in _WORD.findall(query) if len(word) > 2}
    first = next((match.start() for match in _WORD.finditer(text) if match.group().casefold() in words), 0)
    sentence = text.rfind(". ", 0, first)
    start = max(text.rfind("\n", 0, first) + 1, sentence + 2 if sentence >= 0 else 0, first - max_chars // 3)
    if start > 0 and not text[start - 1].isspace() and (space := text.find(" ", start, first)) != -1:
        start = space + 1
    end = start + max_chars
    if end < len(text) and (space := text.rfind(" ", start, end)) > start:
        end = space
    return ("…" if start > 0 else "") + text[start:end].strip() + ("…" if end < len(text) else "")


def indexed_text(heading: str, text: str) -> str:
    """What a section's vector is made from: its heading path gives a short section its subject."""
    return f"{heading}\n\n{text}" if heading else text
