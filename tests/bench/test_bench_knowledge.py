"""The knowledge bench's data and its judge (bench/bench_knowledge.py; test_readme runs the bench itself, small).

The labels are data written by hand: these tests hold them to what the bench's docstring and bench/data/README.md
promise, so that a figure never silently rests on fewer questions or on a page the bench does not load.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from bench_knowledge import (
    Answer,
    Page,
    Question,
    answers,
    as_handbook,
    load_pages,
    load_questions,
    page_sections,
    rendered,
    words,
)

from archive.knowledge_types import KnowledgeHit, KnowledgeSection

BENCH_SECTIONS = 10_000
PAGE = """# tar

> Archiving utility.

- [c]reate an archive and write it to a [f]ile:

`tar cf {{path/to/target.tar}} {{path/to/file1 path/to/file2 ...}}`

- [Interactive] Lis[t] the contents of a tar [f]ile:

`tar tf {{path/to/source.tar}}`
"""


def hit(source: str, heading: str) -> KnowledgeHit:
    return KnowledgeHit(1, 1, "tar", heading, "`tar tf`", source, None, 1.0)


def test_every_labelled_question_is_asked_at_the_bench_size() -> None:
    """Each question's example is on its page, and that page's section among the 10,000 the bench loads."""
    questions = load_questions()
    asked = answers(questions, load_pages(BENCH_SECTIONS))
    assert [question for question in questions if question not in asked] == []


def test_the_questions_are_at_least_100_of_both_kinds_over_many_pages() -> None:
    questions = load_questions()
    kinds = Counter(question.kind for question in questions)
    assert len(questions) >= 100
    assert set(kinds) == {"lexical", "paraphrase"} and min(kinds.values()) >= 40, kinds
    assert len({question.page for question in questions}) >= 100
    assert len({question.text for question in questions}) == len(questions)


def test_no_question_is_its_example_word_for_word() -> None:
    """The questions are written, not copied from the page: a search for the example's own words would be no test."""
    copied = [q.text for q in load_questions() if words(q.text) == words(rendered(q.example))]
    assert copied == []


def test_a_page_is_a_handbook_with_a_section_an_example() -> None:
    """An example's description becomes the heading of its command (tldr's mnemonics shown as words), so each
    example is a section of its own, under the page's title."""
    assert as_handbook(PAGE).splitlines()[4] == "## create an archive and write it to a file"
    assert page_sections("common/tar", PAGE) == [
        KnowledgeSection("tar", "> Archiving utility."),
        KnowledgeSection(
            "tar > create an archive and write it to a file",
            "`tar cf {{path/to/target.tar}} {{path/to/file1 path/to/file2 ...}}`",
        ),
        KnowledgeSection("tar > [Interactive] List the contents of a tar file", "`tar tf {{path/to/source.tar}}`"),
    ]


def test_a_question_is_answered_only_by_its_examples_section() -> None:
    page = Page("common/tar", PAGE, page_sections("common/tar", PAGE))
    question = Question(
        "what is in this tarball?", "paraphrase", "common/tar", "[Interactive] Lis[t] the contents of a tar [f]ile"
    )
    answer = answers([question], [page])[question]
    assert answer == Answer("file:common/tar.md", "interactive list the contents of a tar file")
    assert answer.answered_by(hit("file:common/tar.md", "tar > [Interactive] List the contents of a tar file"))
    assert not answer.answered_by(hit("file:common/tar.md", "tar > create an archive and write it to a file"))
    assert not answer.answered_by(hit("file:linux/tar.md", "tar > [Interactive] List the contents of a tar file"))
    assert not answer.answered_by(hit("file:common/tar.md", "tar > Sort and list the contents of a tar file"))


def test_a_label_naming_an_example_its_page_lacks_stops_the_bench() -> None:
    page = Page("common/tar", PAGE, page_sections("common/tar", PAGE))
    with pytest.raises(SystemExit, match="has no example 'Extract a file'"):
        answers([Question("how do I unpack it?", "paraphrase", "common/tar", "Extract a file")], [page])
