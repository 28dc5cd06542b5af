"""The asker's feedback on a support answer: "Solved" and "Not helpful" buttons under the answer's last post.

The answer tail (answering/outcome.py) offers them under every answer whose question the support desk took
(`Question.support`), whole, streamed or /ask alike. The offer is kept in the archive first (so without one there are
no buttons), naming the question, its asker and the post; the buttons are persistent (discord.py's `DynamicItem`, as
the approval buttons are), their custom id carrying the verdict, the question and the asker, so a press after a
restart still counts. Only the asker's press counts, and only on the post the offer names: anyone else is told so
privately, and a button forged for another question or asker finds no offer; nothing is recorded either way. A second
press replaces the verdict. A forum post marked solved gets its forum's Solved tag (helpdesk/forum_tags.py).
"""

from __future__ import annotations

import logging
import re
from datetime import UTC, datetime
from typing import Any, Literal

import discord

from archive import ArchiveWriteFailed, Feedback
from archive.holder import ArchiveHolder
from archive.null import archive_off
from edge.streaming import Deliverer
from helpdesk.forum_tags import mark_solved
from helpdesk.question import SupportAnswer

log = logging.getLogger("parley.helpdesk")

Verdict = Literal["solved", "not_helpful"]
SOLVED: Verdict = "solved"
NOT_HELPFUL: Verdict = "not_helpful"
LABELS: dict[Verdict, str] = {SOLVED: "Solved", NOT_HELPFUL: "Not helpful"}
NOT_YOURS = "Only the person who asked can say whether this answer helped."
NOT_KEPT = "This answer's feedback is no longer kept; nothing changed."
THANKS: dict[Verdict, str] = {
    SOLVED: "Thanks: marked as solved.",
    NOT_HELPFUL: "Thanks: noted as not helpful, so the server's admins see what the documents lack.",
}


class SupportFeedback:
    """The feedback buttons of a client's support answers: offered under an answer, and the presses on them."""

    def __init__(self, stores: ArchiveHolder, delivery: Deliverer) -> None:
        self.stores = stores
        # The buttons reach the answer's post like its text did: retried under the delivery deadline.
        self.delivery = delivery

    async def offer(self, support: SupportAnswer, post: discord.Message) -> None:
        """Put the buttons under `post`, the last post of the answer to `support`'s question, once the offer is
        kept; without an archive, or if it cannot keep the offer, the answer stands without them (logged)."""
        archive = self.stores.archive
        if archive_off(archive):
            return
        offer = Feedback(
            support.question_id, support.guild_id, post.channel.id, support.asker_id, post.id, "", datetime.now(UTC)
        )
        try:
            await archive.offer_feedback(offer)
        except ArchiveWriteFailed as error:
            log.warning("no feedback buttons under the answer to question %s: %s", support.question_id, error)
            return
        view = feedback_view(support.question_id, support.asker_id)
        shown = await self.delivery.attempt(lambda: post.edit(view=view), f"feedback buttons to {post.channel.id}")
        if shown is None:
            log.warning("the feedback buttons of question %s could not be shown", support.question_id)

    async def pressed(
        self, interaction: discord.Interaction, verdict: Verdict, question_id: int, asker_id: int
    ) -> None:
        """A press of Solved or Not helpful: the asker's, on the post the offer names, sets the verdict (and tags a
        forum post); anyone else's, or one no offer matches, is told so privately and changes nothing."""
        post = interaction.message
        if interaction.user.id != asker_id or post is None:
            await interaction.response.send_message(NOT_YOURS, ephemeral=True)
            return
        await interaction.response.defer(ephemeral=True, thinking=True)
        try:
            kept = await self.stores.archive.set_feedback(question_id, asker_id, post.id, verdict)
        except ArchiveWriteFailed as error:
            log.warning("the feedback on question %s could not be kept: %s", question_id, error)
            kept = None
        if kept is None:
            await interaction.followup.send(NOT_KEPT, ephemeral=True)
            return
        log.info("question %s marked %s by its asker", question_id, kept.verdict)
        await interaction.followup.send(THANKS[verdict], ephemeral=True)
        await mark_solved(interaction.channel, kept.verdict == SOLVED)


def feedback_view(question_id: int, asker_id: int) -> discord.ui.View:
    view = discord.ui.View(timeout=None)
    view.add_item(FeedbackButton(SOLVED, question_id, asker_id))
    view.add_item(FeedbackButton(NOT_HELPFUL, question_id, asker_id))
    return view


class FeedbackButton(
    discord.ui.DynamicItem[discord.ui.Button[discord.ui.View]],
    template=r"parley:feedback:(?P<verdict>solved|not_helpful):(?P<question>\d+):(?P<asker>\d+)",
):
    """Solved or Not helpful under a support answer; its custom id says which, for which question and whose."""

    def __init__(self, verdict: Verdict, question_id: int, asker_id: int) -> None:
        super().__init__(
            discord.ui.Button(
                label=LABELS[verdict],
                style=discord.ButtonStyle.success if verdict == SOLVED else discord.ButtonStyle.secondary,
                custom_id=f"parley:feedback:{verdict}:{question_id}:{asker_id}",
            )
        )
        self.verdict: Verdict = verdict
        self.question_id = question_id
        self.asker_id = asker_id

    @classmethod
    async def from_custom_id(
        cls, interaction: discord.Interaction, item: discord.ui.Item[Any], match: re.Match[str]
    ) -> FeedbackButton:
        verdict = SOLVED if match["verdict"] == SOLVED else NOT_HELPFUL
        return cls(verdict, int(match["question"]), int(match["asker"]))

    async def callback(self, interaction: discord.Interaction) -> None:
        feedback = feedback_of(interaction.client)
        if feedback is None:
            await interaction.response.send_message(NOT_KEPT, ephemeral=True)
            return
        await feedback.pressed(interaction, self.verdict, self.question_id, self.asker_id)


def feedback_of(client: discord.Client) -> SupportFeedback | None:
    """The client's feedback buttons: its answering part's (answering.answer.Answering.feedback)."""
    feedback = getattr(getattr(client, "answering", None), "feedback", None)
    return feedback if isinstance(feedback, SupportFeedback) else None
