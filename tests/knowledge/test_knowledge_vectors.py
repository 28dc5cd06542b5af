"""Vector search for the knowledge base (knowledge/vectors.py) with the deterministic test embedder, on both
backends: what it adds to full text, and that a provider's failure loses nothing."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from datetime import UTC, datetime

import pytest
from pydantic_ai import Embedder
from pydantic_ai.exceptions import ModelHTTPError

from archive import Archive, VectorModel
from archive.knowledge import KnowledgeDocument, KnowledgeSection
from config import Settings
from knowledge.base import KnowledgeBase
from knowledge.opening import open_knowledge
from knowledge.vectors import BATCH_SIZE, EmbeddedSections, open_section_vectors
from tests.support.embedding_support import HashingEmbeddingModel
from upkeep.background import BackgroundTasks

GUILD, OTHER_GUILD, ADMIN = 10, 11, 500
NOW = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
MODEL = "test:hashing"

# No word of the question is in the answer's section ("restore" / "restoration", "channel" / "channels",
# "removed" / "deleted"): full text finds only the sections sharing its words, which do not answer it.
QUESTION = "Who can restore a removed channel?"
ANSWER = "Restoring"
HANDBOOK = [
    KnowledgeSection(ANSWER, "Restoration of deleted channels requires an administrator and takes a day."),
    KnowledgeSection("Topics", "Each channel has a topic set by its moderators."),
    KnowledgeSection("Moderation log", "Messages removed by moderators are logged for a month."),
    KnowledgeSection("Lunch", "Lunch is served at noon in the cafeteria on weekdays."),
    KnowledgeSection("Parking", "Visitors park in the north lot beside the fountain."),
    KnowledgeSection("Holidays", "The office closes for two weeks in August."),
    KnowledgeSection("Printing", "Printers on every floor need a badge to release jobs."),
    KnowledgeSection("Expenses", "Receipts go to finance within thirty days of purchase."),
    KnowledgeSection("Security", "Report lost badges to the front desk immediately."),
    KnowledgeSection("Travel", "Book flights through the travel portal two weeks ahead."),
    KnowledgeSection("Wellness", "Yoga classes run on Tuesday and Thursday evenings."),
    KnowledgeSection("Equipment", "Laptops are replaced every three years by IT."),
]


def handbook(guild_id: int = GUILD, sections: list[KnowledgeSection] = HANDBOOK) -> KnowledgeDocument:
    return KnowledgeDocument(guild_id, "file:handbook.md", "Handbook", sections, ADMIN, NOW)


def vectors_over(archive: Archive, model: HashingEmbeddingModel, *, name: str = MODEL) -> EmbeddedSections:
    return EmbeddedSections(archive, Embedder(model), model_name=name, timeout=5)


async def headings(knowledge: KnowledgeBase, query: str, limit: int = 3) -> list[str]:
    return [hit.heading for hit in await knowledge.search(GUILD, query, limit=limit, channel_ids=())]


async def test_vectors_find_a_paraphrased_question_that_full_text_misses(archive: Archive) -> None:
    vectors = vectors_over(archive, HashingEmbeddingModel())
    assert await vectors.start()
    full_text_only = KnowledgeBase(archive)
    fused = KnowledgeBase(archive, vectors)
    await fused.add(handbook())

    assert ANSWER not in await headings(full_text_only, QUESTION, limit=len(HANDBOOK))
    assert ANSWER in await headings(fused, QUESTION)
    # A question in the section's own words is still full text's first hit, and stays first once fused.
    assert (await headings(fused, "deleted channels administrator"))[0] == ANSWER


async def test_a_provider_that_is_down_loses_nothing_and_the_sections_are_embedded_later(
    archive: Archive, caplog: pytest.LogCaptureFixture
) -> None:
    model = HashingEmbeddingModel()
    vectors = vectors_over(archive, model)
    assert await vectors.start()
    knowledge = KnowledgeBase(archive, vectors)
    model.fail_with = ModelHTTPError(503, MODEL, "unavailable")

    with caplog.at_level(logging.WARNING, logger="knowledge.vectors"):
        await knowledge.add(handbook())

    assert [record.levelname for record in caplog.records] == ["WARNING"]
    assert "wait for the next try" in caplog.records[0].getMessage()
    # Stored and searched by its words, its sections waiting for their vectors.
    assert (await headings(knowledge, "deleted channels administrator"))[0] == ANSWER
    assert ANSWER not in await headings(knowledge, QUESTION)
    assert len(await archive.waiting_embeddings(100)) == len(HANDBOOK)

    model.fail_with = None
    assert await vectors.embed_waiting() == len(HANDBOOK)
    assert await archive.waiting_embeddings(100) == []
    assert ANSWER in await headings(knowledge, QUESTION)


async def test_a_question_that_cannot_be_embedded_is_searched_by_full_text(
    archive: Archive, caplog: pytest.LogCaptureFixture
) -> None:
    model = HashingEmbeddingModel()
    vectors = vectors_over(archive, model)
    assert await vectors.start()
    knowledge = KnowledgeBase(archive, vectors)
    await knowledge.add(handbook())
    model.fail_with = ConnectionError("connection reset")

    with caplog.at_level(logging.WARNING, logger="knowledge.vectors"):
        hits = await headings(knowledge, "deleted channels administrator")

    assert hits[0] == ANSWER
    assert len(caplog.records) == 1
    assert "this search is full text only" in caplog.records[0].getMessage()


async def test_a_provider_slower_than_the_timeout_leaves_the_sections_waiting(archive: Archive) -> None:
    class Stuck(HashingEmbeddingModel):
        async def embed(self, inputs, *, input_type, settings=None):
            await asyncio.Event().wait()  # never answers
            raise AssertionError("unreachable")

    vectors = EmbeddedSections(archive, Embedder(Stuck()), model_name=MODEL, timeout=0.05)
    assert await vectors.start()
    await vectors.queue(GUILD, [(1, "first"), (2, "second")])

    await vectors.embed_waiting()

    assert [section.section_id for section in await archive.waiting_embeddings(10)] == [1, 2]
    assert await vectors.nearest(GUILD, "first", 5) == []


async def test_sections_are_embedded_in_batches(archive: Archive) -> None:
    model = HashingEmbeddingModel()
    vectors = vectors_over(archive, model)
    assert await vectors.start()

    await vectors.queue(GUILD, [(section_id, f"section number {section_id}") for section_id in range(1, 71)])

    await vectors.embed_waiting()

    assert model.calls == [BATCH_SIZE, BATCH_SIZE, 70 - 2 * BATCH_SIZE]
    assert (await vectors.nearest(GUILD, "section number 42", 1)) == [42]


async def test_removing_a_document_forgets_its_vectors(archive: Archive) -> None:
    vectors = vectors_over(archive, HashingEmbeddingModel())
    assert await vectors.start()
    knowledge = KnowledgeBase(archive, vectors)
    document_id = await knowledge.add(handbook())
    assert len(await vectors.nearest(GUILD, QUESTION, 100)) == len(HANDBOOK)

    assert await knowledge.remove(GUILD, document_id)

    assert await vectors.nearest(GUILD, QUESTION, 100) == []


async def test_a_document_removed_while_it_is_embedded_goes_at_once_and_keeps_no_vector(archive: Archive) -> None:
    """Embedding waits for the provider: the addition holds no lock meanwhile, and a removal made then wins."""

    class Held(HashingEmbeddingModel):
        def __init__(self) -> None:
            super().__init__()
            self.asked, self.go = asyncio.Event(), asyncio.Event()

        async def embed(self, inputs, *, input_type, settings=None):
            self.asked.set()
            await self.go.wait()
            return await super().embed(inputs, input_type=input_type, settings=settings)

    model = Held()
    vectors = vectors_over(archive, model)
    assert await vectors.start()
    knowledge = KnowledgeBase(archive, vectors)
    adding = asyncio.create_task(knowledge.add(handbook()))
    async with asyncio.timeout(5):
        await model.asked.wait()
    [info] = await knowledge.documents(GUILD)

    async with asyncio.timeout(5):
        assert await knowledge.remove(GUILD, info.id)
    model.go.set()
    assert await adding == info.id

    assert await vectors.nearest(GUILD, QUESTION, 100) == []
    assert await archive.waiting_embeddings(100) == []


async def test_another_servers_sections_are_never_nearest(archive: Archive) -> None:
    vectors = vectors_over(archive, HashingEmbeddingModel())
    assert await vectors.start()
    knowledge = KnowledgeBase(archive, vectors)
    await knowledge.add(handbook(OTHER_GUILD))

    assert await vectors.nearest(GUILD, QUESTION, 10) == []
    assert await headings(knowledge, QUESTION) == []


async def test_a_new_embedding_model_re_embeds_every_section(
    archive: Archive, caplog: pytest.LogCaptureFixture
) -> None:
    old = vectors_over(archive, HashingEmbeddingModel(64), name="test:old")
    assert await old.start()
    await KnowledgeBase(archive, old).add(handbook())
    assert await archive.vector_model() == VectorModel("test:old", 64)

    new_model = HashingEmbeddingModel(128)
    new = vectors_over(archive, new_model, name=MODEL)
    with caplog.at_level(logging.INFO, logger="knowledge.vectors"):
        assert await new.start()
    assert f"re-embedding {len(HANDBOOK)} sections" in caplog.text
    assert await new.nearest(GUILD, QUESTION, 5) == []

    assert await new.embed_waiting() == len(HANDBOOK)
    assert await archive.vector_model() == VectorModel(MODEL, 128)
    assert ANSWER in await headings(KnowledgeBase(archive, new), QUESTION)


async def test_keep_embedding_tries_the_waiting_sections_again(archive: Archive) -> None:
    class Signalling(HashingEmbeddingModel):
        def __init__(self) -> None:
            super().__init__()
            self.answered = asyncio.Event()

        async def embed(self, inputs, *, input_type, settings=None):
            result = await super().embed(inputs, input_type=input_type, settings=settings)
            self.answered.set()
            return result

    model = Signalling()
    vectors = vectors_over(archive, model)
    assert await vectors.start()
    model.fail_with = TimeoutError()
    await vectors.queue(GUILD, [(1, "first")])
    await vectors.embed_waiting()
    model.fail_with = None

    retrying = asyncio.create_task(vectors.keep_embedding(every=0.01))
    try:
        async with asyncio.timeout(10):
            await model.answered.wait()
        # The retry's pass holds the lock until its vectors are stored: this one starts after it, with nothing left.
        assert await vectors.embed_waiting() == 0
    finally:
        retrying.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await retrying
    assert await archive.waiting_embeddings(1) == []
    assert await vectors.nearest(GUILD, "first", 1) == [1]


async def test_open_section_vectors_is_the_local_model_without_embedding_model(archive: Archive) -> None:
    vectors = await open_section_vectors(archive, None, timeout=5)
    assert vectors is not None
    await vectors.queue(GUILD, [(1, "Restore a file from the trash"), (2, "Capture the traffic from or to a host")])
    assert await vectors.embed_waiting() == 2
    assert await vectors.nearest(GUILD, "get a deleted document back out of the trash", 1) == [1]


async def test_open_section_vectors_is_none_without_a_usable_model(archive: Archive) -> None:
    # The hermetic tests have no provider keys: the OpenAI model cannot be set up, and says why in the log.
    assert await open_section_vectors(archive, "openai:text-embedding-3-small", timeout=5) is None


async def test_the_client_s_knowledge_base_searches_by_vector_too_with_embedding_model(
    archive: Archive, make_settings: Callable[..., Settings], monkeypatch: pytest.MonkeyPatch
) -> None:
    """open_knowledge (the client's) adds the vectors and starts embedding what waits, with EMBEDDING_MODEL's
    model or, without it, the local one. No request is made: nothing waits, and the key is never used."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-never-sent")
    plain, embedding = BackgroundTasks(), BackgroundTasks()
    try:
        await open_knowledge(archive, make_settings(), plain)
        await open_knowledge(archive, make_settings(embedding_model="openai:text-embedding-3-small"), embedding)
        assert (len(plain), len(embedding)) == (1, 1)
    finally:
        await plain.close()
        await embedding.close()


