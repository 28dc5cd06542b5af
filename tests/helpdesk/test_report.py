"""helpdesk/report.py: the support report's figures, computed from decisions and feedback written in a real archive
(both backends), as the support desk and the feedback buttons write them."""

from __future__ import annotations

from datetime import timedelta

from archive import Archive, Feedback
from helpdesk.question import (
    SUPPORT_ANSWERED,
    SUPPORT_HANDED_OFF,
    SUPPORT_HUMAN_FIRST,
    SUPPORT_NOT_A_QUESTION,
    SUPPORT_NOT_SURE,
    SUPPORT_REASONS,
)
from helpdesk.report import SupportFigures, UnansweredQuestion, support_figures
from tests.support.archive_contract_support import CHANNEL, GUILD, NOW, OTHER_CHANNEL, msg

ALICE, BOB, CAROL = 100, 200, 300
WEEK_AGO = NOW - timedelta(days=7)


async def decide(
    archive: Archive, message: int, author: int, reason: str, *, minutes_ago: float, channel: int = CHANNEL
) -> None:
    archive.record_decision(
        channel_id=channel, message_id=message, author_id=author, author_name="x", excerpt=f"question {message}",
        responded=reason == SUPPORT_ANSWERED, reason=reason, tier="support", confidence=0.5,
        decided_at=NOW - timedelta(minutes=minutes_ago),
    )  # fmt: skip


async def feedback(archive: Archive, question: int, asker: int, verdict: str) -> None:
    await archive.offer_feedback(Feedback(question, GUILD, CHANNEL, asker, question + 1000, "", NOW))
    if verdict:
        await archive.set_feedback(question, asker, question + 1000, verdict, now=NOW)


async def figures(archive: Archive) -> SupportFigures:
    decisions = await archive.support_decisions(GUILD, WEEK_AGO, SUPPORT_REASONS)
    return support_figures(decisions, await archive.guild_feedback(GUILD, WEEK_AGO))


async def test_each_figure_counts_questions_from_decisions_and_feedback(archive: Archive) -> None:
    archive.add(msg(1, "hello", author_id=ALICE))  # the archive knows the channels' server from their messages
    archive.add(msg(2, "hello", author_id=BOB, channel=OTHER_CHANNEL))
    for message, author, reason, minutes_ago in (
        (10, ALICE, SUPPORT_ANSWERED, 60),  # answered, then solved
        (11, BOB, SUPPORT_ANSWERED, 59),  # answered, not helpful
        (12, CAROL, SUPPORT_ANSWERED, 58),  # answered, no press
        (13, ALICE, SUPPORT_NOT_SURE, 57),  # unanswered
        (14, BOB, SUPPORT_NOT_SURE, 56),  # not sure, then handed off: one question, unanswered
        (14, BOB, SUPPORT_HANDED_OFF, 30),
        (15, CAROL, SUPPORT_HUMAN_FIRST, 55),  # a member answered first
        (16, ALICE, SUPPORT_NOT_A_QUESTION, 54),  # chat: no question
        (17, 0, SUPPORT_NOT_SURE, 53),  # an opted-out member's placeholder: counted, not listed
        (18, ALICE, SUPPORT_NOT_SURE, 60 * 24 * 8),  # before the week
    ):
        await decide(
            archive,
            message,
            author,
            reason,
            minutes_ago=minutes_ago,
            channel=OTHER_CHANNEL if message == 14 else CHANNEL,
        )
    await archive.flush()
    await feedback(archive, 10, ALICE, "solved")
    await feedback(archive, 11, BOB, "not_helpful")
    await feedback(archive, 12, CAROL, "")

    assert await figures(archive) == SupportFigures(
        asked=7,
        answered=3,
        solved=1,
        not_helpful=1,
        handed_off=1,
        unanswered=[
            UnansweredQuestion(CHANNEL, 13, "question 13", NOW - timedelta(minutes=57)),
            UnansweredQuestion(OTHER_CHANNEL, 14, "question 14", NOW - timedelta(minutes=30)),
        ],
        unlisted=1,
    )


async def test_a_question_solved_or_answered_later_is_no_longer_unanswered(archive: Archive) -> None:
    archive.add(msg(1, "hello", author_id=ALICE))
    await decide(archive, 10, ALICE, SUPPORT_NOT_SURE, minutes_ago=60)
    await decide(archive, 11, BOB, SUPPORT_NOT_SURE, minutes_ago=50)
    await decide(archive, 11, BOB, SUPPORT_ANSWERED, minutes_ago=40)
    await archive.flush()
    await feedback(archive, 10, ALICE, "solved")

    found = await figures(archive)
    assert (found.asked, found.answered, found.solved, found.unanswered, found.unlisted) == (2, 1, 1, [], 0)


async def test_a_member_who_opts_out_or_erases_is_not_listed(archive: Archive) -> None:
    archive.add(msg(1, "hello", author_id=ALICE))
    await decide(archive, 10, ALICE, SUPPORT_NOT_SURE, minutes_ago=60)
    await decide(archive, 11, BOB, SUPPORT_NOT_SURE, minutes_ago=50)
    await decide(archive, 12, CAROL, SUPPORT_NOT_SURE, minutes_ago=40)
    await archive.flush()
    await archive.set_opted_out(GUILD, BOB, True, now=NOW)
    await archive.erase_member(GUILD, CAROL, [])

    found = await figures(archive)
    assert [question.message_id for question in found.unanswered] == [10]
    assert (found.asked, found.unlisted) == (2, 1)  # Carol's decisions are gone; Bob's counted, not shown


async def test_no_decisions_make_an_empty_report(archive: Archive) -> None:
    assert await figures(archive) == SupportFigures(0, 0, 0, 0, 0, [], 0)
