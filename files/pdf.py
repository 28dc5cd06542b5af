"""The text layer of PDFs."""

from __future__ import annotations

import io


def pdf_text(data: bytes) -> str:
    """The text layer of a PDF, pages separated by blank lines. Blocking: run it in a thread.

    Raises:
        ImportError: pypdf (the `files` extra) is not installed.
        ValueError: the file is encrypted or damaged.
    """
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            raise ValueError("it is encrypted")
        return "\n\n".join((page.extract_text() or "").strip() for page in reader.pages).strip()
    except PdfReadError as error:
        raise ValueError(f"it is damaged ({error})") from error
