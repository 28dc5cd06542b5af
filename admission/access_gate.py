"""Where the access rule is consulted: each message's verdict before any model call, direct messages' rule, and the
one notice a member who may not use Parley is told.

Direct messages follow the servers: a member is refused in a DM if any server Parley shares with them would refuse
them (a block of them or of a role they hold, or an allow list of roles or members that leaves them out), the
strictest server winning, since a DM has no moderators of its own. Channel lists do not apply to a DM (it is no
server's channel; DIRECT_MESSAGES turns DMs on or off). To know their roles Parley asks Discord for the member in
each server whose lists name roles or members (`MemberRoles`; without the privileged members intent it knows no
member lists), so only those servers are looked at, the servers other processes serve among them (their lists are
in the archive all processes share). If Discord cannot say, the DM is not answered this time.

`AccessGate.asker` is where every other path (a live message, one read from history, a command, Regenerate, a
reminder) learns who is asking with their roles in the server, so no path judges a member without them.

The notice is said once per member per server (a DM counts as one place), while the process runs: a member who
keeps mentioning Parley hears it once, then silence; after a restart they may hear it once more.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Protocol

import discord

from admission.access import AccessVerdict, Asker, Lists, Place, member_verdict, verdict
from admission.access_lists import AccessLists
from admission.declined import Notice

# Members told, remembered at most: past it the longest-told is forgotten, and may be told once more.
TOLD_KEPT = 10_000


class RolesUnknown(Exception):
    """Discord could not say whether, or with which roles, a member is in a server (it failed when asked)."""


class MemberRoles(Protocol):
    """What Discord says of a member's servers and roles (edge/member_roles.py): the one way any path learns them."""

    async def server_ids(self) -> list[int]:
        """Every server Parley is in, those other processes serve included.

        Raises:
            RolesUnknown: Discord could not say.
        """
        ...

    def carried_roles(self, guild_id: int, user: discord.abc.Snowflake) -> frozenset[int] | None:
        """The roles `user` holds in the server as the payload that brought them says (a gateway message's or an
        interaction's member), if it says; None if it does not (a message read from history, a bare id)."""
        ...

    async def roles_in(self, guild_id: int, member_id: int) -> frozenset[int] | None:
        """The roles the member holds in the server (@everyone's, the server's id, among them), asked of Discord
        (and kept a while) even where this process does not serve the server; None if they are not in it.

        Raises:
            RolesUnknown: Discord could not say.
        """
        ...

    async def member_in(self, guild_id: int, member_id: int) -> discord.Member | None:
        """The member `roles_in` reads, for their permissions in a channel of a server this process serves.

        Raises:
            RolesUnknown: Discord could not say.
        """
        ...


class AccessGate:
    """Each message's access verdict, and the notice its author is told once when they may not use Parley."""

    def __init__(self, lists: AccessLists, members: MemberRoles, *, told_kept: int = TOLD_KEPT) -> None:
        self.lists = lists
        self.members = members
        self._told_kept = told_kept
        self._told: OrderedDict[tuple[int, int], None] = OrderedDict()

    async def asker(self, guild_id: int, user: discord.abc.Snowflake) -> Asker:
        """`user` with the roles they hold in the server now: those the payload that brought them carries, else
        Discord's (over REST); none in a DM (each server's are looked up by `direct_message_verdict`), where they
        are not a member, or where no list names a role and ROLE_LIMITS is not set (then Discord is not asked).
        Every path that decides for a member learns their roles here."""
        if guild_id == 0 or not self._roles_matter(guild_id):
            return Asker(user.id)
        carried = self.members.carried_roles(guild_id, user)
        if carried is not None:
            return Asker(user.id, carried)
        try:
            roles = await self.members.roles_in(guild_id, user.id)
        except RolesUnknown:
            return Asker(user.id, roles_known=False)
        return Asker(user.id, roles or frozenset())

    async def verdict(self, guild_id: int, place: Place, asker: Asker) -> AccessVerdict:
        """Whether `asker` may be answered at `place` in the server `guild_id` (0: a direct message)."""
        if guild_id == 0:
            return await self.direct_message_verdict(asker.member_id)
        return self.server_verdict(guild_id, place, asker)

    def server_verdict(self, guild_id: int, place: Place, asker: Asker) -> AccessVerdict:
        """`verdict` in a server (never 0), known at once: for entry points that are no message, such as Regenerate
        (guild-only) or an /ask-like command."""
        if not self.serves(guild_id):
            return AccessVerdict.SERVER_NOT_ALLOWED
        return verdict(place, asker, self.lists.lists_for(guild_id))

    def serves(self, guild_id: int) -> bool:
        """Whether Parley serves the server: ALLOWED_SERVERS names it, or is not set. The one check every path makes
        (a message's verdict, a command's, the servers left at start and on joining: edge/servers.py), so a server
        being left is answered nothing meanwhile. A direct message (0) is no server's: DIRECT_MESSAGES rules it."""
        allowed = self.lists.settings.allowed_servers
        return guild_id == 0 or not allowed or guild_id in allowed

    async def direct_message_verdict(self, member_id: int) -> AccessVerdict:
        """The first refusal among the servers Parley shares with the member whose lists name roles or members (the
        strictest wins, so the first found is enough); allowed if none refuses them and Discord said for each."""
        if member_id in self.lists.deploy.blocked_members:
            return AccessVerdict.MEMBER_BLOCKED  # no need to ask Discord which servers they are in
        try:
            servers = await self._servers_naming_members()
        except RolesUnknown:
            return AccessVerdict.ROLES_UNKNOWN
        unknown = False
        for guild_id in servers:
            try:
                roles = await self.members.roles_in(guild_id, member_id)
            except RolesUnknown:
                unknown = True  # this server might refuse them: unless another does, not answered this time
                continue
            if roles is None:
                continue  # not a server they share with Parley
            found = member_verdict(Asker(member_id, roles), self.lists.lists_for(guild_id))
            if not found.allowed:
                return found
        return AccessVerdict.ROLES_UNKNOWN if unknown else AccessVerdict.ALLOWED

    def _roles_matter(self, guild_id: int) -> bool:
        """Whether a member's roles change anything in the server: a list names roles, or ROLE_LIMITS is set."""
        lists = self.lists.lists_for(guild_id)
        return bool(lists.blocked_roles or lists.allowed_roles or self.lists.settings.role_limits)

    async def _servers_naming_members(self) -> list[int]:
        deploy = self.lists.deploy
        if deploy.limits_members or deploy.blocked_roles:
            return await self.members.server_ids()  # the settings' lists are every server's
        return [
            guild_id
            for guild_id in sorted(self.lists.servers_with_entries())
            if _names_members(self.lists.lists_for(guild_id))
        ]

    def first_time(self, guild_id: int, member_id: int) -> bool:
        """Whether the member is to be told now: the first time in this server (or in DMs) since they were last
        forgotten."""
        key = (guild_id, member_id)
        if key in self._told:
            self._told.move_to_end(key)
            return False
        self._told[key] = None
        if len(self._told) > self._told_kept:
            self._told.popitem(last=False)
        return True

    def notice(self, message: discord.Message, guild_id: int, found: AccessVerdict) -> Notice | None:
        """What the author is told, replying to them, of why Parley does not answer them: the first time only, and
        never a channel's verdict (`AccessVerdict.notice`)."""
        line = found.notice
        if line is None or not self.first_time(guild_id, message.author.id):
            return None
        return Notice(message, line)


def _names_members(lists: Lists) -> bool:
    return bool(lists.limits_members or lists.blocked_roles or lists.blocked_members)
