"""A member's roles in a server, asked of Discord, for the access rule of direct messages (admission/access_gate.py).

Parley runs without the privileged members intent, so discord.py keeps no member lists: a member is fetched
(GET /guilds/{guild.id}/members/{user.id}, https://discord.com/developers/docs/resources/guild#get-guild-member,
which needs no intent) in each server whose lists name roles or members, and the answer is kept for a while, so a
conversation in DMs asks once per server, not once per message.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable

import discord

from admission.access_gate import AccessGate
from admission.access_lists import AccessLists
from config import Settings

log = logging.getLogger("parley.access")

# How long a member's roles (or their absence from a server) are trusted; a role given or taken meanwhile is seen
# after it.
KEPT_SECONDS = 600.0
KEPT_AT_MOST = 10_000


class DiscordMembers:
    """`admission.access_gate.MemberRoles` over a discord.py client: its servers, and a member's roles in one."""

    def __init__(
        self, client: discord.Client, *, clock: Callable[[], float] = time.monotonic, kept_seconds: float = KEPT_SECONDS
    ) -> None:
        self.client = client
        self.clock = clock
        self.kept_seconds = kept_seconds
        self._known: OrderedDict[tuple[int, int], tuple[float, frozenset[int] | None]] = OrderedDict()

    def server_ids(self) -> list[int]:
        return [guild.id for guild in self.client.guilds]

    def left(self, guild_id: int, member_id: int) -> bool:
        known = self._known.get((guild_id, member_id))
        return known is not None and known[1] is None

    async def roles_in(self, guild_id: int, member_id: int) -> frozenset[int] | None:
        """The member's roles in the server (with @everyone's, the server's id); None if they are not in it, or if
        Discord cannot say (then the server is left out this time, and asked again next time)."""
        key = (guild_id, member_id)
        known = self._known.get(key)
        if known is not None and self.clock() - known[0] < self.kept_seconds:
            return known[1]
        guild = self.client.get_guild(guild_id)
        if guild is None:
            return None
        try:
            member = await guild.fetch_member(member_id)
        except discord.NotFound:
            roles = None
        except discord.HTTPException as error:
            log.warning("could not look member %s up in server %s: %s", member_id, guild_id, error)
            return None
        else:
            roles = frozenset(role.id for role in member.roles)
        self._known[key] = (self.clock(), roles)
        self._known.move_to_end(key)
        if len(self._known) > KEPT_AT_MOST:
            self._known.popitem(last=False)
        return roles


def access_gate(client: discord.Client, settings: Settings) -> AccessGate:
    """The client's access gate: the settings' lists and the archive's entries, members looked up on Discord."""
    return AccessGate(AccessLists(settings), DiscordMembers(client))
