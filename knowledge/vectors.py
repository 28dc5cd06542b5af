"""Vector search for the knowledge base: sections embedded with pydantic-ai's `Embedder`, kept in the archive.

`EmbeddedSections` is the knowledge base's `SectionVectors`: with `EMBEDDING_MODEL`'s provider model, or the
local WordLlama model (knowledge/local_embedding.py) when it is unset. A section is queued in
the archive (archive/vectors.py) before it is embedded and leaves the queue only with its vector, so a provider
that is down or rate limiting loses nothing: the document is already stored and searched by full text, and the
sections still waiting are embedded with the next document added, at start and every `RETRY_SECONDS` by
`keep_embedding`. A search whose question cannot be embedded in time is full text only. A new `EMBEDDING_MODEL`
re-embeds every section in the background (the old model's vectors cannot be compared with the new one's).

Embedding calls are HTTP requests (or, for a local model, pydantic-ai's own worker thread): none blocks the
event loop; each batch is bounded by EMBEDDING_TIMEOUT_SECONDS.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Sequence

from pydantic_ai import Embedder
from pydantic_ai.exceptions import ModelAPIError, UnexpectedModelBehavior, UserError

from archive import VectorModel, VectorTable, WaitingSection
from knowledge.base import indexed_text
from knowledge.local_embedding import LOCAL_MODEL_NAME, WordLlamaEmbeddingModel

logger = logging.getLogger(__name__)

# Sections per embedding request: providers take far more inputs (OpenAI 2,048), but a batch of sections of a
# few thousand characters each stays well under their per-request token limits and the timeout.
BATCH_SIZE = 32
# With the local model, a section less similar than this (cosine) to a question is not near it, however few sections
# a server has: the model puts unrelated texts below 0.1 and the knowledge bench's answering sections above 0.29, so
# a search for what the documents do not hold finds nothing by meaning rather than the least unrelated section. A
# provider's model has a scale of its own, not measured here: no floor.
LOCAL_MIN_SIMILARITY = 0.25
# How often the sections a failed embedding left waiting are tried again.
RETRY_SECONDS = 300.0
# What a provider that is down, refuses, or answers nonsense raises; anything else is a bug, logged with its trace.
_PROVIDER_FAILURES = (ModelAPIError, UnexpectedModelBehavior, UserError, TimeoutError, OSError, ValueError)


class EmbeddedSections:
    """`SectionVectors` over the archive's vector table and one embedding model."""

    def __init__(
        self, table: VectorTable, embedder: Embedder, *, model_name: str, timeout: float, min_similarity: float = -1.0
    ) -> None:
        self._table = table
        self._max_distance = 1.0 - min_similarity
        self._embedder = embedder
        self._model_name = model_name
        self._timeout = timeout
        self._opened: VectorModel | None = None
        # One embedding pass at a time: two would embed the same waiting sections twice.
        self._embedding = asyncio.Lock()

    async def start(self) -> bool:
        """Whether the archive can keep vectors; after a change of model, queue every section to be embedded again,
        and queue the sections that were never embedded.

        Call once before use; False (logged by the archive) means the knowledge base searches full text only.
        """
        if not await self._table.vectors_available():
            return False
        stored = await self._table.vector_model()
        if stored is not None and stored.name != self._model_name:
            count = await self._table.requeue_vectors()
            logger.info(
                "knowledge: EMBEDDING_MODEL changed from %s to %s; re-embedding %d sections in the background",
                stored.name,
                self._model_name,
                count,
            )
        # Sections added while there was no embedding model (before the local one was the default) wait their turn.
        unembedded = await self._table.unembedded_sections()
        if unembedded:
            await self._table.queue_embeddings(
                [
                    WaitingSection(section_id, guild, indexed_text(heading, text))
                    for section_id, guild, heading, text in unembedded
                ]
            )
            logger.info(
                "knowledge: embedding %d sections added without an embedding model in the background", len(unembedded)
            )
        return True

    async def queue(self, guild_id: int, sections: Sequence[tuple[int, str]]) -> None:
        """Queue the sections to be embedded (committed before this returns)."""
        await self._table.queue_embeddings(
            [WaitingSection(section_id, guild_id, text) for section_id, text in sections]
        )

    async def forget(self, section_ids: Sequence[int]) -> None:
        """Drop the sections' vectors, and their place in the queue if they are still waiting."""
        if section_ids:
            await self._table.forget_vectors(section_ids)

    async def nearest(self, guild_id: int, query: str, limit: int) -> list[int]:
        """The server's sections nearest `query`, best first; none when the question cannot be embedded in time."""
        if limit < 1 or not query.strip():
            return []
        vectors = await self._embed(query, input_type="query")
        if vectors is None:
            return []
        return await self._table.nearest_sections(guild_id, vectors[0], limit, max_distance=self._max_distance)

    async def similarity(self, query: str, text: str) -> float | None:
        """The cosine similarity of `query` and `text` (the gate's evidence); None when they cannot be embedded."""
        vectors = await self._embed([query, text], input_type="document")
        if vectors is None:
            return None
        first, second = vectors
        norms = math.sqrt(sum(x * x for x in first) * sum(y * y for y in second))
        return sum(x * y for x, y in zip(first, second, strict=True)) / norms if norms else 0.0

    async def embed_waiting(self) -> int:
        """Embed the queued sections, a batch at a time, until the queue is empty or a batch fails; how many."""
        embedded = 0
        async with self._embedding:
            while batch := await self._table.waiting_embeddings(BATCH_SIZE):
                vectors = await self._embed([section.text for section in batch], input_type="document")
                if vectors is None:
                    break
                await self._open(VectorModel(self._model_name, len(vectors[0])))
                await self._table.store_vectors(list(zip(batch, vectors, strict=True)))
                embedded += len(batch)
        return embedded

    async def keep_embedding(self, every: float = RETRY_SECONDS) -> None:
        """Embed what waits now (left by a failure before a restart, or a new model's re-embedding), then try again
        every `every` seconds, for as long as the bot runs (a background task)."""
        while True:
            try:
                await self.embed_waiting()
            except Exception:
                # The archive failed (the provider's failures are handled below): the next pass tries again.
                logger.exception("knowledge: embedding the waiting sections failed")
            await asyncio.sleep(every)

    async def _open(self, model: VectorModel) -> None:
        if self._opened != model:
            await self._table.open_vectors(model)
            self._opened = model

    async def _embed(self, texts: str | list[str], *, input_type: str) -> list[list[float]] | None:
        """The texts' vectors, or None (logged in one line) when the provider fails or is slower than the timeout."""
        count = 1 if isinstance(texts, str) else len(texts)
        try:
            async with asyncio.timeout(self._timeout):
                if input_type == "query":
                    result = await self._embedder.embed_query(texts)
                else:
                    result = await self._embedder.embed_documents(texts)
            vectors = [list(map(float, vector)) for vector in result.embeddings]
            if len(vectors) != count or len({len(vector) for vector in vectors}) != 1 or not vectors[0]:
                raise ValueError(f"{count} texts gave {len(vectors)} vectors of sizes {sorted(map(len, vectors))}")
        except _PROVIDER_FAILURES as exc:
            what = "a search's question" if input_type == "query" else f"{count} knowledge sections"
            logger.warning(
                "knowledge: could not embed %s with %s (%s: %s); %s",
                what,
                self._model_name,
                type(exc).__name__,
                " ".join(str(exc).split())[:300],
                "this search is full text only" if input_type == "query" else "they wait for the next try",
            )
            return None
        return vectors


async def open_section_vectors(table: VectorTable, model: str | None, *, timeout: float) -> EmbeddedSections | None:
    """The knowledge base's vectors for EMBEDDING_MODEL `model` on `table`, the local WordLlama model
    (knowledge/local_embedding.py) when `model` is None; None (full text only) without vector support in the
    database (logged by the archive), or when the model cannot be set up (logged)."""
    floor = -1.0
    try:
        if model is None:
            local = WordLlamaEmbeddingModel()
            await asyncio.to_thread(local.load)
            embedder, model, floor = Embedder(local), LOCAL_MODEL_NAME, LOCAL_MIN_SIMILARITY
        else:
            embedder = Embedder(model, defer_model_check=False)
    except (UserError, ValueError, ImportError, OSError) as exc:
        logger.warning(
            "knowledge: EMBEDDING_MODEL %s cannot be used (%s); knowledge search is full text only",
            model or "(unset: the local model)",
            exc,
        )
        return None
    vectors = EmbeddedSections(table, embedder, model_name=model, timeout=timeout, min_similarity=floor)
    return vectors if await vectors.start() else None
