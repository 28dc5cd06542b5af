"""The links in members' messages: found in their text, and told apart from the same link written another way.

Only a link a member wrote may be read (tools/links.py), so the model cannot be steered into reading an address a
page or its own words made up. Any scheme is found (`file:`, `gopher:`), so that the reader can say why it will not
read one rather than the model being told no member gave it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import urlsplit

# A scheme, "://", then anything up to white space or the brackets and quotes text puts around a link
# (Discord's <https://…> that shows no preview, markdown's [text](https://…)).
_LINK = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s<>\"'`|\]\[(){}]+")
# What ends a sentence after a link rather than belonging to it.
_TRAILING = ".,;:!?*_~"
# Links one message gives at most: a wall of links is not a request to read them all.
LINKS_PER_MESSAGE = 20


def links_in(text: str) -> list[str]:
    """The links written in `text`, in order, each once, at most LINKS_PER_MESSAGE."""
    found: dict[str, None] = {}
    for match in _LINK.finditer(text):
        link = match.group().rstrip(_TRAILING)
        if "://" in link and len(link) > link.index("://") + 3:
            found.setdefault(link)
        if len(found) == LINKS_PER_MESSAGE:
            break
    return list(found)


def link_key(link: str) -> str:
    """What two spellings of one link share: the scheme and host in lower case, no fragment, "/" for no path."""
    try:
        parts = urlsplit(link.strip().strip("<>"))
    except ValueError:
        return link
    path = parts.path or "/"
    query = f"?{parts.query}" if parts.query else ""
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}{path}{query}"


def given_links(texts: Iterable[str]) -> dict[str, str]:
    """The links written in `texts`, by `link_key`: the spelling a member wrote, which is the one read."""
    given: dict[str, str] = {}
    for text in texts:
        for link in links_in(text):
            given.setdefault(link_key(link), link)
    return given
