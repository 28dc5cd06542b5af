"""Members' attachments as discord.py holds them: read through their signed links, and their text archived."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence

import discord

from archive.holder import ArchiveHolder
from config import Settings
from discord_io import to_record
from files.prepared import PreparedFiles
from files.preparer import AttachmentPreparer
from files.providers import build_transcriber
from records import AttachmentInfo, Kind, MessageRecord

# Recent messages' discord.py attachments kept for reading (a few hundred bytes each).
ATTACHMENT_SOURCES_KEPT = 2048


class AttachmentSources:
    """Where an attachment's bytes come from, and where the text read from it goes (the archive)."""

    def __init__(
        self,
        get_channel: Callable[[int], object | None],
        fetch_channel: Callable[[int], Awaitable[object]],
        stores: ArchiveHolder,
        settings: Settings,
    ) -> None:
        # A channel by id, from discord.py's cache or else asked of Discord: where an older message is fetched again.
        self.get_channel = get_channel
        self.fetch_channel = fetch_channel
        self.stores = stores
        self.attachments = AttachmentPreparer(
            self.read,
            vision=settings.vision,
            max_images=settings.max_images,
            max_chars=settings.max_attachment_chars,
            transcriber=build_transcriber(settings),
        )
        # The discord.py attachments of recent messages, read through their signed links; older ones are read
        # by fetching their message again, which signs the links anew.
        self._sources: OrderedDict[int, discord.Attachment] = OrderedDict()

    def note(self, attachments: Sequence[discord.Attachment]) -> None:
        for attachment in attachments:
            self._sources[attachment.id] = attachment
        while len(self._sources) > ATTACHMENT_SOURCES_KEPT:
            self._sources.popitem(last=False)

    async def read(self, record: MessageRecord, info: AttachmentInfo) -> bytes:
        """An attachment's bytes through discord.py; raises on any failure (the preparer turns it into a note)."""
        source = self._sources.get(info.attachment_id)
        if source is None:
            channel = self.get_channel(record.channel_id) or await self.fetch_channel(record.channel_id)
            if not isinstance(channel, discord.abc.Messageable):
                raise LookupError(f"channel {record.channel_id} has no messages")
            fetched = await channel.fetch_message(record.message_id)
            self.note(fetched.attachments)
            source = next(a for a in fetched.attachments if a.id == info.attachment_id)
        return await source.read()

    async def file_texts(self, message: discord.Message) -> list[tuple[str, str]]:
        """(name, text) of a message's text files and PDFs (a pinned message's, for the knowledge base), each read
        within the attachments' limits and cut at MAX_ATTACHMENT_CHARS; a file that cannot be read is left out."""
        self.note(message.attachments)
        prepared = await self.attachments.archivable_text(to_record(message))
        return [(p.info.filename, p.text[: self.attachments.max_chars]) for p in prepared if p.text]

    async def archive_text(self, record: MessageRecord) -> None:
        """Read the text of a message's text files and PDFs into the archive, so search finds what they say."""
        for prepared in await self.attachments.archivable_text(record):
            if prepared.text:
                self.stores.archive.set_attachment_text(prepared.info.attachment_id, prepared.text)

    def archive_extracted(self, files: PreparedFiles) -> None:
        # Transcripts exist only once a voice note was answered; text files were read on arrival already.
        for prepared in files.extracted:
            if prepared.kind is Kind.AUDIO and prepared.text:
                self.stores.archive.set_attachment_text(prepared.info.attachment_id, prepared.text)
