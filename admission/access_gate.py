"""Where the access rule is consulted: each message's verdict before any model call, direct messages' rule, and the
one notice a member who may not use Parley is told.

Direct messages follow the servers: a member is refused in a DM if any server Parley shares with them would refuse
them (a block of them or of a role they hold, or an allow list of roles or members that leaves them out), the
strictest server winning, since a DM has no moderators of its own. Channel lists do not apply to a DM (it is no
server's channel; DIRECT_MESSAGES turns DMs on or off). To know their roles Parley asks Discord for the member in
each server whose lists name roles or members (`MemberRoles`; without the privileged members intent it knows no
member lists), so only those servers are looked at.

The notice is said once per member per server (a DM counts as one place), while the process runs: a member who
keeps mentioning Parley hears it once, then silence; after a restart they may hear it once more.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from typing import Protocol

import discord

from admission.access import Asker, Lists, Place, Verdict, member_verdict, verdict
from admission.access_lists import AccessLists
from discord_io import reply_mentions

log = logging.getLogger("parley.access")

# Members told, remembered at most: past it the longest-told is forgotten, and may be told once more.
TOLD_KEPT = 10_000


class MemberRoles(Protocol):
    """What Discord says of a member's servers, as direct messages' rule needs it."""

    def server_ids(self) -> list[int]: ...

    async def roles_in(self, guild_id: int, member_id: int) -> frozenset[int] | None:
        """The roles `member_id` holds in the server; None if they are not in it (or it cannot be known)."""
        ...

    def left(self, guild_id: int, member_id: int) -> bool:
        """Whether Discord said, at the last `roles_in`, that the member is not in the server (so a None from it is
        known, not a failure to ask)."""
        ...


class AccessGate:
    """Each message's access verdict, and the notice its author gets once when they may not use Parley."""

    def __init__(self, lists: AccessLists, members: MemberRoles, *, told_kept: int = TOLD_KEPT) -> None:
        self.lists = lists
        self.members = members
        self._told_kept = told_kept
        self._told: OrderedDict[tuple[int, int], None] = OrderedDict()

    async def verdict(self, guild_id: int, place: Place, asker: Asker) -> Verdict:
        """Whether `asker` may be answered at `place` in the server `guild_id` (0: a direct message)."""
        if guild_id == 0:
            return await self.direct_message_verdict(asker.member_id)
        return self.server_verdict(guild_id, place, asker)

    def server_verdict(self, guild_id: int, place: Place, asker: Asker) -> Verdict:
        """`verdict` in a server (never 0), known at once: for entry points that are no message, such as Regenerate
        (guild-only) or an /ask-like command."""
        return verdict(place, asker, self.lists.lists_for(guild_id))

    async def direct_message_verdict(self, member_id: int) -> Verdict:
        """The first refusal among the servers Parley shares with the member whose lists name roles or members (the
        strictest wins, so the first found is enough); allowed if none refuses them."""
        if member_id in self.lists.deploy.blocked_members:
            return Verdict.MEMBER_BLOCKED  # no need to ask Discord which servers they are in
        for guild_id in self._servers_naming_members():
            roles = await self.members.roles_in(guild_id, member_id)
            if roles is None:
                continue  # not a server they share with Parley
            found = member_verdict(Asker(member_id, roles), self.lists.lists_for(guild_id))
            if not found.allowed:
                return found
        return Verdict.ALLOWED

    def _servers_naming_members(self) -> list[int]:
        deploy = self.lists.deploy
        if deploy.limits_members or deploy.blocked_roles:
            return self.members.server_ids()  # the settings' lists are every server's
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

    async def tell_once(self, message: discord.Message, guild_id: int, found: Verdict) -> None:
        """Tell the author, replying to them, why Parley does not answer them, the first time only; a channel's
        verdict is never told (`Verdict.notice`).

        Not recorded in the conversation: it is no turn of Parley's for the model to see or follow up on.
        """
        notice = found.notice
        if notice is None or not self.first_time(guild_id, message.author.id):
            return
        try:
            await message.channel.send(
                notice,
                reference=message.to_reference(fail_if_not_exists=False),
                allowed_mentions=reply_mentions(message.author),
            )
        except discord.HTTPException as error:
            log.warning("could not tell a member in channel %s why Parley is quiet: %s", message.channel.id, error)


def _names_members(lists: Lists) -> bool:
    return bool(lists.limits_members or lists.blocked_roles or lists.blocked_members)
