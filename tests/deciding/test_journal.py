"""Tests for the decisions kept for /parley why (deciding/journal.py)."""

from __future__ import annotations

from typing import Any

from deciding.journal import DecisionJournal, LoggedDecision, excerpt

CHANNEL = 500


def logged(message_id: int, reason: str = "followup", *, respond: bool = True, **fields: Any) -> LoggedDecision:
    tier = "start" if reason == "no_conversation" else "followup"
    values = {"author": "alice", "excerpt": "and then?", "tier": tier, **fields}
    return LoggedDecision(message_id, respond=respond, reason=reason, **values)


def test_journal_keeps_a_bounded_window_per_channel() -> None:
    """At most 25 conversation decisions a channel, newest first; the oldest fall out."""
    journal = DecisionJournal()
    for message_id in range(1, 31):
        journal.add(CHANNEL, logged(message_id))
    assert [entry.message_id for entry in journal.recent(CHANNEL)] == list(range(30, 5, -1))


def test_idle_silence_never_crowds_out_the_conversation() -> None:
    """Chatter outside a conversation keeps only its 5 latest decisions, beside the conversation's."""
    journal = DecisionJournal()
    for message_id in range(1, 11):
        journal.add(CHANNEL, logged(message_id))
    for message_id in range(11, 211):
        journal.add(CHANNEL, logged(message_id, "no_conversation", respond=False))
    kept = journal.recent(CHANNEL)
    assert [entry.message_id for entry in kept] == [210, 209, 208, 207, 206, *range(10, 0, -1)]


def test_journal_forgets_the_least_recently_active_channel() -> None:
    """Beyond `max_channels` the channel whose last decision is oldest is dropped whole."""
    journal = DecisionJournal(max_channels=2)
    journal.add(1, logged(1))
    journal.add(2, logged(2))
    journal.add(1, logged(3))
    journal.add(3, logged(4))
    assert len(journal) == 2 and journal.recent(2) == [] and len(journal.recent(1)) == 2


def test_a_later_verdict_on_a_message_replaces_the_first() -> None:
    """A budget overruling an answer leaves one entry for that message, the overruling one."""
    journal = DecisionJournal()
    journal.add(CHANNEL, logged(1, "mention"))
    journal.add(CHANNEL, logged(2, "mention"))
    journal.add(CHANNEL, logged(2, "server_budget", respond=False))
    assert [(entry.message_id, entry.reason) for entry in journal.recent(CHANNEL)] == [
        (2, "server_budget"),
        (1, "mention"),
    ]


def test_journal_forgets_deleted_messages() -> None:
    """A deleted message's decision goes too: its excerpt is a copy of the text."""
    journal = DecisionJournal()
    for message_id, reason in [(1, "followup"), (2, "no_conversation"), (3, "followup")]:
        journal.add(CHANNEL, logged(message_id, reason))
    journal.forget_messages(CHANNEL, {1, 2})
    assert [entry.message_id for entry in journal.recent(CHANNEL)] == [3]


def test_excerpt_is_one_short_line() -> None:
    """Whitespace collapses to single spaces and a long text is cut with an ellipsis."""
    assert excerpt("  how\ndo   I\tlist files? ") == "how do I list files?"
    long = excerpt("word " * 50)
    assert len(long) == 60 and long.endswith("…")


def test_forgetting_an_author_drops_their_decisions_in_the_channels_named() -> None:
    """An erasure drops the decisions on what its member wrote (a question asked by command among them, which no
    archived message leads to) in their server's channels; others', and other servers', stay."""
    journal = DecisionJournal()
    journal.add(CHANNEL, logged(1, author_id=7))
    journal.add(CHANNEL, logged(2, "no_conversation", respond=False, author_id=7))
    journal.add(CHANNEL, logged(3, author_id=8))
    journal.add(CHANNEL + 1, logged(4, author_id=7))
    journal.forget_author(7, lambda channel_id: channel_id == CHANNEL)
    assert [entry.message_id for entry in journal.recent(CHANNEL)] == [3]
    assert [entry.message_id for entry in journal.recent(CHANNEL + 1)] == [4]
