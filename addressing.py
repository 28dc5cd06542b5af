"""Whether a message calls Parley by name ("parley, what's …", "hey Parley …", "… right, Parley?") without an @mention.

A name counts only where a person would be addressing someone: at the start of a line followed by a pause
("parley, …", "Parley: …", "parley?"), after a greeting ("hey parley …"), set off by commas in the middle
("so, parley, …"), after a comma at the end ("…, parley?"), or typed as "@parley" anywhere. A name used inside a
sentence ("I asked parley yesterday", "parley is down again") speaks about Parley, not to it, and starts nothing.
Code is left out: a name in a pasted command or log is not a call.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

# Words that open an address before the name: "hey parley …", "thanks parley".
GREETINGS = ("hey", "hi", "hello", "yo", "oi", "ok", "okay", "thanks", "thank you", "thx", "ty", "dear", "please")
# A name shorter than this matches inside too many ordinary sentences to be a call ("hi al").
MIN_NAME_CHARS = 3
# Names are looked for in this much of a message: an address is at its start or end, and a pasted wall of text
# would only cost time.
SCANNED_CHARS = 2_000

_CODE = re.compile(r"```.*?```|`[^`\n]*`", re.DOTALL)


def calls_by_name(text: str, names: Iterable[str]) -> bool:
    """Whether `text` addresses one of `names` (case-insensitive) the way a person calls someone by name."""
    patterns = _patterns(
        tuple(sorted({name.strip().casefold() for name in names if len(name.strip()) >= MIN_NAME_CHARS}))
    )
    if patterns is None:
        return False
    any_name, call = patterns
    text = text if len(text) <= 2 * SCANNED_CHARS else text[:SCANNED_CHARS] + "\n" + text[-SCANNED_CHARS:]
    text = _CODE.sub(" ", text)
    # Every way of calling holds a name, and most messages hold none: the plain search for one rules them out first.
    return any_name.search(text) is not None and call.search(text) is not None


@lru_cache(maxsize=256)
def _patterns(names: tuple[str, ...]) -> tuple[re.Pattern[str], re.Pattern[str]] | None:
    """Compiled once per set of names (a server's names change rarely; each message reuses them): any of the names
    anywhere, and a call by one of them."""
    if not names:
        return None
    # Longest first, so "parley bot" wins over "parley"; a name is whole words, optionally typed as "@name".
    alternatives = "|".join(re.escape(name) for name in sorted(names, key=len, reverse=True))
    name = rf"(?<![\w#])@?(?:{alternatives})(?!\w)"
    greeting = "|".join(re.escape(word) for word in GREETINGS)
    pause = (
        r"(?:[,:;!?]|\s[-\u2013\u2014]\s|\.(?:\s|\Z)|\Z|$)"  # a comma, colon, dash (-, en, em), full stop or the end
    )
    call = re.compile(
        "|".join(
            [
                # "parley, what's …", "Parley: …", "parley?", "hey parley, …", at the start of any line (a member
                # may quote something first)
                rf"^[^\w@\n]*(?:(?:{greeting})[ \t,]+)?{name}[ \t]*{pause}",
                # "hey parley what's …", "thanks parley"
                rf"^[^\w@\n]*(?:{greeting})[ \t,]+{name}",
                # "so, parley, what's …"
                rf",\s*{name}\s*,",
                # "…, parley?", "that's right, Parley."
                rf",\s*{name}\s*[.!?]*\s*\Z",
                # "@parley can you …": typed as a mention that Discord did not turn into one
                rf"(?<![\w#])@(?:{alternatives})(?!\w)",
            ]
        ),
        re.IGNORECASE | re.MULTILINE,
    )
    return re.compile(alternatives, re.IGNORECASE | re.MULTILINE), call
