"""The support answers' feedback (helpdesk/feedback.py's Solved and Not helpful) and the support decisions the report
reads (commands/support_report.py).

The SQL is written once here, in the SQLite dialect both backends take (as in pin_channels.py). A row is offered when
an answer's buttons are posted, naming the question, its asker and the post carrying them; a press sets the verdict
only where all three match, so a press on a forged button (another question's id, another asker's) changes nothing.
One row per question: a second press replaces the verdict. The asker's rows go with their erasure (members.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from archive import ArchiveWriteFailed, Feedback, SupportDecisionRow, Write
from archive.tables import BackendTables
from archive.times import from_ms, to_ms

FEEDBACK_COLUMNS = "question_id, guild_id, channel_id, asker_id, post_id, verdict, offered_at, decided_at"
# Offered again (the answer posted anew), the row follows the new post and keeps the verdict.
_OFFER = Write(
    "offer_feedback",
    (
        f"INSERT INTO support_feedback ({FEEDBACK_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (question_id) DO UPDATE SET channel_id = excluded.channel_id, post_id = excluded.post_id,"
        " offered_at = excluded.offered_at WHERE support_feedback.asker_id = excluded.asker_id",
    ),
)
_VERDICT = Write(
    "set_feedback",
    (
        "UPDATE support_feedback SET verdict = ?1, decided_at = ?2"
        " WHERE question_id = ?3 AND asker_id = ?4 AND post_id = ?5",
    ),
)
# The author of a decision's message shown in the report: someone (not a placeholder's 0) who has not opted out.
_LISTED = (
    "d.author_id != 0 AND NOT EXISTS (SELECT 1 FROM opt_outs AS o WHERE o.guild_id = ?1 AND o.member_id = d.author_id)"
)


class FeedbackRows(BackendTables):
    """`archive.FeedbackTable` for both backends, on their queue and read connection."""

    async def offer_feedback(self, offer: Feedback) -> None:
        """Keep that `offer.post_id` carries the buttons of the answer to `offer.question_id`, for its asker;
        returns once committed (a press may come at once).

        Raises:
            ArchiveWriteFailed: the writer could not commit it.
        """
        self._enqueue(_OFFER, _row(offer))
        await self.flush()
        kept = await self.feedback(offer.question_id)
        if kept is None or (kept.post_id, kept.asker_id) != (offer.post_id, offer.asker_id):
            raise ArchiveWriteFailed(f"the feedback buttons of question {offer.question_id} could not be kept")

    async def set_feedback(
        self, question_id: int, asker_id: int, post_id: int, verdict: str, *, now: datetime | None = None
    ) -> Feedback | None:
        """Set the verdict of `asker_id` on the answer to `question_id` whose buttons `post_id` carries; the row as
        it stands once committed (the latest press's verdict, if two raced), or None when no such offer is kept.

        Raises:
            ArchiveWriteFailed: the writer could not commit it.
        """
        self._enqueue(_VERDICT, (verdict, to_ms(now or datetime.now(UTC)), question_id, asker_id, post_id))
        await self.flush()
        kept = await self.feedback(question_id)
        if kept is None or (kept.asker_id, kept.post_id) != (asker_id, post_id):
            return None
        if not kept.verdict:
            raise ArchiveWriteFailed(f"the feedback on question {question_id} could not be kept")
        return kept

    async def feedback(self, question_id: int) -> Feedback | None:
        rows = await self.read(f"SELECT {FEEDBACK_COLUMNS} FROM support_feedback WHERE question_id = ?", (question_id,))
        return next((feedback_of(row) for row in rows), None)

    async def guild_feedback(self, guild_id: int, since: datetime) -> list[Feedback]:
        """The server's feedback offered since `since`, oldest first."""
        rows = await self.read(
            f"SELECT {FEEDBACK_COLUMNS} FROM support_feedback WHERE guild_id = ? AND offered_at >= ?"
            " ORDER BY offered_at, question_id",
            (guild_id, to_ms(since)),
        )
        return [feedback_of(row) for row in rows]

    async def support_decisions(
        self, guild_id: int, since: datetime, reasons: Sequence[str]
    ) -> list[SupportDecisionRow]:
        """The server's decisions with one of `reasons` made since `since`, oldest first (its channels are those the
        archive holds messages of, as for every read by server)."""
        if not reasons:
            return []
        marks = ", ".join(f"?{number}" for number in range(3, 3 + len(reasons)))
        rows = await self.read(
            f"SELECT d.channel_id, d.message_id, d.reason, d.excerpt, d.decided_at, CASE WHEN {_LISTED} THEN 1 ELSE 0"
            " END FROM decisions AS d WHERE d.channel_id IN (SELECT channel_id FROM channels WHERE guild_id = ?1)"
            f" AND d.decided_at >= ?2 AND d.reason IN ({marks}) ORDER BY d.decided_at, d.id",
            (guild_id, to_ms(since), *reasons),
        )
        return [
            SupportDecisionRow(int(channel), int(message), str(reason), str(excerpt), from_ms(at), bool(listed))
            for channel, message, reason, excerpt, at, listed in rows
        ]


def _row(offer: Feedback) -> tuple[Any, ...]:
    decided = None if offer.decided_at is None else to_ms(offer.decided_at)
    return (*offer[:6], to_ms(offer.offered_at), decided)


def feedback_of(row: Sequence[Any]) -> Feedback:
    """A `support_feedback` row read as `FEEDBACK_COLUMNS`."""
    question, guild, channel, asker, post, verdict, offered, decided = row
    return Feedback(
        int(question), int(guild), int(channel), int(asker), int(post), str(verdict), from_ms(offered),
        None if decided is None else from_ms(decided),
    )  # fmt: skip
