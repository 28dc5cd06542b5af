"""Text both backends and the model's JSON can take: members' clients and files may carry lone surrogates and NUL."""

from __future__ import annotations

import re

# Some clients send lone UTF-16 surrogates, which UTF-8 (SQLite, the model's JSON) cannot encode, and
# NUL, which many C libraries read as the end of the text.
_UNENCODABLE = re.compile("[\ud800-\udfff\x00]")


def safe_text(text: str) -> str:
    """`text` with each lone surrogate replaced by U+FFFD and each NUL dropped, so it can go anywhere."""
    if text.isascii():
        return text.replace("\x00", "") if "\x00" in text else text
    return _UNENCODABLE.sub(_replacement, text)


def _replacement(match: re.Match[str]) -> str:
    return "" if match.group() == "\x00" else "\ufffd"
