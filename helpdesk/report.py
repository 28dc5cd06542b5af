"""The support report's figures for a server and period, from the desk's decisions and its answers' feedback.

A question is a message the desk decided on with any reason but "not a question"; one message may have several
decisions (not sure, then handed off), so each figure counts questions, not decisions. Solved and not helpful are
the askers' verdicts on the answers to the period's questions. Unanswered: not sure or handed off, never answered from
the documents, and not marked solved since; only those whose askers may be named are listed (not an opted-out
member's: their words are not shown), the others counted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from archive import Feedback, SupportDecisionRow
from helpdesk.question import SUPPORT_ANSWERED, SUPPORT_HANDED_OFF, SUPPORT_NOT_A_QUESTION, SUPPORT_NOT_SURE

SOLVED_VERDICT = "solved"
NOT_HELPFUL_VERDICT = "not_helpful"


@dataclass(frozen=True, slots=True)
class UnansweredQuestion:
    """A question the documents did not answer: where, which message, its excerpt, when it was last decided on."""

    channel_id: int
    message_id: int
    excerpt: str
    decided_at: datetime


@dataclass(frozen=True, slots=True)
class SupportFigures:
    """What the desk did with a period's questions; `unanswered` lists those that may be shown, oldest first."""

    asked: int
    answered: int
    solved: int
    not_helpful: int
    handed_off: int
    unanswered: list[UnansweredQuestion]
    # Unanswered, but by a member who opted out (or a placeholder of one): counted, not listed.
    unlisted: int


def support_figures(decisions: Sequence[SupportDecisionRow], feedback: Sequence[Feedback]) -> SupportFigures:
    """The figures of `decisions` (the server's support decisions of the period, oldest first) and `feedback` (on
    the answers to them)."""
    reasons: dict[int, set[str]] = {}
    latest: dict[int, SupportDecisionRow] = {}
    for decision in decisions:
        reasons.setdefault(decision.message_id, set()).add(decision.reason)
        latest[decision.message_id] = decision
    questions = {message for message, given in reasons.items() if given - {SUPPORT_NOT_A_QUESTION}}
    verdicts = {row.question_id: row.verdict for row in feedback if row.question_id in questions}
    solved = {question for question, verdict in verdicts.items() if verdict == SOLVED_VERDICT}
    unanswered = [
        latest[question]
        for question in questions
        if reasons[question] & {SUPPORT_NOT_SURE, SUPPORT_HANDED_OFF}
        and SUPPORT_ANSWERED not in reasons[question]
        and question not in solved
    ]
    listed = sorted((row for row in unanswered if row.listed), key=lambda row: (row.decided_at, row.message_id))
    return SupportFigures(
        asked=len(questions),
        answered=sum(SUPPORT_ANSWERED in reasons[question] for question in questions),
        solved=len(solved),
        not_helpful=sum(verdict == NOT_HELPFUL_VERDICT for verdict in verdicts.values()),
        handed_off=sum(SUPPORT_HANDED_OFF in reasons[question] for question in questions),
        unanswered=[UnansweredQuestion(row.channel_id, row.message_id, row.excerpt, row.decided_at) for row in listed],
        unlisted=len(unanswered) - len(listed),
    )
