"""The knowledge base's rules: how documents are split (knowledge/sections.py), and what KnowledgeBase adds to the
store (knowledge/base.py): the bound on documents, quotes, whether a server has documents (kept between changes), and
the vectors' hook with reciprocal rank fusion."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime
from typing import Any

import pytest

from archive import ArchiveWriteFailed
from archive.knowledge import KnowledgeDocument, KnowledgeSection
from archive.sqlite import SQLiteArchive
from knowledge.base import QUOTE_CHARS, KnowledgeBase, KnowledgeFull, excerpt, reciprocal_rank_fusion
from knowledge.reading import MAX_DOCUMENT_BYTES, DocumentReader, DocumentRefused, ReadDocument
from knowledge.sections import MAX_SECTION_CHARS, split_document
from tests.support.archive_contract_support import raw_db
from tests.support.hostile_files import shared_stream_pdf, text_pdf

GUILD, CHANNEL, ADMIN = 10, 1, 500
NOW = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)

HANDBOOK_MD = """Welcome to the handbook.

# Install

Download the installer.

## Docker

Run `docker compose up`.

```sh
# not a heading
docker ps
```

Setup notes
-----------

Ports are listed below.

# Backups

Nightly at 02:00.
"""


# -- Splitting --


def test_markdown_is_split_at_headings_with_their_path() -> None:
    sections = split_document("Handbook", HANDBOOK_MD, "markdown")

    assert [section.heading for section in sections] == [
        "",
        "Install",
        "Install > Docker",
        "Install > Setup notes",
        "Backups",
    ]
    assert sections[0].text == "Welcome to the handbook."
    assert "# not a heading" in sections[2].text and "docker ps" in sections[2].text
    assert sections[3].text == "Ports are listed below."


def test_plain_text_and_pdf_text_are_split_at_paragraphs_into_numbered_parts() -> None:
    paragraph = "word " * 200
    text = "\n\n".join([paragraph.strip()] * 12)

    sections = split_document("Notes", text, "pdf")

    assert len(sections) > 1 and [s.heading for s in sections][:2] == ["Part 1", "Part 2"]
    assert all(len(section.text) <= MAX_SECTION_CHARS for section in sections)
    assert sum(section.text.count("word") for section in sections) == 12 * 200
    assert split_document("Short", "One paragraph.\r\n\r\nTwo.", "text") == [
        KnowledgeSection("", "One paragraph.\n\nTwo.")
    ]


def test_a_paragraph_too_long_for_a_section_is_cut_at_a_sentence_or_a_space() -> None:
    long = " ".join(f"Sentence number {n} says something." for n in range(200))

    sections = split_document("Long", f"# Rules\n\n{long}", "markdown")

    assert len(sections) > 1 and all(len(s.text) <= MAX_SECTION_CHARS for s in sections)
    assert all(s.heading == "Rules" and s.text.endswith(".") for s in sections)
    assert " ".join(s.text for s in sections) == long
    unbroken = "x" * (MAX_SECTION_CHARS * 2 + 10)
    assert "".join(s.text for s in split_document("Blob", unbroken, "text")) == unbroken


def test_blank_documents_have_no_sections_and_unknown_kinds_are_refused() -> None:
    assert split_document("Empty", "\n\n   \n", "text") == []
    assert split_document("Headings only", "# A\n\n## B\n", "markdown") == []
    with pytest.raises(ValueError, match="unknown document kind 'docx'"):
        split_document("Word", "text", "docx")


# -- Fusion and quotes --


def test_reciprocal_rank_fusion_favours_what_both_rankings_rank_high() -> None:
    fused = reciprocal_rank_fusion([[1, 2, 3], [3, 4, 1]], k=60)

    assert list(fused) == [1, 3, 2, 4]
    assert fused[1] == pytest.approx(1 / 61 + 1 / 63)
    assert fused[4] == pytest.approx(1 / 62)
    assert reciprocal_rank_fusion([[5, 5, 6]]) == {5: 1 / 61, 6: 1 / 62}


def test_a_weighted_ranking_counts_for_more() -> None:
    fused = reciprocal_rank_fusion([[1, 2], [2, 1]], k=60, weights=(1.0, 1.5))
    assert list(fused) == [2, 1] and fused[2] == pytest.approx(1 / 62 + 1.5 / 61)


def test_a_quote_is_the_section_whole_or_the_passage_with_the_first_query_word() -> None:
    assert excerpt("Short text.", "anything") == "Short text."
    filler = "Nothing to see here. " * 60
    text = f"{filler}The backup runs at night. {filler}"

    quote = excerpt(text, "when does the backup run?")

    assert quote.startswith("…The backup runs at night.") and quote.endswith("…")
    assert len(quote) <= QUOTE_CHARS + 2
    assert excerpt(text, "zebra").startswith("Nothing to see here.")


# -- KnowledgeBase --


class StubVectors:
    """A `SectionVectors` with a fixed ranking by meaning, recording what it was given."""

    def __init__(self, nearest: list[int] | None = None, *, fail: bool = False) -> None:
        self.ranking = nearest or []
        self.fail = fail
        self.indexed: list[tuple[int, str]] = []
        self.forgotten: list[int] = []
        self.compared: list[str] = []

    async def queue(self, guild_id: int, sections: Sequence[tuple[int, str]]) -> None:
        if self.fail:
            raise RuntimeError("embedding provider is down")
        self.indexed += sections

    async def embed_waiting(self) -> int:
        if self.fail:
            raise RuntimeError("embedding provider is down")
        return 0

    async def forget(self, section_ids: Sequence[int]) -> None:
        if self.fail:
            raise RuntimeError("embedding provider is down")
        self.forgotten += section_ids

    async def nearest(self, guild_id: int, query: str, limit: int) -> list[int]:
        if self.fail:
            raise RuntimeError("embedding provider is down")
        return self.ranking[:limit]

    async def similarity(self, query: str, text: str) -> float | None:
        if self.fail:
            raise RuntimeError("embedding provider is down")
        self.compared.append(text)
        return 0.5


@pytest.fixture
async def store(tmp_path) -> AsyncIterator[SQLiteArchive]:
    archive = await SQLiteArchive.open(tmp_path / "parley.db", retention_days=0)
    yield archive
    await archive.close()


def document(source: str, sections: list[KnowledgeSection], channel_id: int | None = None) -> KnowledgeDocument:
    return KnowledgeDocument(GUILD, source, source.removeprefix("file:"), sections, ADMIN, NOW, channel_id)


FAQ = [
    KnowledgeSection("Docker", "Run docker compose up to start."),
    KnowledgeSection("Ports", "The web interface listens on port 8080."),
    KnowledgeSection("Backups", "Backups run nightly."),
]


async def test_vectors_index_added_sections_and_forget_replaced_and_removed_ones(store: SQLiteArchive) -> None:
    vectors = StubVectors()
    base = KnowledgeBase(store, vectors)

    first = await base.add(document("file:faq.md", FAQ))
    first_ids = [section_id for section_id, _ in vectors.indexed]
    assert [text for _, text in vectors.indexed][1] == "Ports\n\nThe web interface listens on port 8080."
    second = await base.add(document("file:faq.md", FAQ[:1]))

    assert second != first and vectors.forgotten == first_ids
    assert await base.remove(GUILD, second) and not await base.remove(GUILD, second)
    assert vectors.forgotten == [*first_ids, vectors.indexed[-1][0]]
    assert await base.documents(GUILD) == []


async def test_search_fuses_the_word_ranking_with_the_vector_ranking(store: SQLiteArchive) -> None:
    vectors = StubVectors()
    base = KnowledgeBase(store, vectors)
    await base.add(document("file:faq.md", FAQ))
    docker, ports, backups = (section_id for section_id, _ in vectors.indexed)
    # By meaning, "how do I reach the web page" is nearest the ports and then docker: no shared word with ports.
    vectors.ranking = [ports, docker]

    hits = await base.search(GUILD, "web docker", limit=3, channel_ids=())

    # By words: Docker (docker), Ports (web); fused: both rankings have them, Ports first by meaning, which weighs
    # VECTOR_WEIGHT (1.5) to the words' 1.
    assert [hit.section_id for hit in hits] == [ports, docker]
    assert hits[0].score == pytest.approx(1.5 / 61 + 1 / 62) and hits[1].score == pytest.approx(1 / 61 + 1.5 / 62)
    vectors.ranking = [backups]
    assert [hit.heading for hit in await base.search(GUILD, "kubernetes", channel_ids=())] == ["Backups"]


async def test_consult_gives_the_best_word_score_and_the_nearest_section_s_similarity(store: SQLiteArchive) -> None:
    vectors = StubVectors()
    base = KnowledgeBase(store, vectors)
    await base.add(document("file:faq.md", FAQ))
    docker, ports, _ = (section_id for section_id, _ in vectors.indexed)
    vectors.ranking = [ports, docker]

    consulted = await base.consult(GUILD, "web docker", channel_ids=())

    assert [hit.section_id for hit in consulted.hits] == [ports, docker]
    assert consulted.evidence.similarity == 0.5 and consulted.evidence.text_score > 0
    assert vectors.compared == ["Ports\n\nThe web interface listens on port 8080."]
    failing = await KnowledgeBase(store, StubVectors(fail=True)).consult(GUILD, "web docker", channel_ids=())
    assert failing.evidence.similarity == 0.0 and [hit.heading for hit in failing.hits] == ["Docker", "Ports"]


async def test_vector_hits_in_channels_the_asker_cannot_read_are_left_out(store: SQLiteArchive) -> None:
    vectors = StubVectors()
    base = KnowledgeBase(store, vectors)
    await base.add(document("pin:1:99", [KnowledgeSection("", "The deploy key rotates weekly.")], channel_id=CHANNEL))
    vectors.ranking = [vectors.indexed[0][0]]

    assert await base.search(GUILD, "secrets", channel_ids=(2,)) == []
    [hit] = await base.search(GUILD, "secrets", channel_ids=(CHANNEL,))
    assert hit.quote == "The deploy key rotates weekly."


async def test_failing_vectors_leave_full_text_working(store: SQLiteArchive, caplog) -> None:
    base = KnowledgeBase(store, StubVectors(fail=True))

    document_id = await base.add(document("file:faq.md", FAQ))
    [hit] = await base.search(GUILD, "port", channel_ids=())

    assert hit.heading == "Ports" and hit.document_id == document_id
    assert await base.remove_source(GUILD, "file:faq.md") and not await base.remove_source(GUILD, "file:faq.md")
    assert "could not be indexed by meaning" in caplog.text and "searching the words alone" in caplog.text


async def test_without_vectors_search_is_the_word_ranking_with_quotes(store: SQLiteArchive) -> None:
    long_text = "Intro sentence here. " * 50 + "Restores need the admin password. " + "Outro words. " * 50
    base = KnowledgeBase(store)
    await base.add(document("file:ops.md", [KnowledgeSection("Restore", long_text), *FAQ]))

    hits = await base.search(GUILD, "restore admin password", limit=1, channel_ids=())

    assert [hit.heading for hit in hits] == ["Restore"]
    assert "Restores need the admin password." in hits[0].quote and len(hits[0].quote) <= QUOTE_CHARS + 2
    assert await base.search(GUILD, "restore", limit=0, channel_ids=()) == []


async def test_a_server_may_keep_at_most_max_documents_server_wide_ones(store: SQLiteArchive) -> None:
    base = KnowledgeBase(store, max_documents=1)
    await base.add(document("file:a.md", FAQ))

    with pytest.raises(KnowledgeFull, match="already has 1 documents"):
        await base.add(document("file:b.md", FAQ))
    await base.add(document("file:a.md", FAQ[:1]))  # replacing is no new document
    await base.add(document("pin:1:5", FAQ[:1], channel_id=CHANNEL))  # nor is a channel's
    assert [info.source for info in await base.documents(GUILD)] == ["file:a.md", "pin:1:5"]


async def test_a_failed_write_is_an_error_and_leaves_the_old_version(store: SQLiteArchive, tmp_path) -> None:
    base = KnowledgeBase(store)
    await base.add(document("file:a.md", FAQ))
    with raw_db(tmp_path / "parley.db") as db:  # as a full disk would, the file refuses every new section
        db.execute(
            "CREATE TRIGGER refuse_sections BEFORE INSERT ON knowledge_sections"
            " BEGIN SELECT RAISE(ABORT, 'disk says no'); END"
        )

    with pytest.raises(ArchiveWriteFailed, match=r"file:a\.md"):
        await base.add(document("file:a.md", FAQ[:1]))

    [info] = await base.documents(GUILD)
    assert info.sections == 3
    assert [hit.heading for hit in await base.search(GUILD, "nightly", channel_ids=())] == ["Backups"]


class CountedReads:
    """The archive's "has documents" read, counted, and held at `gate` when one is set (a read a change overtakes)."""

    def __init__(self, store: SQLiteArchive) -> None:
        self.store = store
        self.reads = 0
        self.gate: asyncio.Event | None = None

    async def has_knowledge(self, guild_id: int) -> bool:
        self.reads += 1
        has = await self.store.has_knowledge(guild_id)
        if self.gate is not None:
            await self.gate.wait()
        return has

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


