"""`/ask question [private]`: ask Parley anything, in the channel or privately, as an @mention would."""

from __future__ import annotations

from typing import Any, Protocol, cast

import discord
from discord import app_commands

from answering.asked import CommandQuestions

# Discord's limit for a string option is 6,000 characters; a question past a post's length is no chat question.
QUESTION_MAX_CHARS = 2000


class Asking(Protocol):
    """The client, as `/ask` sees it (bot.py's Parley)."""

    @property
    def commanded(self) -> CommandQuestions: ...


def ask_command() -> app_commands.Command[Any, ..., None]:
    """A new top-level `/ask` command (one per client: a command belongs to one tree)."""

    @app_commands.command(name="ask", description="Ask Parley a question: in the channel, or privately.")
    @app_commands.describe(
        question="What you want to ask",
        private="Only you see the answer, and it stays out of the channel's conversation (default: no)",
    )
    async def ask(
        interaction: discord.Interaction,
        question: app_commands.Range[str, 1, QUESTION_MAX_CHARS],
        private: bool = False,
    ) -> None:
        commanded = cast(Asking, interaction.client).commanded
        await commanded.ask(interaction, commanded.record(interaction, question), private=private)

    return ask
