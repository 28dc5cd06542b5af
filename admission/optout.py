"""The members who opted out (`/parley privacy optout`), and what that means for each of their messages.

A member who opted out in a server is not answered there, and nothing they write is archived, summarised,
remembered or shown to the model: their messages reach a conversation only as a placeholder, so what others say
around them still reads. The choice is kept in the archive (every process reads it at start and follows other
processes' changes, ops/shared.py) and lasts until they opt back in. It is per server (the commands are used in one).

A member who erased their data in a server (`/parley privacy erase`, upkeep/privacy.py) leaves an erasure there: what
they wrote up to that moment is never kept or heard again, whichever path reads it back from Discord (catch-up and
the gap's answers after a restart, the recheck, an edit, a pin); what they write afterwards is kept as usual. Both are
`withheld` here, for what never reaches the archive (a live conversation, a pin); the archive keeps to the same rule on
every write of a message (archive.members.withheld).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import Protocol

from archive import ArchivedMessage, ChannelStats, TopAuthor
from records import OPTED_OUT_AUTHOR, OPTED_OUT_TEXT, Decision, MessageRecord
from tools import MessageArchive

# The author id a placeholder carries: no member's (Discord ids start far above it), so the model is not shown theirs.
NO_AUTHOR = 0
# What a member who opted out is told, only them, when they ask for a model call by button or command.
OPTED_OUT_REFUSAL = "You opted out of Parley in this server; `/parley privacy optin` lets it answer you again."
# The decision on an opted-out member's message that would have been weighed: silence, with its own reason.
OPTED_OUT = Decision(False, "opted_out", "privacy")


class OptOutTables(Protocol):
    """The archive, as the opt-outs need it (archive.MemberData)."""

    async def opt_outs(self, member_id: int | None = None) -> dict[tuple[int, int], datetime]: ...

    async def set_opted_out(
        self, guild_id: int, member_id: int, opted_out: bool, *, now: datetime | None = None
    ) -> None: ...

    async def erasures(self, member_id: int | None = None) -> dict[tuple[int, int], int]: ...

    async def mark_erased(
        self, guild_id: int, member_id: int, upto_id: int, *, now: datetime | None = None
    ) -> None: ...


class OptOuts:
    """Who opted out where, and who erased what they wrote up to when, in memory: read for every message, so no
    message waits on the archive."""

    def __init__(self) -> None:
        self._members: set[tuple[int, int]] = set()
        # (server, member) -> the newest message id of theirs their erasure there covers.
        self._erased: dict[tuple[int, int], int] = {}
        # Where they are kept, once the archive is open (`attach`); without one they last until the process ends.
        self.archive: OptOutTables | None = None

    def opted_out(self, guild_id: int, member_id: int) -> bool:
        return (guild_id, member_id) in self._members

    @property
    def anyone(self) -> bool:
        """Whether any member opted out anywhere: until one does, no message needs its server looked up to be kept."""
        return bool(self._members)

    def erased(self, guild_id: int, author_id: int, message_id: int) -> bool:
        """Whether the message's author erased in the server what they wrote up to it."""
        return message_id <= self._erased.get((guild_id, author_id), 0)

    def withheld(self, guild_id: int, author_id: int, message_id: int) -> bool:
        """Whether Parley may neither keep nor hear the message (or its edit): its author opted out in the server,
        or erased there what they wrote up to it."""
        return self.opted_out(guild_id, author_id) or self.erased(guild_id, author_id, message_id)

    async def mark_erased(self, guild_id: int, member_id: int, upto_id: int) -> None:
        """The member erased in the server what they wrote up to message id `upto_id`: none of it is kept or heard
        again, here and (through the archive) in every process.

        Raises:
            ArchiveWriteFailed: the archive could not keep it; this process withholds it regardless.
        """
        key = (guild_id, member_id)
        self._erased[key] = max(upto_id, self._erased.get(key, 0))
        if self.archive is not None:
            await self.archive.mark_erased(guild_id, member_id, upto_id)

    def veiled(self, guild_id: int, record: MessageRecord) -> MessageRecord:
        """`record` as Parley may keep and show it: an opted-out member's as the placeholder, without their
        name, text or files; anyone else's as it is."""
        if not self.opted_out(guild_id, record.author_id):
            return record
        return veil(record)

    def veil_all(self, guild_id: int, records: list[MessageRecord]) -> list[MessageRecord]:
        """`records` (context loaded from the archive or Discord) without the messages their authors erased, and
        with opted-out members' veiled."""
        if not self._members and not self._erased:
            return records
        return [
            self.veiled(guild_id, record)
            for record in records
            if not self.erased(guild_id, record.author_id, record.message_id)
        ]

    def veil_archived(self, guild_id: int, messages: Sequence[ArchivedMessage]) -> list[ArchivedMessage]:
        """Archived `messages` (the tools' reads, a catch-up's range) with opted-out members' as placeholders."""
        return [
            replace(m, author_id=NO_AUTHOR, author_name=OPTED_OUT_AUTHOR, content=OPTED_OUT_TEXT, attachments=())
            if self.opted_out(guild_id, m.author_id)
            else m
            for m in messages
        ]

    async def attach(self, archive: OptOutTables) -> None:
        """Keep the opt-outs in `archive`, and take up those kept there."""
        self.archive = archive
        self._members = set(await archive.opt_outs())
        self._erased = await archive.erasures()

    async def reload(self, member_id: int) -> None:
        """Take up one member's opt-outs and erasures as the archive now has them: another process sharing it changed
        them."""
        if self.archive is None:
            return  # announced before `attach`, which reads them all
        found = await self.archive.opt_outs(member_id)
        self._members = {key for key in self._members if key[1] != member_id} | set(found)
        erased = await self.archive.erasures(member_id)
        self._erased = {key: upto for key, upto in self._erased.items() if key[1] != member_id} | erased

    async def reload_all(self) -> None:
        """Take up every opt-out and erasure as the archive now has them (changes by other processes were missed)."""
        if self.archive is not None:
            self._members = set(await self.archive.opt_outs())
            self._erased = await self.archive.erasures()

    async def set(self, guild_id: int, member_id: int, opted_out: bool) -> None:
        """Opt the member out (or back in) in the server, kept in the archive when there is one.

        Raises:
            ArchiveWriteFailed: the archive could not keep it; nothing changed.
        """
        if self.archive is not None:
            await self.archive.set_opted_out(guild_id, member_id, opted_out)
        if opted_out:
            self._members.add((guild_id, member_id))
        else:
            self._members.discard((guild_id, member_id))


