"""The watch lists' pre-filter (moderation/prefilter.py): what sends a message to be screened, and what does not."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from moderation.prefilter import Candidate, PreFilter, listed_words, parsed_words

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
LONG_AGO = NOW - timedelta(days=400)
PLAIN = Candidate(1, 10, 100, "good morning, how was the release?", 0, LONG_AGO, NOW)


def test_a_plain_message_is_not_screened() -> None:
    assert PreFilter().reasons(PLAIN, ("scam",)) == []


def test_a_link_counts_only_from_a_member_who_joined_in_the_last_day() -> None:
    link = replace(PLAIN, text="free stuff at https://example.com/x")
    assert PreFilter().reasons(link, ()) == []
    assert PreFilter().reasons(replace(link, joined_at=NOW - timedelta(hours=3)), ()) == [
        "a link from a member who joined in the last day"
    ]
    assert PreFilter().reasons(replace(link, joined_at=None), ()) == []  # unknown is not new


def test_mass_mentions_and_everyone_are_screened() -> None:
    assert PreFilter().reasons(replace(PLAIN, mentions=5), ()) == ["mass mentions"]
    assert PreFilter().reasons(replace(PLAIN, mentions=4), ()) == []
    assert PreFilter().reasons(replace(PLAIN, text="hey @everyone look"), ()) == ["mass mentions"]


def test_the_same_text_in_three_channels_within_ten_minutes_is_screened() -> None:
    prefilter = PreFilter()
    spam = replace(PLAIN, text="Join my server now!!")
    assert prefilter.reasons(spam, ()) == []
    assert prefilter.reasons(replace(spam, channel_id=11, at=NOW + timedelta(minutes=2)), ()) == []
    third = replace(spam, channel_id=12, text="join my  server NOW!!", at=NOW + timedelta(minutes=4))
    assert prefilter.reasons(third, ()) == ["the same text in 3 channels within 10 minutes"]
    # Another author, or the same text once the window has passed, starts afresh.
    assert prefilter.reasons(replace(third, author_id=200), ()) == []
    late = replace(spam, channel_id=13, at=NOW + timedelta(minutes=30))
    assert prefilter.reasons(late, ()) == []


def test_listed_words_match_whole_words_in_any_case() -> None:
    assert listed_words("Totally not a SCAM, free nitro here", ("scam", "free nitro", "am")) == ["scam", "free nitro"]
    assert listed_words("scampi for dinner", ("scam",)) == []
    message = replace(PLAIN, text="claim your FREE NITRO")
    assert PreFilter().reasons(message, ("free nitro",)) == ['the listed word(s) "free nitro"']


def test_an_admins_words_are_parsed_once_each_without_blanks() -> None:
    assert parsed_words(" Scam, free   nitro,, scam ,") == ("scam", "free nitro")
