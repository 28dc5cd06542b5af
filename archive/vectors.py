"""The knowledge base's section embeddings in the archive: sqlite-vec on SQLite, pgvector on Postgres.

Two tables. `embedding_queue` (a migration, plain SQL on both backends) holds the sections waiting for an
embedding, with their text: a section is queued before it is embedded, and leaves the queue in the same
transaction as its vector is stored, so a provider that fails loses nothing. `section_vectors` holds each
embedded section's vector, server and text; it is created when the first embedding gives the dimension (a
vector column needs one) and its text lets a change of embedding model re-embed everything without the knowledge
store. Which model made the vectors is kept in `bot_state` (`vector_model`).

Vector search is exact (sqlite-vec's vec0 scans the server's own partition; pgvector scans the server's rows
through an index on the server): a knowledge base has thousands of sections, not millions, and an approximate
index filtered by server can miss a server's nearest sections.

sqlite-vec is a loadable SQLite extension (https://alexgarcia.xyz/sqlite-vec/python.html). Python builds without
loadable extensions (pyenv's default, this machine's) cannot `load_extension`; there, `register_sqlite_vec`
registers the extension's entry point with SQLite's own `sqlite3_auto_extension`
(https://www.sqlite.org/c3ref/auto_extension.html), the C API's way for a linked-in extension, so every
connection opened afterwards has it.
"""

from __future__ import annotations

import ctypes
import functools
import logging
from abc import abstractmethod
from collections.abc import Sequence

import aiosqlite

from archive import ArchiveWriteFailed, VectorModel, WaitingSection, Write
from archive.tables import BackendTables

logger = logging.getLogger(__name__)

MODEL_STATE = "vector_model"
# Sections per vec0 chunk: each server's partition allocates chunks of this many vectors, so a small one keeps a
# small server's file small (1536 floats take 6 KB a vector) at little cost to a scan.
_CHUNK_SIZE = 128

# A section's queued text and vector go with the section, however it goes (its document removed or replaced, the
# server left): triggers on knowledge_sections, so no path that deletes sections can leave a copy of their text.
SQLITE_QUEUE_TABLE = """
    CREATE TABLE embedding_queue (
        section_id INTEGER PRIMARY KEY,
        guild_id   INTEGER NOT NULL,
        text       TEXT    NOT NULL
    );
    CREATE TRIGGER embedding_queue_section_gone AFTER DELETE ON knowledge_sections BEGIN
        DELETE FROM embedding_queue WHERE section_id = old.id;
    END;
"""
# On SQLite the vector table's trigger comes and goes with the table (a trigger naming a missing table fails).
_SQLITE_VECTORS_TRIGGER = """
    CREATE TRIGGER section_vectors_section_gone AFTER DELETE ON knowledge_sections BEGIN
        DELETE FROM section_vectors WHERE section_id = old.id;
    END
"""
# PL/pgSQL plans a statement when it first runs it: the vector table is only named once it exists.
POSTGRES_QUEUE_TABLE = """
    CREATE TABLE embedding_queue (
        section_id BIGINT PRIMARY KEY,
        guild_id   BIGINT NOT NULL,
        text       TEXT   NOT NULL
    );
    CREATE FUNCTION parley_section_gone() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        DELETE FROM embedding_queue WHERE section_id = OLD.id;
        IF to_regclass('section_vectors') IS NOT NULL THEN
            DELETE FROM section_vectors WHERE section_id = OLD.id;
        END IF;
        RETURN OLD;
    END $$;
    CREATE TRIGGER knowledge_section_gone AFTER DELETE ON knowledge_sections
        FOR EACH ROW EXECUTE FUNCTION parley_section_gone();
"""


def model_state(model: VectorModel) -> str:
    """`model` as `bot_state` keeps it: "<dimensions> <name>", the name being all after the first space."""
    return f"{model.dimensions} {model.name}"


def model_from_state(value: str | None) -> VectorModel | None:
    """The model `model_state` wrote; None when none was (or the vectors were dropped for a new one)."""
    if not value:
        return None
    dimensions, _, name = value.partition(" ")
    return VectorModel(name, int(dimensions))


SELECT_WAITING = "SELECT section_id, guild_id, text FROM embedding_queue ORDER BY section_id LIMIT ?"


