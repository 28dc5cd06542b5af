"""Tests for addressing.py: which messages call Parley by name, and which only speak of it."""

from __future__ import annotations

import pytest

from addressing import calls_by_name

NAMES = ["Parley"]


@pytest.mark.parametrize(
    "text",
    [
        "parley, what's the weather like on mars?",
        "Parley: how do I mount a disk?",
        "parley?",
        "PARLEY - quick question",
        "hey Parley what is a tarball",
        "Hey, parley! look at this",
        "thanks parley",
        "ok parley. do it",
        "so, parley, any idea?",
        "that's the plan, right, Parley?",
        "what do you think, parley",
        "@parley can you check",
        "> quoted text\nparley, is that right?",
    ],
)
def test_a_call_by_name_is_recognised(text: str) -> None:
    assert calls_by_name(text, NAMES)


@pytest.mark.parametrize(
    "text",
    [
        "I asked parley yesterday",
        "parley is down again",
        "what did parley say?",
        "ask parley",
        "parleys are fun",
        "we should parley about this",
        "the parley bot, I mean",
        "`parley, run` is the command",
        "```\nparley, restart\n```",
        "mail me@parley.example",
        "see #parley, it's there",
    ],
)
def test_speaking_of_parley_is_not_calling_it(text: str) -> None:
    assert not calls_by_name(text, NAMES)


def test_every_name_counts_and_the_longest_wins() -> None:
    """A nickname or a wake word calls Parley like its name; a name of several words is matched whole."""
    assert calls_by_name("jarvis, are you there?", ["Parley", "jarvis"])
    assert calls_by_name("hey parley bot what's up", ["Parley", "Parley Bot"])
    assert not calls_by_name("jarvis, are you there?", NAMES)


def test_names_too_short_or_absent_match_nothing() -> None:
    """A two-letter name would match ordinary words; no names, no call."""
    assert not calls_by_name("hi al, come here", ["al"])
    assert not calls_by_name("parley, hi", [])


def test_a_call_at_the_end_of_a_long_paste_is_found() -> None:
    """Only the start and end of a long message are read, which is where an address is."""
    assert calls_by_name("log line\n" * 2_000 + "why does this fail, parley?", NAMES)
    assert not calls_by_name("x " * 2_000 + "parley, hi " + "y " * 2_000, NAMES)
