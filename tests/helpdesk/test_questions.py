"""helpdesk/questions.py: which messages of a support channel ask something, on examples of both."""

from __future__ import annotations

import pytest

from helpdesk.questions import asks_something

QUESTIONS = [
    "which port does the web interface listen on?",
    "How do I reset my password",
    "how to install it with docker",
    "does anyone know why the build fails on windows",
    "anyone know how backups work",
    "hey, is there a way to export my data",
    "Is it possible to run two instances",
    "can't get the bot to start after the update",
    "what's the refund policy",
    "Where are the logs kept",
    "any idea why my upload times out",
    "I need help with the installer",
    "quick question: do you support SSO",
    'the docs say "restart it" but restart what?)',
    "it fails with error 42 on login. why?",
]
CHAT = [
    "thanks, that worked!",
    "good morning everyone",
    "lol",
    "what?",
    "huh??",
    "I fixed it by reinstalling",
    "see https://example.com/page?id=3 for the notes",
    "the deploy moved to noon",
    "how cool is that",  # an exclamation shaped like a question, with no "?"
    "`SELECT * FROM t WHERE a = ?` is the query I run",
    "who cares",
    "<@123456789012345678> ?",
]


@pytest.mark.parametrize("text", QUESTIONS)
def test_a_question_or_a_request_for_help_asks_something(text: str) -> None:
    assert asks_something(text)


@pytest.mark.parametrize("text", CHAT)
def test_chat_asks_nothing(text: str) -> None:
    assert not asks_something(text)
