""" "Ask Parley" on a message, answered: the question about one message goes the way a mention's does (admission,
profile, tools, usage, refusals), with the message, its files and the conversation around it quoted for the model."""

from __future__ import annotations

import logging

import discord

from admission.optout import OptOuts
from conversation import ConversationManager
from edge.asked_about import AskedAboutReader
from edge.attachment_sources import AttachmentSources
from edge.context_loading import ContextLoader

log = logging.getLogger("parley")


class MessageQuestions:
    """The client's answers to "Ask Parley" (commands/ask_menu.py's `MessageAsker`)."""

    def __init__(
        self, context: ContextLoader, optouts: OptOuts, files: AttachmentSources, manager: ConversationManager
    ) -> None:
        self.reader = AskedAboutReader(context, optouts, files, manager)

    def asking_refusal(self, guild_id: int, target: discord.Message) -> str | None:
        return self.reader.refusal(guild_id, target)
