"""Pinned messages in the knowledge base: per channel, admins opt in (`/parley-admin knowledge pins on`), and the
channel's pins become knowledge documents, kept in step with pins, unpins, edits and deletions.

Discord's CHANNEL_PINS_UPDATE says only that a channel's pins changed, not which message, and it is not sent when a
pinned message is deleted (https://discord.com/developers/docs/events/gateway-events#channel-pins-update). So each
change refetches the channel's pins and compares them with the channel's pin documents: new pins are added, those
no longer pinned are removed, and those whose message changed since (a document is dated by its message's latest
version) are replaced. Deletions and edits come through `upkeep.forgetting.Forgetting` as the archive's do. Every
opted-in channel is compared again at each new session, since pins may have changed while Parley was away.

A pin is a document of its channel (`channel_id`), found only by askers who may read that channel, and its source is
`pin:<channel_id>:<message_id>`. A pin by a member who opted out (`admission/optout.py`) is never taken in, and
leaves at the next comparison of its channel.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol
from zoneinfo import ZoneInfo

import discord

from admission.optout import HasOptOuts
from archive import PinChannelTables
from archive.knowledge_types import KnowledgeDocument, KnowledgeDocumentInfo, KnowledgeSection
from archive.null import archive_off
from archive.queued import to_ms
from archive.text import safe_text
from config import Settings
from knowledge.base import KnowledgeBase
from knowledge.sections import split_document
from upkeep.background import BackgroundTasks
from upkeep.forgetting import Forgetting

log = logging.getLogger("parley.pins")

# Pins read per channel and comparison: a bound on one sync's work, at Discord's own cap on a channel's pins (250).
MAX_PINS = 250
# The first line of a pin, as its title, cut at this many characters.
TITLE_CHARS = 80
_SOURCE_PREFIX = "pin:"


def pin_source(channel_id: int, message_id: int) -> str:
    return f"{_SOURCE_PREFIX}{channel_id}:{message_id}"


def pinned_message_id(source: str, channel_id: int) -> int | None:
    """The message of a pin document of `channel_id`; None for any other source."""
    prefix = f"{_SOURCE_PREFIX}{channel_id}:"
    rest = source.removeprefix(prefix)
    return int(rest) if rest != source and rest.isdigit() else None


@dataclass(frozen=True)
class PinPlan:
    """What a comparison of a channel's pins with its documents does: messages to take in (new, or changed since
    they were taken) and messages whose documents go."""

    take: list[int]
    drop: list[int]


def plan(pinned: Mapping[int, datetime], taken: Mapping[int, datetime]) -> PinPlan:
    """Compare the pins to take (message id -> its latest version's time) with those taken (message id -> the
    version its document holds); times are compared to the millisecond, as the archive keeps them."""
    take = [
        message_id
        for message_id, version in pinned.items()
        if message_id not in taken or to_ms(taken[message_id]) != to_ms(version)
    ]
    drop = [message_id for message_id in taken if message_id not in pinned]
    return PinPlan(sorted(take), sorted(drop))


def version_of(message: discord.Message) -> datetime:
    """When the message was last written: a pin's document carries it, so an edit shows at the next comparison."""
    return message.edited_at or message.created_at


def title_of(author: str, written_at: datetime, text: str, zone: ZoneInfo) -> str:
    """Whose and when, then what it is about ("alice, 2026-11-25: Deploy checklist"), as a list of documents shows
    it; the date is in TIMEZONE."""
    first = next((line.strip().lstrip("#").strip() for line in text.splitlines() if line.strip()), "")
    if len(first) > TITLE_CHARS:
        first = first[: TITLE_CHARS - 1].rstrip() + "…"
    when = written_at.astimezone(zone).date().isoformat()
    return f"{author}, {when}: {first}" if first else f"{author}, {when}"


def pin_sections(title: str, text: str, files: Iterable[tuple[str, str]]) -> list[KnowledgeSection]:
    """The message's text, then each text file's, split as documents are; a file's sections are headed by its name."""
    sections = split_document(title, text, "markdown") if text.strip() else []
    for filename, content in files:
        kind = "markdown" if filename.lower().endswith((".md", ".markdown")) else "text"
        for section in split_document(filename, content, kind):
            heading = f"{filename} > {section.heading}" if section.heading else filename
            sections.append(KnowledgeSection(heading=heading, text=section.text))
    return sections


