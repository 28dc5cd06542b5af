"""Contract tests for the support answers' feedback and the support decisions the report reads
(archive/support_feedback.py, with the erasure and export in archive/members.py); on both backends."""

from __future__ import annotations

from datetime import timedelta

import pytest

from archive import Archive, ArchiveWriteFailed, Feedback, MemberCounts
from archive.backends import open_archive
from archive.null import NullArchive
from tests.support.archive_contract_support import CHANNEL, GUILD, NOW, OTHER_CHANNEL, msg

ALICE, BOB = 100, 200
OTHER_GUILD, ELSEWHERE = 11, 30
QUESTION, POST = 1000, 1001
REASONS = ("support_answered", "support_not_sure")


def offer(question: int = QUESTION, post: int = POST, *, asker: int = ALICE, channel: int = CHANNEL) -> Feedback:
    guild = OTHER_GUILD if channel == ELSEWHERE else GUILD
    return Feedback(question, guild, channel, asker, post, "", NOW)


async def test_a_press_sets_the_verdict_and_a_second_press_changes_it(archive: Archive) -> None:
    await archive.offer_feedback(offer())
    assert await archive.feedback(QUESTION) == offer()

    solved = await archive.set_feedback(QUESTION, ALICE, POST, "solved", now=NOW + timedelta(minutes=1))
    assert solved == offer()._replace(verdict="solved", decided_at=NOW + timedelta(minutes=1))
    changed = await archive.set_feedback(QUESTION, ALICE, POST, "not_helpful", now=NOW + timedelta(minutes=2))
    assert changed is not None and changed.verdict == "not_helpful"
    assert await archive.guild_feedback(GUILD, NOW) == [changed]  # one verdict per question, the latest


async def test_a_press_naming_another_asker_question_or_post_records_nothing(archive: Archive) -> None:
    await archive.offer_feedback(offer())
    await archive.offer_feedback(offer(2000, 2001, asker=BOB))

    assert await archive.set_feedback(QUESTION, BOB, POST, "solved") is None  # not the asker
    assert await archive.set_feedback(2000, ALICE, 2001, "solved") is None  # Bob's question
    assert await archive.set_feedback(QUESTION, ALICE, 2001, "solved") is None  # a button copied to another post
    assert await archive.set_feedback(3000, ALICE, POST, "solved") is None  # no such question
    assert [row.verdict for row in await archive.guild_feedback(GUILD, NOW)] == ["", ""]


async def test_an_offer_again_follows_the_new_post_and_keeps_the_verdict(archive: Archive) -> None:
    await archive.offer_feedback(offer())
    await archive.set_feedback(QUESTION, ALICE, POST, "solved")
    await archive.offer_feedback(offer(post=POST + 5))

    kept = await archive.feedback(QUESTION)
    assert kept is not None and (kept.post_id, kept.verdict) == (POST + 5, "solved")
    with pytest.raises(ArchiveWriteFailed):  # another asker cannot take the question over
        await archive.offer_feedback(offer(asker=BOB))


async def test_the_servers_feedback_is_read_by_period(archive: Archive) -> None:
    await archive.offer_feedback(offer(1, 2)._replace(offered_at=NOW - timedelta(days=10)))
    await archive.offer_feedback(offer(3, 4))
    await archive.offer_feedback(offer(5, 6, channel=ELSEWHERE))

    assert [row.question_id for row in await archive.guild_feedback(GUILD, NOW - timedelta(days=7))] == [3]
    assert [row.question_id for row in await archive.guild_feedback(GUILD, NOW - timedelta(days=30))] == [1, 3]


