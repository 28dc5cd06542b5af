"""The watch lists' pre-filter: which new messages of a watched channel are worth a model call, decided locally and
cheaply. A message passes when it has a link and its author joined the server recently, mentions many members (or
everyone), repeats what its author just wrote in other channels, or holds a word the admins listed; anything else
costs nothing.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

# A member who joined this recently and posts a link: the usual shape of a spam or scam account.
NEW_MEMBER = timedelta(days=1)
MASS_MENTIONS = 5
# The same text (at least this long) in this many channels within the window: a raid or a spam run.
REPEAT_CHANNELS = 3
REPEAT_WINDOW = timedelta(minutes=10)
REPEAT_MIN_CHARS = 10
# Authors whose recent texts are kept, at most: the oldest are let go first.
AUTHORS_KEPT = 10_000
_LINK = re.compile(r"https?://|discord\.gg/|www\.", re.IGNORECASE)
_EVERYONE = re.compile(r"@(everyone|here)\b")


@dataclass(frozen=True, slots=True)
class Candidate:
    """A new message as the pre-filter sees it; `joined_at`: when its author joined the server (None: unknown)."""

    guild_id: int
    channel_id: int
    author_id: int
    text: str
    mentions: int
    joined_at: datetime | None
    at: datetime


class PreFilter:
    """Why a message should be screened (`reasons`), remembering each author's recent texts for the repeats."""

    def __init__(self) -> None:
        self._recent: dict[tuple[int, int], deque[tuple[str, int, datetime]]] = {}

    def reasons(self, message: Candidate, words: Sequence[str]) -> list[str]:
        """What makes `message` worth screening, in words the case card shows; none: it is not screened."""
        found = []
        if _LINK.search(message.text) and message.joined_at is not None and message.at - message.joined_at < NEW_MEMBER:
            found.append("a link from a member who joined in the last day")
        if message.mentions >= MASS_MENTIONS or _EVERYONE.search(message.text):
            found.append("mass mentions")
        channels = self._repeated_in(message)
        if channels >= REPEAT_CHANNELS:
            found.append(
                f"the same text in {channels} channels within {int(REPEAT_WINDOW.total_seconds() // 60)} minutes"
            )
        listed = listed_words(message.text, words)
        if listed:
            found.append("the listed word(s) " + ", ".join(f'"{word}"' for word in listed))
        return found

    def _repeated_in(self, message: Candidate) -> int:
        """In how many channels the author wrote this text within the window, this one included."""
        text = " ".join(message.text.lower().split())
        if len(text) < REPEAT_MIN_CHARS:
            return 1
        key = (message.guild_id, message.author_id)
        recent = self._recent.pop(key, deque())
        while recent and message.at - recent[0][2] > REPEAT_WINDOW:
            recent.popleft()
        recent.append((text, message.channel_id, message.at))
        self._recent[key] = recent  # most recently heard last, so the oldest authors go first
        while len(self._recent) > AUTHORS_KEPT:
            del self._recent[next(iter(self._recent))]
        return len({channel for said, channel, _ in recent if said == text})


def listed_words(text: str, words: Sequence[str]) -> list[str]:
    """The listed words (or phrases) `text` holds, whole and in any case."""
    return [word for word in words if re.search(rf"(?<!\w){re.escape(word)}(?!\w)", text, re.IGNORECASE)]


def parsed_words(text: str) -> tuple[str, ...]:
    """A watch list's words as an admin types them: comma-separated, blanks dropped, each once, at most 100."""
    words = [" ".join(word.split()).lower() for word in text.split(",")]
    return tuple(dict.fromkeys(word for word in words if word))[:100]