async def test_leaving_a_server_drops_its_sections_vectors_and_queued_texts(archive: Archive) -> None:
    """The documents go when Parley leaves a server; the vectors and waiting texts, copies of their text, go too."""
    model = HashingEmbeddingModel()
    vectors = vectors_over(archive, model)
    assert await vectors.start()
    knowledge = KnowledgeBase(archive, vectors)
    await knowledge.add(handbook())
    await knowledge.add(handbook(OTHER_GUILD))
    model.fail_with = TimeoutError()
    await knowledge.add(KnowledgeDocument(GUILD, "file:faq.md", "FAQ", [KnowledgeSection("", "Waiting")], ADMIN, NOW))
    assert [section.text for section in await archive.waiting_embeddings(100)] == ["Waiting"]

    archive.delete_guild(GUILD)
    await archive.flush()

    assert await archive.waiting_embeddings(100) == []
    model.fail_with = None
    assert await vectors.nearest(GUILD, QUESTION, 100) == []
    assert len(await vectors.nearest(OTHER_GUILD, QUESTION, 100)) == len(HANDBOOK)
    # What the vector table holds, text included, is the other server's alone.
    assert await archive.requeue_vectors() == len(HANDBOOK)


async def test_sections_added_without_an_embedding_model_are_embedded_at_the_next_start(archive: Archive) -> None:
    """A server's documents from before the local model was the default are found by meaning after a restart."""
    await KnowledgeBase(archive).add(handbook())
    vectors = await open_section_vectors(archive, None, timeout=5)
    assert vectors is not None
    assert await vectors.embed_waiting() == len(HANDBOOK)
    assert await headings(KnowledgeBase(archive, vectors), QUESTION, limit=1) == [ANSWER]
    again = await open_section_vectors(archive, None, timeout=5)
    assert again is not None and await again.embed_waiting() == 0


async def test_the_local_model_finds_nothing_by_meaning_for_an_unrelated_question(archive: Archive) -> None:
    """However few sections a server has, a question they do not touch is not near any: full text decides."""
    vectors = await open_section_vectors(archive, None, timeout=5)
    assert vectors is not None
    knowledge = KnowledgeBase(archive, vectors)
    await knowledge.add(handbook())
    assert await vectors.nearest(GUILD, QUESTION, 100) != []
    assert await vectors.nearest(GUILD, "sourdough", 100) == []
    assert await knowledge.search(GUILD, "sourdough", channel_ids=()) == []
