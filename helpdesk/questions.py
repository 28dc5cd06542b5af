"""Whether a message asks something: the desk's first, local and free judgement of a support channel's messages.

A model call per message of a busy help channel would cost more than the answers, so the desk asks this first and
only a message that passes is waited on and looked up. It errs towards "no": a question it misses is one a member
may still @mention Parley with, while chat taken for a question costs a search (never an answer: the documents'
confidence gate, knowledge/confidence.py, decides that). A question is a sentence ending in "?", or one that opens
the way questions and requests for help open ("how do I", "does anyone know", "is there a way", "can't get ...
to work"), in English.
"""

from __future__ import annotations

import re

__all__ = ["asks_something"]

# Fewer words than this ask nothing the documents could answer ("what?", "huh?", "really?").
MIN_WORDS = 3
# What Discord's markup and links add: neither asks anything (a URL's "?" is a query string).
_NOISE = re.compile(r"https?://\S+|<[@#][!&]?\d+>|<a?:\w+:\d+>|`[^`]*`")
_WORD = re.compile(r"[\w']+")
# A sentence ending in a question mark (closing quotes or brackets after it are fine).
_ASKS = re.compile(r"\?[\"')\]]*(\s|$)")
# Openings of questions written without their "?", and of requests for help.
_OPENINGS = re.compile(
    r"""^(?:(?:hi|hey|hello|so|ok|okay|um|also|quick\s+question)\W+)*
    (?:
        how\s+(?:do|can|should|would|could|to)\b
      | (?:what|where|when|which|why|who)(?:'s|\s+(?:is|are|was|do|does|did|can|should|would|happens))\b
      | (?:does|do|can|could|would|will|is|are)\s+(?:anyone|anybody|someone|somebody|you|i|we|it|there|this|that)\b
      | (?:anyone|anybody|someone|somebody)\s+(?:know|knows|have|has|tried|seen|got)\b
      | is\s+(?:it\s+)?possible\b
      | is\s+there\s+(?:a|any)\b
      | any\s+(?:idea|ideas|way|tips|help)\b
      | (?:i\s+)?(?:need|looking\s+for)\s+help\b
      | (?:i\s+)?(?:can't|cannot|can\s+not)\s+(?:get|figure|find|make|seem)\b
      | (?:help|please\s+help)\b
    )""",
    re.IGNORECASE | re.VERBOSE,
)


def asks_something(text: str) -> bool:
    """Whether `text` (a message's content) asks a question or for help, by its punctuation and its opening."""
    plain = " ".join(_NOISE.sub(" ", text).split())
    if len(_WORD.findall(plain)) < MIN_WORDS:
        return False
    return _ASKS.search(plain) is not None or _OPENINGS.match(plain) is not None