async def test_whether_a_server_has_documents_is_read_once_and_follows_each_change(store: SQLiteArchive) -> None:
    """Every answer asks; the archive is read once per server until a document is added or removed there."""
    reads = CountedReads(store)
    base = KnowledgeBase(reads)

    assert not await base.has_documents(GUILD) and not await base.has_documents(GUILD)
    assert reads.reads == 1
    document_id = await base.add(document("file:faq.md", FAQ))
    assert await base.has_documents(GUILD) and await base.has_documents(GUILD)
    assert not await base.has_documents(GUILD + 1)
    assert reads.reads == 3
    assert await base.remove(GUILD, document_id)
    assert not await base.has_documents(GUILD)
    base.forget_cached()  # another process changed documents somewhere (ops/shared.py)
    assert not await base.has_documents(GUILD + 1)
    assert reads.reads == 5


async def test_a_read_that_a_change_overtook_is_not_kept(store: SQLiteArchive) -> None:
    """A read under way while a document is added answers from before it, but the next answer reads again."""
    reads = CountedReads(store)
    base = KnowledgeBase(reads)
    reads.gate = asyncio.Event()
    reading = asyncio.create_task(base.has_documents(GUILD))
    await asyncio.sleep(0)
    await base.add(document("file:faq.md", FAQ))
    reads.gate.set()
    assert not await reading
    assert await base.has_documents(GUILD)


