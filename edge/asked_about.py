"""A message a member asks Parley about ("Ask Parley" on a message), read from Discord: its text and files, and the
conversation around it as far as the member may read the channel's history."""

from __future__ import annotations

import discord

from admission.optout import OptOuts
from conversation import ConversationManager
from discord_io import to_record
from edge.attachment_sources import AttachmentSources
from edge.context_loading import ContextLoader
from records import AskedAbout

# The messages shown around the one asked about: enough for the exchange it belongs to, few enough that the question
# and the message stay what the prompt is about.
MESSAGES_BEFORE = 10
MESSAGES_AFTER = 5

NOTHING_TO_READ = "That message has no text or files Parley can read."
AUTHOR_OPTED_OUT = "That message's author opted out of Parley in this server, so it does not read their messages."
AUTHOR_ERASED = "That message's author erased what Parley held of them in this server, this message with it."


class AskedAboutReader:
    """Reads a message asked about, with what the asker may be shown around it."""

    def __init__(
        self, context: ContextLoader, optouts: OptOuts, files: AttachmentSources, manager: ConversationManager
    ) -> None:
        self.context = context
        self.optouts = optouts
        self.files = files
        self.manager = manager

    def refusal(self, guild_id: int, target: discord.Message) -> str | None:
        """Why Parley will not answer about `target`, in one line; None when it will."""
        if self.optouts.opted_out(guild_id, target.author.id):
            return AUTHOR_OPTED_OUT
        if self.optouts.erased(guild_id, target.author.id, target.id):
            return AUTHOR_ERASED
        if not target.content.strip() and not target.attachments:
            return NOTHING_TO_READ
        return None

    async def read(self, guild_id: int, target: discord.Message, *, reads_history: bool) -> AskedAbout:
        """`target` as the model is shown it: its text and files, and, when `reads_history` (the asker may read the
        channel's history) and the channel's live conversation does not hold it already, the messages around it,
        opted-out members' veiled."""
        # Its files are read through the links this copy of the message carries (the interaction's), signed anew.
        self.files.note(target.attachments)
        record = self.optouts.veiled(guild_id, to_record(target))
        live = self.manager.get(target.channel.id)
        if not reads_history or (live is not None and any(m.message_id == target.id for m in live.messages)):
            return AskedAbout(record)
        around = self.optouts.veil_all(
            guild_id, await self.context.load_around(target, MESSAGES_BEFORE, MESSAGES_AFTER)
        )
        return AskedAbout(
            record,
            before=tuple(m for m in around if m.message_id < target.id),
            after=tuple(m for m in around if m.message_id > target.id),
        )
