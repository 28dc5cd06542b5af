"""What Parley shows of itself, made safe to show: credentials in URLs masked, log records kept to one line.

`mask_credentials` is the one masking function for everything an operator sees (`--check`, the log,
`/parley status`), since that is what gets pasted into bug reports: a URL's password (or a user part that
is all there is, often a token) and its query's password- or token-like parameters. `LogLineFormatter`
also escapes line breaks and other control characters in each record's message, so a member's name or text
holding a newline cannot write what reads as a second log record.
"""

from __future__ import annotations

import logging
import re

MASK = "********"

# A URL as it appears in running text: a scheme, then everything up to whitespace or a quoting character.
_URL = re.compile(r"\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s<>\"'`]+")
# The user information of a URL's authority (RFC 3986 3.2.1): greedy, so it runs to the authority's last '@', as
# urllib.parse reads it (a password with an unescaped '@' is masked whole).
_USERINFO = re.compile(r"^([^:/]+://)([^/?#]*)@")
_SECRET_PARAMETER = re.compile(r"([?&][\w.\-]*(?:pass|pwd|token|secret|api[_\-]?key)[\w.\-]*=)[^&#]*", re.IGNORECASE)
# What could end a log line or rewrite a terminal: C0 controls but tab, DEL, C1 controls, Unicode line breaks.
_LINE_BREAKING = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]")
_ESCAPES = {"\n": "\\n", "\r": "\\r"}


def mask_credentials(text: str) -> str:
    """`text` with each URL's password (or lone user part) and secret-looking query parameters as `MASK`."""
    if "://" not in text:
        return text
    return _URL.sub(_masked_url, text)


def _masked_url(match: re.Match[str]) -> str:
    url = _USERINFO.sub(_masked_userinfo, match.group(), count=1)
    return _SECRET_PARAMETER.sub(rf"\g<1>{MASK}", url)


def _masked_userinfo(match: re.Match[str]) -> str:
    scheme, userinfo = match.groups()
    user, has_password, _ = userinfo.partition(":")
    return f"{scheme}{user}:{MASK}@" if has_password else f"{scheme}{MASK}@"


def one_line(text: str) -> str:
    """`text` with line breaks and other control characters (but tab) written as escapes: `\\n`, `\\x1b`, ..."""
    return _LINE_BREAKING.sub(_escaped, text)


def _escaped(match: re.Match[str]) -> str:
    char = match.group()
    return _ESCAPES.get(char) or char.encode("unicode_escape").decode("ascii")


class LogLineFormatter(logging.Formatter):
    """Each record's line with its message on that one line, and no credentials anywhere in it.

    A traceback still follows on lines of its own, as Python writes it, masked too.
    """

    def formatMessage(self, record: logging.LogRecord) -> str:
        return one_line(super().formatMessage(record))

    def format(self, record: logging.LogRecord) -> str:
        return mask_credentials(super().format(record))


class MaskCredentials(logging.Filter):
    """Masks credentials in a record's message and arguments, for handlers that send records on rather than
    format them (Logfire's): what a member wrote stays an argument, so a content-free handler can still drop it."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):
            record.msg = mask_credentials(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(_masked_argument(argument) for argument in record.args)
        return True


def _masked_argument(argument: object) -> object:
    if isinstance(argument, str):
        return mask_credentials(argument)
    if isinstance(argument, BaseException):  # "could not connect: %s", error: its text may hold the URL
        text = str(argument)
        masked = mask_credentials(text)
        return argument if masked == text else masked
    return argument
