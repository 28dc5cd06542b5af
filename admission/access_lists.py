"""The access lists each server has: the deploy's settings and the server's own, set by `/parley-admin access`.

The settings (ALLOWED_CHANNELS, BLOCKED_CHANNELS, ALLOWED_ROLES, BLOCKED_ROLES, BLOCKED_MEMBERS) apply in every
server; a server's commands add to them, one entry per channel, category, role or member (allowing a target that
was blocked replaces its entry). Commands cannot lift what a setting says: a deploy's block stays a block. The
entries live in the archive (schema: `access_entries`) with who set them and when, so they survive a restart and
reach every process sharing a Postgres archive (ops/shared.py); without an archive, in memory until one.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal, cast, get_args

from admission.access import Lists
from archive import AccessEntry, AccessTables
from config import Settings

log = logging.getLogger("parley.access")

Kind = Literal["channel", "category", "role", "member"]
Listed = Literal["allow", "block"]
KINDS: tuple[Kind, ...] = get_args(Kind)
LISTED: tuple[Listed, ...] = get_args(Listed)

# The settings, by the list each fills: (kind, listed, variable).
SETTING_LISTS: tuple[tuple[Kind, Listed, str], ...] = (
    ("channel", "allow", "ALLOWED_CHANNELS"),
    ("channel", "block", "BLOCKED_CHANNELS"),
    ("role", "allow", "ALLOWED_ROLES"),
    ("role", "block", "BLOCKED_ROLES"),
    ("member", "block", "BLOCKED_MEMBERS"),
)


@dataclass(frozen=True, slots=True)
class Shown:
    """One entry as `/parley-admin access show` lists it: what, which list, and where it comes from (a setting's
    name, or the command's setter and time)."""

    target_id: int
    kind: Kind
    listed: Listed
    setting: str | None = None
    set_by: int | None = None
    set_at: datetime | None = None


def settings_lists(settings: Settings) -> Lists:
    """The lists the deploy's settings make, for every server."""
    return Lists(
        allowed_channels=settings.allowed_channels,
        blocked_channels=settings.blocked_channels,
        allowed_roles=settings.allowed_roles,
        blocked_roles=settings.blocked_roles,
        blocked_members=settings.blocked_members,
    )


def lists_of(entries: Iterable[AccessEntry]) -> Lists:
    """The lists a server's command entries make."""
    found: dict[tuple[str, str], set[int]] = {}
    for entry in entries:
        kind = "channel" if entry.kind == "category" else entry.kind
        found.setdefault((kind, entry.listed), set()).add(entry.target_id)

    def ids(kind: str, listed: str) -> frozenset[int]:
        return frozenset(found.get((kind, listed), ()))

    return Lists(
        allowed_channels=ids("channel", "allow"),
        blocked_channels=ids("channel", "block"),
        allowed_roles=ids("role", "allow"),
        blocked_roles=ids("role", "block"),
        allowed_members=ids("member", "allow"),
        blocked_members=ids("member", "block"),
    )


def _is_entry(entry: AccessEntry) -> bool:
    return entry.kind in KINDS and entry.listed in LISTED


class AccessLists:
    """Every server's access lists: the settings' and the commands' entries, read from the archive when it opens."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.deploy = settings_lists(settings)
        self.archive: AccessTables | None = None
        # By server, by target: the commands' entries.
        self._entries: dict[int, dict[int, AccessEntry]] = {}
        # By server: the deploy's lists and its entries together, made once per change (read for every message).
        self._lists: dict[int, Lists] = {}

    async def attach(self, archive: AccessTables) -> None:
        """Keep the commands' entries in `archive`, and take up those kept there."""
        self.archive = archive
        await self.reload_all()

    async def reload(self, guild_id: int) -> None:
        """Take up a server's entries as the archive now has them: another process sharing it changed them."""
        assert self.archive is not None
        self._keep(guild_id, await self.archive.access_entries(guild_id))

    async def reload_all(self) -> None:
        """Take up every server's entries as the archive now has them."""
        assert self.archive is not None
        by_server: dict[int, list[AccessEntry]] = {guild_id: [] for guild_id in self._entries}
        for entry in await self.archive.access_entries():
            by_server.setdefault(entry.guild_id, []).append(entry)
        for guild_id, entries in by_server.items():
            self._keep(guild_id, entries)

    def _keep(self, guild_id: int, entries: Iterable[AccessEntry]) -> None:
        kept = {entry.target_id: entry for entry in entries if _is_entry(entry)}
        if kept:
            self._entries[guild_id] = kept
        else:
            self._entries.pop(guild_id, None)
        self._lists.pop(guild_id, None)

    def lists_for(self, guild_id: int) -> Lists:
        """The lists that apply in a server: the settings' and its own entries'."""
        lists = self._lists.get(guild_id)
        if lists is None:
            entries = self._entries.get(guild_id)
            lists = self.deploy if entries is None else self.deploy | lists_of(entries.values())
            self._lists[guild_id] = lists
        return lists

    def servers_with_entries(self) -> set[int]:
        """The servers whose commands set an entry."""
        return set(self._entries)

    def shown(self, guild_id: int) -> list[Shown]:
        """What `/parley-admin access show` lists for a server: the settings' entries, then the commands' in the
        order they were set."""
        from_settings = [
            Shown(target_id, kind, listed, setting=variable)
            for kind, listed, variable in SETTING_LISTS
            for target_id in sorted(getattr(self.settings, variable.lower()))
        ]
        from_commands = [
            Shown(
                entry.target_id,
                # `_keep` keeps the known kinds and lists only.
                cast("Kind", entry.kind),
                cast("Listed", entry.listed),
                set_by=entry.set_by,
                set_at=datetime.fromtimestamp(entry.set_at / 1000, UTC),
            )
            for entry in sorted(self._entries.get(guild_id, {}).values(), key=lambda entry: entry.set_at)
        ]
        return from_settings + from_commands

    async def put(self, guild_id: int, target_id: int, kind: Kind, listed: Listed, set_by: int) -> None:
        """Allow or block a target in a server from the next message on (replacing its earlier entry).

        Raises:
            ArchiveWriteFailed: the archive could not keep it; nothing changed.
        """
        entry = AccessEntry(guild_id, target_id, kind, listed, set_by, int(datetime.now(UTC).timestamp() * 1000))
        if self.archive is not None:
            await self.archive.set_access_entry(entry)
        entries = dict(self._entries.get(guild_id, {}))
        entries[target_id] = entry
        self._keep(guild_id, entries.values())
        log.info("server %s: %s %s %s by %s", guild_id, listed, kind, target_id, set_by, extra={"guild_id": guild_id})

    async def clear(self, guild_id: int, target_id: int) -> AccessEntry | None:
        """Drop a server's entry for a target; returns it (None: it had none). The settings' lists stay.

        Raises:
            ArchiveWriteFailed: the archive could not drop it; nothing changed.
        """
        entries = dict(self._entries.get(guild_id, {}))
        dropped = entries.pop(target_id, None)
        if dropped is None:
            return None
        if self.archive is not None:
            await self.archive.clear_access_entry(guild_id, target_id)
        self._keep(guild_id, entries.values())
        return dropped

    def forget(self, guild_id: int) -> None:
        """Drop what is kept in memory for a server Parley left (the archive drops its rows)."""
        self._entries.pop(guild_id, None)
        self._lists.pop(guild_id, None)