def veil(record: MessageRecord) -> MessageRecord:
    """The placeholder of a message: where and when it was said, whom it addressed, nothing of what or by whom
    (its author is no one: `NO_AUTHOR`)."""
    return replace(record, author_id=NO_AUTHOR, author=OPTED_OUT_AUTHOR, content=OPTED_OUT_TEXT, attachments=())


class VeiledArchive:
    """The archive as the model's tools read it in one server: messages opted-out members wrote before they opted
    out come back as placeholders, as in a conversation (erasing them is `/parley privacy erase`)."""

    def __init__(self, archive: MessageArchive, optouts: OptOuts, guild_id: int) -> None:
        self.archive = archive
        self.optouts = optouts
        self.guild_id = guild_id

    def _veiled(self, messages: Sequence[ArchivedMessage]) -> list[ArchivedMessage]:
        return self.optouts.veil_archived(self.guild_id, messages)

    async def search(
        self, channel_id: int, query: str, *, hours: float | None = None, limit: int = 20
    ) -> Sequence[ArchivedMessage]:
        return self._veiled(await self.archive.search(channel_id, query, hours=hours, limit=limit))

    async def recent(
        self, channel_id: int, *, limit: int = 50, hours: float | None = None
    ) -> Sequence[ArchivedMessage]:
        return self._veiled(await self.archive.recent(channel_id, limit=limit, hours=hours))

    async def stats(self, channel_id: int, *, hours: float | None = None) -> ChannelStats:
        """The channel's counts, an opted-out member among its top authors as no one."""
        stats = await self.archive.stats(channel_id, hours=hours)
        authors = [
            TopAuthor(NO_AUTHOR, OPTED_OUT_AUTHOR, author.messages)
            if self.optouts.opted_out(self.guild_id, author.author_id)
            else author
            for author in stats.top_authors
        ]
        return replace(stats, top_authors=authors)

    async def flush(self) -> None:
        await self.archive.flush()


class HasOptOuts(Protocol):
    """What keeps the opt-outs (the client's `admission.Gatekeeper`)."""

    @property
    def optouts(self) -> OptOuts: ...