class FileTexts(Protocol):
    """The text of a message's text files and PDFs, read within the attachments' limits (edge.attachment_sources)."""

    async def file_texts(self, message: discord.Message) -> list[tuple[str, str]]: ...


class PinStores(Protocol):
    """The stores the pins keep to: the archive (the opt-ins) and the knowledge base (bot.py's OpenStores)."""

    @property
    def archive(self) -> PinChannelTables: ...

    @property
    def knowledge(self) -> KnowledgeBase | None: ...


class PinEvents:
    """The Discord events the pins follow, as handlers the client inherits (bot.py's Parley), which hand them on."""

    pins: PinnedKnowledge

    async def on_guild_channel_pins_update(
        self, channel: discord.abc.GuildChannel | discord.Thread, last_pin: datetime | None
    ) -> None:
        self.pins.pins_changed(channel)

    async def on_shard_ready(self, shard_id: int) -> None:
        self.pins.shard_ready(shard_id)


class PinnedKnowledge:
    """Keeps the pins of opted-in channels in the knowledge base; every handler returns at once, the work runs in
    the background, one comparison per channel at a time (a burst of changes is one more comparison)."""

    def __init__(
        self,
        stores: PinStores,
        get_channel: Callable[[int], object | None],
        guilds: Callable[[], Sequence[discord.Guild]],
        settings: Settings,
        background: BackgroundTasks,
        admission: HasOptOuts,
        files: FileTexts,
        forgetting: Forgetting,
    ) -> None:
        self.stores = stores
        # discord.py's channels and servers of this process: a pinned message's channel, a shard's servers.
        self.get_channel = get_channel
        self.guilds = guilds
        self.zone = settings.zone
        self.background = background
        self.admission = admission
        self.files = files
        # The pins this process took in, message id -> (server, channel): an edit or a deletion of one of them is
        # followed without asking the archive about every edited or deleted message.
        self.taken: dict[int, tuple[int, int]] = {}
        self._syncing: set[int] = set()
        self._again: set[int] = set()
        forgetting.followers.append(self)

    # -- Discord's events --

    def pins_changed(self, channel: discord.abc.GuildChannel | discord.Thread) -> None:
        """CHANNEL_PINS_UPDATE: compare the channel's pins again, if it is opted in."""
        self.sync(channel.id)

    def shard_ready(self, shard_id: int) -> None:
        """A shard's new session: compare every opted-in channel of its servers (pins may have changed while it was
        away), and drop the pins of its servers' channels no longer opted in."""
        self.background.start(self._sync_shard_logged(shard_id), f"pins-sync-shard-{shard_id}")

    def message_edited(self, channel_id: int, message_id: int) -> None:
        if message_id in self.taken:
            self.sync(channel_id)

    def messages_gone(self, channel_id: int, message_ids: Collection[int]) -> None:
        gone = [(message_id, self.taken.pop(message_id)) for message_id in message_ids if message_id in self.taken]
        if gone:
            sources = [(guild_id, pin_source(channel, message_id)) for message_id, (guild_id, channel) in gone]
            self.background.start(self._remove(sources), f"pins-deleted-{channel_id}")

    def channel_gone(self, channel_id: int, guild_id: int) -> None:
        self.background.start(self._channel_gone(channel_id, guild_id), f"pins-channel-gone-{channel_id}")

    async def _channel_gone(self, channel_id: int, guild_id: int) -> None:
        try:
            await self._drop_channel(channel_id, guild_id)
        except Exception as error:  # noqa: BLE001 - its shard's next session drops them (`shard_ready`)
            log.warning("pins of deleted channel %s not removed yet: %r", channel_id, error)

    def member_opted_out(self, guild_id: int, member_id: int) -> None:
        """`/parley privacy optout`: the member's pins in the server leave the knowledge base now, not at their
        channels' next comparisons (which would leave them out too)."""
        self.background.start(self._forget_opted_out(guild_id, member_id), f"pins-opted-out-{member_id}")

    async def _forget_opted_out(self, guild_id: int, member_id: int) -> None:
        await self.forget_member(guild_id, member_id)

    async def forget_member(self, guild_id: int, member_id: int) -> int:
        """Remove the member's pins in the server from the knowledge base (an opt-out, an erasure); how many were
        found. Those not removed now leave at their channels' next comparisons, which no longer take them."""
        knowledge = self.stores.knowledge
        if knowledge is None:
            return 0
        try:
            documents = await knowledge.documents(guild_id)
        except Exception as error:  # noqa: BLE001 - their pins leave at their channels' next comparisons
            log.warning("pins of member %s in server %s not removed yet: %r", member_id, guild_id, error)
            return 0
        theirs = {d.source for d in documents if d.source.startswith(_SOURCE_PREFIX) and d.added_by == member_id}
        await self._remove([(guild_id, source) for source in theirs])
        self.taken = {m: (g, c) for m, (g, c) in self.taken.items() if pin_source(c, m) not in theirs}
        return len(theirs)

    # -- The command's --

    async def turn_on(self, channel_id: int, guild_id: int, set_by: int) -> None:
        """Take the channel's pins in from now on; they are read in the background.

        Raises:
            ArchiveWriteFailed: the choice could not be stored; nothing changed.
            LookupError: there is no archive (pins are kept in it).
        """
        await self._archive().set_pins_taken(channel_id, guild_id, True, set_by=set_by)
        self.sync(channel_id)

    async def turn_off(self, channel_id: int, guild_id: int, set_by: int) -> int:
        """Stop taking the channel's pins in, and remove those taken; how many were removed.

        Raises:
            ArchiveWriteFailed: the choice could not be stored; nothing changed.
            LookupError: there is no archive.
        """
        await self._archive().set_pins_taken(channel_id, guild_id, False, set_by=set_by)
        removed = await self._drop_channel(channel_id, guild_id)
        self.sync(channel_id)  # after a comparison under way, which may add pins until it ends
        return removed

    async def status(self, channel_id: int, guild_id: int) -> tuple[bool, int]:
        """Whether the channel's pins are taken in, and how many of its pins the knowledge base holds."""
        taken = await self._archive().pins_taken(channel_id)
        knowledge = self.stores.knowledge
        held = 0 if knowledge is None else len(_pins_of(await knowledge.documents(guild_id), channel_id))
        return taken, held

    def _archive(self) -> PinChannelTables:
        if archive_off(self.stores.archive):
            raise LookupError("pinned messages are kept in the archive, and DATABASE_URL is not set")
        return self.stores.archive

    # -- Comparing --

    def sync(self, channel_id: int) -> None:
        """Compare the channel's pins with its documents, in the background; once more after the one under way."""
        if channel_id in self._syncing:
            self._again.add(channel_id)
            return
        self._syncing.add(channel_id)
        self.background.start(self._sync_until_settled(channel_id), f"pins-sync-{channel_id}")

    async def _sync_until_settled(self, channel_id: int) -> None:
        try:
            while True:
                self._again.discard(channel_id)
                await self._sync_logged(channel_id)
                if channel_id not in self._again:
                    return
        finally:
            self._syncing.discard(channel_id)

    async def _sync_logged(self, channel_id: int) -> None:
        try:
            await self._sync(channel_id)
        except discord.HTTPException as error:
            # Missing permission to read pins, a Discord 5xx: the documents stay as they were until the next change.
            reason = f"{error.status} {error.text}".strip()
            log.warning("pins of channel %s not read (%s); its knowledge stays as it was", channel_id, reason)
        except Exception as error:  # noqa: BLE001 - the knowledge base failing must not end the background task silently
            log.warning("pins of channel %s not brought up to date: %r", channel_id, error)

    async def _sync(self, channel_id: int) -> None:
        archive, knowledge = self.stores.archive, self.stores.knowledge
        channel = self.get_channel(channel_id)
        if knowledge is None or not isinstance(channel, discord.TextChannel | discord.Thread):
            return
        guild_id = channel.guild.id
        if not await archive.pins_taken(channel_id):
            # Not opted in, or turned off while a comparison was adding: none of the channel's pins stays.
            await self._drop_channel(channel_id, guild_id)
            return
        pinned = {m.id: m async for m in channel.pins(limit=MAX_PINS) if self._may_take(guild_id, m)}
        documents = _pins_of(await knowledge.documents(guild_id), channel_id)
        steps = plan({m.id: version_of(m) for m in pinned.values()}, {m: d.added_at for m, d in documents.items()})
        await self._remove([(guild_id, pin_source(channel_id, message_id)) for message_id in steps.drop])
        for message_id in steps.drop:
            self.taken.pop(message_id, None)
        failed = 0
        for message_id in steps.take:
            try:
                document = await self._document(guild_id, pinned[message_id])
                if not document.sections:  # an image, audio or video alone: nothing that could be searched
                    continue
                await knowledge.add(document)
            except Exception as error:  # noqa: BLE001 - one pin failing leaves the others to be taken in
                failed += 1
                log.warning("pin %s of channel %s not taken in: %r", message_id, channel_id, error)
        self.taken.update(dict.fromkeys(pinned, (guild_id, channel_id)))
        if steps.take or steps.drop:
            log.info(
                "pins of channel %s: %d taken in, %d removed", channel_id, len(steps.take) - failed, len(steps.drop)
            )

    def _may_take(self, guild_id: int, message: discord.Message) -> bool:
        return not self.admission.optouts.withheld(guild_id, message.author.id, message.id) and bool(
            message.content or message.attachments
        )

    async def _document(self, guild_id: int, message: discord.Message) -> KnowledgeDocument:
        text = safe_text(message.clean_content)
        title = title_of(safe_text(message.author.display_name), message.created_at, text, self.zone)
        sections = pin_sections(title, text, await self.files.file_texts(message))
        return KnowledgeDocument(
            guild_id=guild_id,
            source=pin_source(message.channel.id, message.id),
            title=title,
            sections=sections,
            added_by=message.author.id,
            added_at=version_of(message),
            channel_id=message.channel.id,
        )

    async def _sync_shard_logged(self, shard_id: int) -> None:
        try:
            await self._sync_shard(shard_id)
        except Exception as error:  # noqa: BLE001 - each channel is compared again at its next change
            log.warning("pins of shard %s not compared at the start of its session: %r", shard_id, error)

    async def _sync_shard(self, shard_id: int) -> None:
        archive, knowledge = self.stores.archive, self.stores.knowledge
        if knowledge is None:  # none without an archive
            return
        guilds = [guild.id for guild in self.guilds() if guild.shard_id == shard_id]
        opted = await archive.pin_channels()
        for channel_id, guild_id in opted.items():
            if guild_id in guilds and self.get_channel(channel_id) is not None:
                self.sync(channel_id)
        # Pins of channels no longer opted in (turned off by another process, say) leave too.
        for guild_id in guilds:
            for channel_id in _pin_channels(await knowledge.documents(guild_id)) - opted.keys():
                # Asked again right before: `pins on` since the list was read must not lose the pins it reads in.
                if not await archive.pins_taken(channel_id):
                    await self._drop_channel(channel_id, guild_id)

    async def _drop_channel(self, channel_id: int, guild_id: int) -> int:
        knowledge = self.stores.knowledge
        if knowledge is None:
            return 0
        documents = _pins_of(await knowledge.documents(guild_id), channel_id)
        await self._remove([(guild_id, pin_source(channel_id, message_id)) for message_id in documents])
        for message_id in documents:
            self.taken.pop(message_id, None)
        return len(documents)

    async def _remove(self, sources: Sequence[tuple[int, str]]) -> None:
        knowledge = self.stores.knowledge
        if knowledge is None:
            return
        for guild_id, source in sources:
            try:
                await knowledge.remove_source(guild_id, source)
            except Exception as error:  # noqa: BLE001 - one document failing leaves the others to go
                log.warning("pin %s not removed from the knowledge base: %r", source, error)


def _pin_channels(documents: Iterable[KnowledgeDocumentInfo]) -> set[int]:
    """The channels of which the documents hold pins."""
    return {d.channel_id for d in documents if d.source.startswith(_SOURCE_PREFIX) and d.channel_id is not None}


def _pins_of(documents: Iterable[KnowledgeDocumentInfo], channel_id: int) -> dict[int, KnowledgeDocumentInfo]:
    """The channel's pin documents, by message id."""
    found = {}
    for document in documents:
        message_id = pinned_message_id(document.source, channel_id)
        if message_id is not None:
            found[message_id] = document
    return found