def select_unembedded(has_vector_table: bool) -> str:
    """The knowledge sections neither queued nor (if there is a vector table) embedded, both backends' SQL."""
    embedded = " AND s.id NOT IN (SELECT section_id FROM section_vectors)" if has_vector_table else ""
    return (
        "SELECT s.id, d.guild_id, s.heading, s.text FROM knowledge_sections s"
        " JOIN knowledge_documents d ON d.id = s.document_id"
        f" WHERE s.id NOT IN (SELECT section_id FROM embedding_queue){embedded} ORDER BY s.id"
    )


_QUEUE = Write(
    "queue_embedding",
    (
        "INSERT INTO embedding_queue (section_id, guild_id, text) VALUES (?, ?, ?)"
        " ON CONFLICT (section_id) DO UPDATE SET guild_id = excluded.guild_id, text = excluded.text",
    ),
)
_UNQUEUE = Write("unqueue_embedding", ("DELETE FROM embedding_queue WHERE section_id = ?",))


class VectorState(BackendTables):
    """The model state both backends keep in `bot_state`."""

    @abstractmethod
    async def get_state(self, name: str) -> str | None: ...

    @abstractmethod
    async def set_state(self, name: str, value: str) -> None: ...

    async def vector_model(self) -> VectorModel | None:
        return model_from_state(await self.get_state(MODEL_STATE))


# -- SQLite: sqlite-vec's vec0 --------------------------------------------------------------------------------------

_SQLITE_DELETE_VECTOR = Write("delete_vector", ("DELETE FROM section_vectors WHERE section_id = ?",))
# A section's vector is stored (replacing its last) only while the queue still holds the text embedded, and the
# queue row leaves with it, in one write that commits as one: a section removed while its embedding was in flight
# (the delete trigger already ran) leaves no copy of its text behind, and a failure stores and unqueues nothing.
# ?1 section_id, ?2 guild_id, ?3 embedding, ?4 text: each statement names ?4, so each takes the four parameters.
_STILL_QUEUED = "EXISTS (SELECT 1 FROM embedding_queue WHERE section_id = ?1 AND text = ?4)"
_SQLITE_STORE_VECTOR = Write(
    "store_vector",
    (
        f"DELETE FROM section_vectors WHERE section_id = ?1 AND {_STILL_QUEUED}",
        "INSERT INTO section_vectors (section_id, guild_id, embedding, body)"
        f" SELECT ?1, ?2, ?3, ?4 WHERE {_STILL_QUEUED}",
        "DELETE FROM embedding_queue WHERE section_id = ?1 AND text = ?4",
    ),
)
_SQLITE_REQUEUE = Write(
    "requeue_vectors",
    (
        "INSERT INTO embedding_queue (section_id, guild_id, text) SELECT section_id, guild_id, body"
        " FROM section_vectors WHERE true ON CONFLICT (section_id) DO NOTHING",
        "DROP TRIGGER IF EXISTS section_vectors_section_gone",
        "DROP TABLE section_vectors",
    ),
)
_SET_VECTOR_MODEL = Write(
    "set_vector_model",
    (
        f"INSERT INTO bot_state (name, value) VALUES ('{MODEL_STATE}', ?)"
        " ON CONFLICT (name) DO UPDATE SET value = excluded.value",
    ),
)
_SQLITE_NEAREST = (
    "SELECT section_id FROM (SELECT section_id, distance FROM section_vectors"
    " WHERE embedding MATCH ? AND k = ? AND guild_id = ?) WHERE distance <= ? ORDER BY distance"
)


@functools.cache
def register_sqlite_vec() -> bool:
    """Where Python cannot load extensions, make sqlite-vec an automatic extension of every new connection (once).

    True when connections must `load_extension` it themselves (or it is not installed: `load_sqlite_vec` says so).
    """
    import sqlite3

    if hasattr(sqlite3.Connection, "enable_load_extension"):
        return True
    try:
        import _sqlite3

        import sqlite_vec

        # The symbol is looked up through the sqlite3 module's own library, so it is the SQLite Python uses.
        auto_extension = ctypes.CDLL(_sqlite3.__file__).sqlite3_auto_extension
        auto_extension.argtypes = [ctypes.c_void_p]
        entry_point = ctypes.CDLL(f"{sqlite_vec.loadable_path()}.so").sqlite3_vec_init
        if auto_extension(ctypes.cast(entry_point, ctypes.c_void_p)) != 0:
            raise OSError("sqlite3_auto_extension refused it")
    except (ImportError, OSError, AttributeError) as exc:
        # Said once, by `vectors_available`, when vectors are asked for: most archives never need them.
        logger.debug("sqlite-vec cannot be registered: %s", exc)
    return False


