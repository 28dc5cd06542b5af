"""A document's text split into the sections the knowledge base stores and searches.

Markdown is split at its headings (ATX `#` lines and setext underlines, never inside a fenced code block),
each section keeping its heading path ("Install > Docker"); plain text (and a PDF's text, which files/ gives as
plain text) has no headings, so its sections are named by their place ("Part 2"). Within a heading, paragraphs
are packed into sections of at most `MAX_SECTION_CHARS`; a longer paragraph is cut at a line, a sentence or a
space. A section small enough to quote whole is what a search should find: a whole chapter would drown the
matching sentence, a lone line would lose its context.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from archive.knowledge_types import KnowledgeSection

__all__ = ["KINDS", "MAX_SECTION_CHARS", "split_document"]

MAX_SECTION_CHARS = 1500
KINDS = ("markdown", "text", "pdf")
HEADING_SEPARATOR = " > "

_ATX = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t#]*$|^ {0,3}(#{1,6})$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")
# Where a too-long paragraph is best cut, best first: a line, a sentence, a word.
_CUTS = ("\n", ". ", " ")


def split_document(title: str, text: str, kind: str) -> list[KnowledgeSection]:
    """`text` as sections: at headings for `kind` "markdown", else ("text", "pdf") at paragraphs alone.

    `title` names the document; a Markdown document's text before its first heading goes under no heading ("").
    Empty sections are left out, so a blank document has none.
    """
    if kind not in KINDS:
        raise ValueError(f"unknown document kind {kind!r}; expected one of {', '.join(KINDS)}")
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if kind == "markdown":
        return [
            KnowledgeSection(heading, chunk)
            for heading, body in _markdown_parts(text)
            for chunk in _packed(_paragraphs(body))
        ]
    chunks = list(_packed(_paragraphs(text)))
    if len(chunks) == 1:
        return [KnowledgeSection("", chunks[0])]
    return [KnowledgeSection(f"Part {number}", chunk) for number, chunk in enumerate(chunks, start=1)]


def _markdown_parts(text: str) -> Iterator[tuple[str, str]]:
    """(heading path, body) for each heading of a Markdown text, and the text before the first one."""
    path: list[tuple[int, str]] = []
    body: list[str] = []
    fence: str | None = None
    for line in text.split("\n"):
        if fence is not None or _FENCE.match(line):
            fence = _fence_after(line, fence)
            body.append(line)
            continue
        heading = _heading(line, body)
        if heading is None:
            body.append(line)
            continue
        level, name = heading
        if level < 0:
            level = -level
            body.pop()  # the underlined line is the heading's name, not the body's
        yield _path(path), "\n".join(body)
        body = []
        path = [(depth, part) for depth, part in path if depth < level] + [(level, name)]
    yield _path(path), "\n".join(body)


def _heading(line: str, body: list[str]) -> tuple[int, str] | None:
    """The level and name of `line` as a heading (a negative level: a setext underline of body's last line)."""
    if atx := _ATX.match(line):
        hashes = atx.group(1) or atx.group(3)
        return len(hashes), (atx.group(2) or "").strip()
    if body and body[-1].strip() and (setext := _SETEXT.match(line)):
        return (-1 if setext.group(1).startswith("=") else -2), body[-1].strip()
    return None


def _fence_after(line: str, fence: str | None) -> str | None:
    """The open code fence after `line`: opened, still open, or closed (None)."""
    opening = _FENCE.match(line)
    if fence is None:
        return opening.group(1)[0] * 3 if opening else None
    return None if line.strip().startswith(fence) else fence


def _path(path: list[tuple[int, str]]) -> str:
    return HEADING_SEPARATOR.join(name for _, name in path if name)


def _paragraphs(text: str) -> Iterator[str]:
    for paragraph in _PARAGRAPH_BREAK.split(text):
        paragraph = paragraph.strip("\n").rstrip()
        if paragraph.strip():
            yield from _cut(paragraph)


def _cut(paragraph: str) -> Iterator[str]:
    """A paragraph in pieces of at most `MAX_SECTION_CHARS`, each cut at the best place `_CUTS` finds."""
    while len(paragraph) > MAX_SECTION_CHARS:
        window = paragraph[:MAX_SECTION_CHARS]
        at = next((window.rfind(cut) for cut in _CUTS if window.rfind(cut) > MAX_SECTION_CHARS // 2), -1)
        end = at + 1 if at > 0 else MAX_SECTION_CHARS
        yield paragraph[:end].strip()
        paragraph = paragraph[end:].strip()
    if paragraph:
        yield paragraph


def _packed(paragraphs: Iterator[str]) -> Iterator[str]:
    """Consecutive paragraphs joined (by a blank line) while they fit in `MAX_SECTION_CHARS`."""
    chunk = ""
    for paragraph in paragraphs:
        if chunk and len(chunk) + 2 + len(paragraph) > MAX_SECTION_CHARS:
            yield chunk
            chunk = ""
        chunk = f"{chunk}\n\n{paragraph}" if chunk else paragraph
    if chunk:
        yield chunk
