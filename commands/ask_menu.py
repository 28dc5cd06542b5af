""" "Ask Parley" on a message: a message command that opens a short modal for a question about that message (its
text, its files, the conversation around it), answered only to the asker or in the channel, their choice.

The modal's second field is a string select in a Label (https://discord.com/developers/docs/components/reference#label)
rather than two buttons or a typed "yes/no": one submission carries both the question and who sees the answer, with
"Only me" chosen beforehand, so nothing is posted in the channel unless the member picks it.
"""

from __future__ import annotations

import logging
from typing import Protocol, cast

import discord
from discord import app_commands

from answering.asked import ASK_FAILED, CommandQuestions
from answering.asked_about import MessageQuestions
from answering.pipeline import MessagePipeline
from commands.tree import send_ephemeral
from edge.attachment_sources import AttachmentSources

log = logging.getLogger("parley")

ASK_PARLEY = "Ask Parley"
QUESTION_ID = "question"
VISIBILITY_ID = "visibility"
ONLY_ME = "private"
IN_THE_CHANNEL = "channel"
# A question, not a paste: what it is about is the message itself. Discord allows 4,000.
QUESTION_MAX_CHARS = 1000
# How long an unanswered modal is kept (discord.py keeps it in memory until it is submitted or times out): a member
# who closes it without submitting leaves nothing behind past this.
MODAL_SECONDS = 15 * 60
EMPTY_QUESTION = "Your question was empty: use Ask Parley again and type what you would like to know."


class MessageAsker(Protocol):
    """What "Ask Parley" needs of the client: why a message cannot be asked about, and the answer to a question."""

    def asking_refusal(self, guild_id: int, target: discord.Message) -> str | None: ...

    async def ask_about(
        self, interaction: discord.Interaction, target: discord.Message, question: str, *, private: bool
    ) -> None: ...


def ask_menu_command() -> app_commands.ContextMenu:
    """The "Ask Parley" message command (servers only, as the other commands)."""
    command = app_commands.ContextMenu(name=ASK_PARLEY, callback=_open_question)
    command.guild_only = True
    return command


class AskMenuClient(Protocol):
    """The client, as "Ask Parley" sees it (bot.py's Parley): the way a question goes, and where files are read."""

    @property
    def commanded(self) -> CommandQuestions: ...
    @property
    def pipeline(self) -> MessagePipeline: ...
    @property
    def files(self) -> AttachmentSources: ...


def _asker(interaction: discord.Interaction) -> MessageAsker:
    client = cast(AskMenuClient, interaction.client)
    return MessageQuestions(client.commanded, client.pipeline, client.files)


async def _open_question(interaction: discord.Interaction, message: discord.Message) -> None:
    """Ask the member their question about `message` in a modal; say in one line why not, if it cannot be asked."""
    if interaction.guild_id is None:
        raise app_commands.NoPrivateMessage()
    refusal = _asker(interaction).asking_refusal(interaction.guild_id, message)
    if refusal is not None:
        await send_ephemeral(interaction, refusal)
        return
    await interaction.response.send_modal(QuestionModal(message))


class QuestionModal(discord.ui.Modal):
    """The question about one message, and who sees its answer."""

    def __init__(self, target: discord.Message) -> None:
        super().__init__(title=ASK_PARLEY, timeout=MODAL_SECONDS)
        self.target = target
        self.question: discord.ui.TextInput[QuestionModal] = discord.ui.TextInput(
            custom_id=QUESTION_ID,
            style=discord.TextStyle.paragraph,
            placeholder="What would you like to know about this message?",
            max_length=QUESTION_MAX_CHARS,
        )
        self.visibility: discord.ui.Select[QuestionModal] = discord.ui.Select(
            custom_id=VISIBILITY_ID,
            options=[
                discord.SelectOption(label="Only me", value=ONLY_ME, default=True),
                discord.SelectOption(
                    label="Everyone in the channel",
                    value=IN_THE_CHANNEL,
                    description="Posted here; Parley joins the conversation",
                ),
            ],
        )
        self.add_item(discord.ui.Label(text="Your question", component=self.question))
        self.add_item(discord.ui.Label(text="Who sees the answer", component=self.visibility))

    @property
    def private(self) -> bool:
        """Whether the answer is for the asker alone: anything but an explicit "Everyone in the channel" is."""
        return self.visibility.values != [IN_THE_CHANNEL]

    async def on_submit(self, interaction: discord.Interaction) -> None:
        question = self.question.value.strip()
        if not question:  # Discord's `required` takes blanks for an answer
            await send_ephemeral(interaction, EMPTY_QUESTION)
            return
        await _asker(interaction).ask_about(interaction, self.target, question, private=self.private)

    # discord.py's Modal.on_error takes no item (a modal's failure is its own), unlike the View's it is typed after.
    async def on_error(self, interaction: discord.Interaction, error: Exception, /) -> None:  # type: ignore[override]
        log.error("Ask Parley on message %s failed", self.target.id, exc_info=error)
        try:
            await send_ephemeral(interaction, ASK_FAILED)
        except discord.HTTPException as failure:
            log.warning("could not explain a failed Ask Parley: %s", failure)
