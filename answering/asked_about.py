""" "Ask Parley" on a message, answered: the question about one message goes the way `/ask`'s does (answering/asked.py:
the same admission, refusals, profile, tools and usage as a mention, in public or privately), with the message, its
files and the conversation around it quoted for the model."""

from __future__ import annotations

import discord

from answering.asked import CommandQuestions
from answering.pipeline import MessagePipeline
from edge.asked_about import AskedAboutReader
from edge.asking import Question
from edge.attachment_sources import AttachmentSources
from records import AskedAbout


class MessageQuestions:
    """The client's answers to "Ask Parley" (commands/ask_menu.py's `MessageAsker`)."""

    def __init__(self, commanded: CommandQuestions, pipeline: MessagePipeline, files: AttachmentSources) -> None:
        self.commanded = commanded
        self.reader = AskedAboutReader(pipeline.context, pipeline.admission.optouts, files, pipeline.manager)

    def asking_refusal(self, guild_id: int, target: discord.Message) -> str | None:
        return self.reader.refusal(guild_id, target)

    async def ask_about(
        self, interaction: discord.Interaction, target: discord.Message, question: str, *, private: bool
    ) -> None:
        """Answer `question` about `target`, as `/ask` answers (admitted, refused in one line, in public or
        privately); the message is read once the question is admitted and acknowledged."""
        guild_id = interaction.guild_id or 0

        async def about(asked: Question) -> AskedAbout:
            return await self.reader.read(guild_id, target, reads_history=asked.reads_history)

        record = self.commanded.record(interaction, question)
        await self.commanded.ask(interaction, record, private=private, about=about)