async def test_the_support_decisions_of_a_server_and_period_with_whose_may_be_listed(archive: Archive) -> None:
    # The server's channels are those it has archived messages in.
    archive.add(msg(1, "how do I install?", author_id=ALICE))
    archive.add(msg(2, "where are the logs?", author_id=BOB, channel=OTHER_CHANNEL))
    archive.add(msg(3, "elsewhere", channel=ELSEWHERE, guild=OTHER_GUILD))
    decisions = (
        (CHANNEL, 1, ALICE, "support_answered", 0),
        (OTHER_CHANNEL, 2, BOB, "support_not_sure", 1),
        (OTHER_CHANNEL, 4, 0, "support_not_sure", 2),  # a placeholder: an opted-out member's
        (CHANNEL, 5, ALICE, "named", 3),  # not a support decision
        (CHANNEL, 6, ALICE, "support_not_sure", 60 * 24 * 8),  # before the week
        (ELSEWHERE, 3, ALICE, "support_answered", 4),  # another server
    )
    for channel, message, author, reason, minutes_ago in decisions:
        archive.record_decision(
            channel_id=channel, message_id=message, author_id=author, author_name="x", excerpt=f"question {message}",
            responded=reason == "support_answered", reason=reason, tier="support", confidence=0.5,
            decided_at=NOW - timedelta(minutes=minutes_ago),
        )  # fmt: skip
    await archive.flush()

    rows = await archive.support_decisions(GUILD, NOW - timedelta(days=7), REASONS)
    assert [(row.message_id, row.reason, row.listed) for row in rows] == [
        (4, "support_not_sure", False),
        (2, "support_not_sure", True),
        (1, "support_answered", True),
    ]
    assert rows[-1].excerpt == "question 1" and rows[-1].channel_id == CHANNEL
    await archive.set_opted_out(GUILD, BOB, True, now=NOW)
    rows = await archive.support_decisions(GUILD, NOW - timedelta(days=7), REASONS)
    assert [(row.message_id, row.listed) for row in rows] == [(4, False), (2, False), (1, True)]
    assert await archive.support_decisions(GUILD, NOW - timedelta(days=7), ()) == []


async def test_the_askers_feedback_is_exported_and_erased_with_their_data(archive: Archive) -> None:
    archive.add(msg(QUESTION, "how do I install?", author_id=ALICE))
    archive.add(msg(2000, "and me?", author_id=BOB))
    await archive.flush()
    await archive.offer_feedback(offer())
    await archive.set_feedback(QUESTION, ALICE, POST, "solved")
    await archive.offer_feedback(offer(2000, 2001, asker=BOB))
    await archive.offer_feedback(offer(3000, 3001, channel=ELSEWHERE))  # Alice's, in another server

    assert [row.question_id for row in await archive.member_feedback(GUILD, ALICE)] == [QUESTION]
    assert (await archive.member_counts(GUILD, ALICE)).feedback == 1
    await archive.erase_member(GUILD, ALICE, [QUESTION])

    assert await archive.member_feedback(GUILD, ALICE) == []
    assert await archive.feedback(QUESTION) is None
    assert await archive.member_counts(GUILD, ALICE) == MemberCounts(0, 0, 0, 0, 0, 0)
    assert [row.question_id for row in await archive.guild_feedback(GUILD, NOW)] == [2000]  # Bob's stays
    assert [row.question_id for row in await archive.member_feedback(OTHER_GUILD, ALICE)] == [3000]


async def test_a_deleted_question_channel_or_server_takes_its_feedback_along(archive: Archive) -> None:
    archive.add(msg(QUESTION, "how do I install?", author_id=ALICE))
    await archive.flush()
    for question, channel in ((QUESTION, CHANNEL), (2000, OTHER_CHANNEL), (3000, CHANNEL), (4000, ELSEWHERE)):
        await archive.offer_feedback(offer(question, question + 1, channel=channel))

    archive.delete([QUESTION])
    await archive.flush()
    assert await archive.feedback(QUESTION) is None
    archive.delete_channel(OTHER_CHANNEL)
    await archive.flush()
    assert [row.question_id for row in await archive.guild_feedback(GUILD, NOW)] == [3000]
    archive.delete_guild(GUILD)
    await archive.flush()
    assert await archive.guild_feedback(GUILD, NOW) == []
    assert await archive.feedback(4000) is not None


async def test_the_null_archive_keeps_no_offer_so_no_press_counts() -> None:
    archive = NullArchive()
    with pytest.raises(ArchiveWriteFailed):
        await archive.offer_feedback(offer())
    assert await archive.set_feedback(QUESTION, ALICE, POST, "solved") is None
    assert await archive.feedback(QUESTION) is None
    assert await archive.guild_feedback(GUILD, NOW) == []
    assert await archive.support_decisions(GUILD, NOW, REASONS) == []
    assert await archive.member_feedback(GUILD, ALICE) == []


async def test_feedback_older_than_the_retention_is_pruned(archive_url: str) -> None:
    archive = await open_archive(archive_url, retention_days=7)
    try:
        await archive.offer_feedback(offer(1, 2)._replace(offered_at=NOW - timedelta(days=8)))
        await archive.offer_feedback(offer(3, 4)._replace(offered_at=NOW - timedelta(days=6)))
        await archive.prune(now=NOW)
        assert [row.question_id for row in await archive.guild_feedback(GUILD, NOW - timedelta(days=30))] == [3]
    finally:
        await archive.close()
