"""What the support desk tells the rest of Parley about a question it took: the answer's marker and the reasons its
decisions carry in `/parley why` and the support report."""

from __future__ import annotations

from dataclasses import dataclass

# The reasons of the desk's decisions, as `/parley why` shows them and the report counts them.
SUPPORT_ANSWERED = "support_answered"  # the documents answer it, above the confidence threshold
SUPPORT_NOT_SURE = "support_not_sure"  # a question, but the documents do not answer it with confidence
SUPPORT_HUMAN_FIRST = "support_human_answered"  # a member answered it within the wait
SUPPORT_NOT_A_QUESTION = "support_not_a_question"  # chat that asks nothing
SUPPORT_HANDED_OFF = "support_handed_off"  # a forum post nobody answered, handed to the staff role
SUPPORT_REASONS: tuple[str, ...] = (
    SUPPORT_ANSWERED,
    SUPPORT_NOT_SURE,
    SUPPORT_HUMAN_FIRST,
    SUPPORT_NOT_A_QUESTION,
    SUPPORT_HANDED_OFF,
)


@dataclass(frozen=True, slots=True)
class SupportAnswer:
    """An answer the desk gives to a question nobody addressed: which question, whose, and from which section.

    The answer tail reads it to put the asker's feedback buttons under the answer; the report counts by it.
    """

    question_id: int
    asker_id: int
    guild_id: int
    # Where the question was asked: a support channel, or a forum post's thread.
    channel_id: int
    document: str
    section: str
    score: float