# -- Reading an admin's file --


async def test_a_text_file_is_split_as_markdown_by_its_name_and_as_plain_text_otherwise() -> None:
    reader = DocumentReader()
    data = "# Rules\n\nBe kind.\n\n## Café\n\nOpen at nine.".encode()

    markdown = await reader.read("rules.MD", "Rules", data)
    plain = await reader.read("rules.txt", "Rules", data)

    assert markdown.kind == "markdown" and [s.heading for s in markdown.sections] == ["Rules", "Rules > Café"]
    assert plain == ReadDocument("text", [KnowledgeSection("", "# Rules\n\nBe kind.\n\n## Café\n\nOpen at nine.")])


async def test_a_file_that_cannot_be_added_whole_is_refused_in_one_line() -> None:
    reader = DocumentReader(max_chars=100)
    refusals = {
        "image.md": (b"\x89PNG\r\n\x1a\n" + bytes(64), "Only text, Markdown and PDF files can be added"),
        "long.txt": (b"word " * 30, "The file has 150 characters of text; the knowledge base reads at most 100."),
        "blank.txt": (b"\n\n  \n", "The file has no text to add."),
    }
    for name, (data, reason) in refusals.items():
        with pytest.raises(DocumentRefused, match=re.escape(reason)):
            await reader.read(name, name, data)
    with pytest.raises(DocumentRefused, match=r"^The file is over 25\.0 MB, the most the knowledge base reads\.$"):
        reader.check_size(MAX_DOCUMENT_BYTES + 1)
    reader.check_size(MAX_DOCUMENT_BYTES)


