"""The knowledge base's section embeddings in a Postgres archive, with pgvector (archive/vectors.py says how).

The vector table is made, and a new model's requeue done, under an advisory lock: processes sharing the database
may start at once. Vectors go to the server as pgvector's text form, so no Python package for the type is needed.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import asyncpg

from archive import VectorModel, WaitingSection
from archive.vectors import MODEL_STATE, SELECT_WAITING, VectorState, model_from_state, model_state, select_unembedded

logger = logging.getLogger(__name__)

# Only a queued text that is still the one embedded leaves the queue (a section queued again meanwhile waits its
# turn), and its vector is stored only if it did: deleting the queue row locks it, so a section removed while its
# embedding was in flight either took the row first (nothing stored) or waits for this commit and its trigger then
# deletes the vector stored (archive/vectors.py POSTGRES_QUEUE_TABLE).
_PG_STORE = """
    WITH embedded AS (DELETE FROM embedding_queue WHERE section_id = $1 AND text = $3 RETURNING section_id)
    INSERT INTO section_vectors (section_id, guild_id, body, embedding)
    SELECT section_id, $2, $3, $4::vector FROM embedded
    ON CONFLICT (section_id) DO UPDATE SET guild_id = excluded.guild_id, body = excluded.body,
        embedding = excluded.embedding
"""
_PG_NEAREST = (
    "SELECT section_id FROM section_vectors WHERE guild_id = $1 AND embedding <=> $2::vector <= $4"
    " ORDER BY embedding <=> $2::vector LIMIT $3"
)
# One process at a time changes the vector table: two starting with a new model must not both requeue.
_PG_VECTOR_LOCK = 0x5061726C6579_0002


def _vector_literal(vector: Sequence[float]) -> str:
    """pgvector's text form, '[1,2,3]': asyncpg has no codec for the type, and text needs no extra package."""
    return "[" + ",".join(repr(float(value)) for value in vector) + "]"


class PostgresVectorTables(VectorState):
    """`VectorTable` for `PostgresArchive`, on its pool: every statement commits on its own or in a transaction."""

    _pool: asyncpg.Pool

    async def vectors_available(self) -> bool:
        try:
            async with self._pool.acquire() as connection:
                await connection.execute("CREATE EXTENSION IF NOT EXISTS vector")
        except asyncpg.PostgresError as exc:
            logger.warning(
                "knowledge: this Postgres has no pgvector (%s); knowledge search is full text only",
                " ".join(str(exc).split()),
            )
            return False
        return True

    async def open_vectors(self, model: VectorModel) -> None:
        async with self._pool.acquire() as connection, connection.transaction():
            await connection.execute("SELECT pg_advisory_xact_lock($1)", _PG_VECTOR_LOCK)
            stored = model_from_state(
                await connection.fetchval("SELECT value FROM bot_state WHERE name = $1", MODEL_STATE)
            )
            exists = await connection.fetchval("SELECT to_regclass('section_vectors') IS NOT NULL")
            if stored == model and exists:
                return
            if exists:
                await _requeue(connection)
            # `vectors_available` said it can be made; made here too, so opening never depends on that call first.
            await connection.execute("CREATE EXTENSION IF NOT EXISTS vector")
            await connection.execute(
                "CREATE TABLE section_vectors (section_id BIGINT PRIMARY KEY, guild_id BIGINT NOT NULL,"
                f" body TEXT NOT NULL, embedding vector({int(model.dimensions)}) NOT NULL)"
            )
            await connection.execute("CREATE INDEX section_vectors_guild ON section_vectors (guild_id)")
            await _set_model(connection, model_state(model))

    async def requeue_vectors(self) -> int:
        async with self._pool.acquire() as connection, connection.transaction():
            await connection.execute("SELECT pg_advisory_xact_lock($1)", _PG_VECTOR_LOCK)
            if not await connection.fetchval("SELECT to_regclass('section_vectors') IS NOT NULL"):
                return 0
            count = await _requeue(connection)
            await _set_model(connection, "")
            return count

    async def queue_embeddings(self, sections: Sequence[WaitingSection]) -> None:
        async with self._pool.acquire() as connection:
            await connection.executemany(
                "INSERT INTO embedding_queue (section_id, guild_id, text) VALUES ($1, $2, $3)"
                " ON CONFLICT (section_id) DO UPDATE SET guild_id = excluded.guild_id, text = excluded.text",
                [tuple(section) for section in sections],
            )

    async def unembedded_sections(self) -> list[tuple[int, int, str, str]]:
        async with self._pool.acquire() as connection:
            has_table = bool(await connection.fetchval("SELECT to_regclass('section_vectors') IS NOT NULL"))
            rows = await connection.fetch(select_unembedded(has_table))
        return [(int(section_id), int(guild_id), heading, text) for section_id, guild_id, heading, text in rows]

    async def waiting_embeddings(self, limit: int) -> list[WaitingSection]:
        async with self._pool.acquire() as connection:
            rows = await connection.fetch(SELECT_WAITING.replace("?", "$1"), limit)
        return [WaitingSection(*row) for row in rows]

    async def store_vectors(self, vectors: Sequence[tuple[WaitingSection, Sequence[float]]]) -> None:
        async with self._pool.acquire() as connection, connection.transaction():
            await connection.executemany(
                _PG_STORE, [(s.section_id, s.guild_id, s.text, _vector_literal(vector)) for s, vector in vectors]
            )

    async def forget_vectors(self, section_ids: Sequence[int]) -> None:
        ids = list(section_ids)
        async with self._pool.acquire() as connection, connection.transaction():
            if await connection.fetchval("SELECT to_regclass('section_vectors') IS NOT NULL"):
                await connection.execute("DELETE FROM section_vectors WHERE section_id = ANY($1::bigint[])", ids)
            await connection.execute("DELETE FROM embedding_queue WHERE section_id = ANY($1::bigint[])", ids)

    async def nearest_sections(
        self, guild_id: int, vector: Sequence[float], limit: int, *, max_distance: float = 2.0
    ) -> list[int]:
        if limit < 1:
            return []
        async with self._pool.acquire() as connection:
            if not await connection.fetchval("SELECT to_regclass('section_vectors') IS NOT NULL"):
                return []
            rows = await connection.fetch(_PG_NEAREST, guild_id, _vector_literal(vector), limit, max_distance)
        return [int(row[0]) for row in rows]


async def _requeue(connection: asyncpg.Connection) -> int:
    count = await connection.fetchval("SELECT count(*) FROM section_vectors")
    await connection.execute(
        "INSERT INTO embedding_queue (section_id, guild_id, text) SELECT section_id, guild_id, body"
        " FROM section_vectors ON CONFLICT (section_id) DO NOTHING"
    )
    await connection.execute("DROP TABLE section_vectors")
    return int(count)


async def _set_model(connection: asyncpg.Connection, value: str) -> None:
    await connection.execute(
        "INSERT INTO bot_state (name, value) VALUES ($1, $2) ON CONFLICT (name) DO UPDATE SET value = excluded.value",
        MODEL_STATE,
        value,
    )
