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
    parse_question,
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
    assert [question for question in questions if question.covered and question not in asked] == []


def test_the_questions_are_at_least_100_of_both_kinds_over_many_pages() -> None:
    questions = [question for question in load_questions() if question.covered]
    kinds = Counter(question.kind for question in questions)
    assert len(questions) >= 100
    assert set(kinds) == {"lexical", "paraphrase"} and min(kinds.values()) >= 40, kinds
    assert len({question.page for question in questions}) >= 100
    assert len({question.text for question in load_questions()}) == len(load_questions())


def test_a_third_as_many_questions_as_the_covered_ones_are_not_covered() -> None:
    """The gate's error that matters, answering what the documents do not answer, needs questions to make it on."""
    questions = load_questions()
    uncovered = [question for question in questions if not question.covered]
    assert {question.kind for question in uncovered} == {"uncovered"}
    assert len(uncovered) * 3 >= len(questions) - len(uncovered)


def test_no_question_is_its_example_word_for_word() -> None:
    """The questions are written, not copied from the page: a search for the example's own words would be no test."""
    copied = [q.text for q in load_questions() if q.example and words(q.text) == words(rendered(q.example))]
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


def test_a_question_file_line_needs_a_question_and_a_page_or_null(tmp_path: Path) -> None:
    """`--questions FILE`: each line a question and its page, null for one the documents do not answer; a
    malformed line stops the bench with one line naming the file's line."""
    path = tmp_path / "mine.jsonl"
    path.write_text(
        '{"question": "what is in this tarball?", "page": "common/tar"}\n'
        '{"question": "why is my fan loud?", "page": null}\n'
        '{"question": "how?", "page": "common/tar", "kind": "paraphrase", "example": "Extract a file"}\n'
    )
    assert load_questions(path) == [
        Question("what is in this tarball?", "covered", "common/tar"),
        Question("why is my fan loud?", "uncovered", None),
        Question("how?", "paraphrase", "common/tar", "Extract a file"),
    ]
    path.write_text('{"question": "fine", "page": null}\n{"question": "no page"}\n')
    with pytest.raises(SystemExit, match=r"^mine.jsonl line 2: needs \"page\""):
        load_questions(path)
    for line, says in [
        ("not json", "not JSON"),
        ('["a list"]', 'needs "question"'),
        ('{"question": "  ", "page": null}', 'needs "question"'),
        ('{"question": "q", "page": 3}', 'needs "page"'),
        ('{"question": "q", "page": null, "example": "Extract a file"}', 'an "example" needs its "page"'),
    ]:
        with pytest.raises(SystemExit, match=f"^here: {says}"):
            parse_question(line, "here")


def test_a_page_without_an_example_is_answered_by_any_of_its_sections() -> None:
    page = Page("common/tar", PAGE, page_sections("common/tar", PAGE))
    question = Question("what is in this tarball?", "covered", "common/tar")
    answer = answers([question, Question("why is my fan loud?", "uncovered", None)], [page])
    assert answer == {question: Answer("file:common/tar.md", None)}
    assert answer[question].answered_by(hit("file:common/tar.md", "tar > create an archive and write it to a file"))
    assert not answer[question].answered_by(hit("file:linux/tar.md", "tar"))
