"""An admin's file read into a document's sections, within the limits members' attachments have (files/).

What a file is comes from its bytes (files.kinds), on a thread of its own; a PDF's text is read in a worker
process killed when it runs late (files.extraction). A file is read whole or refused with one line saying why:
a PDF past the page or character cap, or a text past the character cap, is refused rather than added in part,
since an answer citing a handbook that silently stops at page 100 would mislead. Splitting runs on a thread too.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from archive.knowledge_types import KnowledgeSection
from files.extraction import PDF_MAX_CHARS, PDF_MAX_PAGES, PdfReaders
from files.kinds import MAX_DOWNLOAD_BYTES, sniffed
from files.pdf import PdfText
from files.prepared import human_size
from files.preparer import ARCHIVED_TEXT_MAX_CHARS, DECODE_SECONDS
from knowledge.sections import split_document
from records import Kind

__all__ = ["MAX_DOCUMENT_BYTES", "MAX_DOCUMENT_CHARS", "DocumentReader", "DocumentRefused", "ReadDocument"]

# The attachments' own caps: the largest file downloaded, and the most text the archive keeps of one file.
MAX_DOCUMENT_BYTES = MAX_DOWNLOAD_BYTES
MAX_DOCUMENT_CHARS = ARCHIVED_TEXT_MAX_CHARS
_MARKDOWN_SUFFIXES = frozenset({".md", ".markdown", ".mdown", ".mkd"})


class DocumentRefused(Exception):
    """A file that is not added; the message says why in one line (for the admin)."""


@dataclass(frozen=True, slots=True)
class ReadDocument:
    """A file read and split: its kind ("markdown", "text" or "pdf") and its sections."""

    kind: str
    sections: list[KnowledgeSection]


@dataclass
class DocumentReader:
    """Reads admins' files one at a time per PDF worker (`pdfs`), each within the attachments' limits."""

    # One worker: adding documents is rare, and the answers' own PDF readers keep theirs.
    pdfs: PdfReaders = field(default_factory=lambda: PdfReaders(workers=1))
    max_chars: int = MAX_DOCUMENT_CHARS
    decode_seconds: float = DECODE_SECONDS

    def check_size(self, size: int) -> None:
        """Refuse a file too large to download, before downloading it."""
        if size > MAX_DOCUMENT_BYTES:
            limit = human_size(MAX_DOCUMENT_BYTES)
            raise DocumentRefused(f"The file is over {limit}, the most the knowledge base reads.")

    async def read(self, filename: str, title: str, data: bytes) -> ReadDocument:
        """`data` (the file `filename`) as a document's sections.

        Raises:
            DocumentRefused: it is not a text, Markdown or PDF file, is too large, has no text, or could not be read.
        """
        self.check_size(len(data))
        try:
            async with asyncio.timeout(self.decode_seconds):
                kind, text = await sniffed(data)
        except TimeoutError:
            raise DocumentRefused(f"Reading the file took over {self.decode_seconds:g} s.") from None
        if kind is Kind.PDF:
            text, document_kind = self._whole(await self.pdfs.read(data)), "pdf"
        elif kind is Kind.TEXT and text is not None:
            document_kind = "markdown" if PurePosixPath(filename).suffix.lower() in _MARKDOWN_SUFFIXES else "text"
        else:
            raise DocumentRefused("Only text, Markdown and PDF files can be added to the knowledge base.")
        if len(text) > self.max_chars:
            raise DocumentRefused(
                f"The file has {len(text):,} characters of text; the knowledge base reads at most {self.max_chars:,}."
            )
        sections = await asyncio.to_thread(split_document, title, text, document_kind)
        if not sections:
            raise DocumentRefused("The file has no text to add.")
        return ReadDocument(document_kind, sections)

    def _whole(self, read: PdfText | str) -> str:
        """A PDF's whole text, or the refusal of one that could not be read or was cut at the caps."""
        if isinstance(read, str):
            raise DocumentRefused(f"{read}.")
        if read.pages_read < read.pages or read.cut_at_chars:
            raise DocumentRefused(
                f"The PDF has {read.pages} pages; the knowledge base reads PDFs of at most {PDF_MAX_PAGES} pages"
                f" and {PDF_MAX_CHARS:,} characters whole."
            )
        return read.text