@pytest.mark.slow  # each PDF is read in a worker process
async def test_a_pdf_is_read_whole_or_refused_past_the_page_cap() -> None:
    reader = DocumentReader()

    read = await reader.read("rules.pdf", "Rules", text_pdf("Rule one: be kind."))
    assert read == ReadDocument("pdf", [KnowledgeSection("", "Rule one: be kind.")])
    with pytest.raises(DocumentRefused, match="The PDF has 101 pages; the knowledge base reads PDFs of at most 100"):
        await reader.read("long.pdf", "Long", shared_stream_pdf(pages=101, lines=["short"]))
    with pytest.raises(DocumentRefused, match=r"^PDF not read: "):
        await reader.read("broken.pdf", "Broken", b"%PDF-1.4\nnot really a pdf")


async def test_sqlite_reads_sections_by_id_without_walking_the_servers_documents(
    store: SQLiteArchive, tmp_path
) -> None:
    """The archive runs no ANALYZE, so the plan must not depend on statistics: the sections asked for (and those the
    full-text index matched) are looked up by their ids, and each one's document by its id."""
    dialect = type(store).knowledge_dialect
    params = {"ids": "[1, 2]", "guild": GUILD, "channels": "[]", "match": '"port"', "limit": 5}
    with raw_db(tmp_path / "parley.db") as db:
        for sql in (dialect.sections_sql, dialect.search_sql):
            plan = [row[3] for row in db.execute(f"EXPLAIN QUERY PLAN {sql}", params)]
            assert "SEARCH s USING INTEGER PRIMARY KEY (rowid=?)" in plan
            assert "SEARCH d USING INTEGER PRIMARY KEY (rowid=?)" in plan