async def load_sqlite_vec(db: aiosqlite.Connection) -> None:
    """Load sqlite-vec into a new connection where Python can (else `register_sqlite_vec` did); never raises."""
    if not register_sqlite_vec():
        return
    try:
        import sqlite_vec

        await db.enable_load_extension(True)
        try:
            await db.load_extension(sqlite_vec.loadable_path())
        finally:
            await db.enable_load_extension(False)
    except (ImportError, aiosqlite.Error) as exc:
        logger.debug("sqlite-vec cannot be loaded: %s", exc)


class SQLiteVectorTables(VectorState):
    """`VectorTable` for `SQLiteArchive`: writes on its queue (the file's only writer), reads on its reader."""

    async def vectors_available(self) -> bool:
        try:
            await self.read("SELECT vec_version()")
        except aiosqlite.OperationalError:
            logger.warning("knowledge: sqlite-vec could not be loaded into SQLite; knowledge search is full text only")
            return False
        return True

    async def _has_vector_table(self) -> bool:
        return bool(await self.read("SELECT 1 FROM sqlite_master WHERE name = 'section_vectors'"))

    async def open_vectors(self, model: VectorModel) -> None:
        if await self.vector_model() == model and await self._has_vector_table():
            return
        if await self._has_vector_table():
            await self.requeue_vectors()
        ddl = (
            "CREATE VIRTUAL TABLE section_vectors USING vec0(section_id INTEGER PRIMARY KEY,"
            f" guild_id INTEGER PARTITION KEY, embedding float[{int(model.dimensions)}] distance_metric=cosine,"
            f" +body TEXT, chunk_size={_CHUNK_SIZE})"
        )
        self._enqueue(Write("create_vectors", (ddl, _SQLITE_VECTORS_TRIGGER)), ())
        await self.flush()
        if not await self._has_vector_table():
            raise ArchiveWriteFailed("the vector table could not be made")
        await self.set_state(MODEL_STATE, model_state(model))

    async def requeue_vectors(self) -> int:
        if not await self._has_vector_table():
            return 0
        ((count,),) = await self.read("SELECT count(*) FROM section_vectors")
        self._enqueue(_SQLITE_REQUEUE, ())
        self._enqueue(_SET_VECTOR_MODEL, ("",))
        await self.flush()
        return int(count)

    async def unembedded_sections(self) -> list[tuple[int, int, str, str]]:
        rows = await self.read(select_unembedded(await self._has_vector_table()))
        return [(int(section_id), int(guild_id), heading, text) for section_id, guild_id, heading, text in rows]

    async def queue_embeddings(self, sections: Sequence[WaitingSection]) -> None:
        for section in sections:
            self._enqueue(_QUEUE, tuple(section))
        await self.flush()

    async def waiting_embeddings(self, limit: int) -> list[WaitingSection]:
        return [WaitingSection(*row) for row in await self.read(SELECT_WAITING, (limit,))]

    async def store_vectors(self, vectors: Sequence[tuple[WaitingSection, Sequence[float]]]) -> None:
        import sqlite_vec

        for section, vector in vectors:
            embedding = sqlite_vec.serialize_float32(list(vector))
            self._enqueue(_SQLITE_STORE_VECTOR, (section.section_id, section.guild_id, embedding, section.text))
        await self.flush()

    async def forget_vectors(self, section_ids: Sequence[int]) -> None:
        has_vectors = await self._has_vector_table()
        for section_id in section_ids:
            if has_vectors:
                self._enqueue(_SQLITE_DELETE_VECTOR, (section_id,))
            self._enqueue(_UNQUEUE, (section_id,))
        await self.flush()

    async def nearest_sections(
        self, guild_id: int, vector: Sequence[float], limit: int, *, max_distance: float = 2.0
    ) -> list[int]:
        import sqlite_vec

        if limit < 1 or not await self._has_vector_table():
            return []
        embedding = sqlite_vec.serialize_float32(list(vector))
        rows = await self.read(_SQLITE_NEAREST, (embedding, limit, guild_id, max_distance))
        return [int(section_id) for (section_id,) in rows]
