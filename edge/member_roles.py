"""Who a member is in a server, with their roles, as Discord says: `admission.access_gate.MemberRoles` for the
access gate, through which every path that decides for a member learns their roles (`AccessGate.asker`).

A member object that came with a gateway message or an interaction carries the member's roles, read against the
server's roles in discord.py's cache. A message read back from history carries none, and a process serving other
shards has no cache of the server at all; Parley runs without the privileged members intent either way, so then
the member is fetched (GET /guilds/{guild.id}/members/{user.id},
https://discord.com/developers/docs/resources/guild#get-guild-member, which needs no intent), and the server too
if this process does not serve it (GET /guilds/{guild.id}, for its roles). Both are kept a while, so a
conversation asks once per server, not once per message. A process serving only some shards lists the bot's other
servers the same way, for the deploy's lists, which are every server's.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Generic, Protocol, TypeVar

import aiohttp
import discord

from admission.access_gate import AccessGate, RolesUnknown
from admission.access_lists import AccessLists
from config import Settings
from discord_io import role_ids_of

log = logging.getLogger("parley.access")

# How long a member (or their absence from a server), and a server this process does not serve, are trusted; a
# role given or taken meanwhile is seen after it.
KEPT_SECONDS = 600.0
KEPT_AT_MOST = 10_000


K = TypeVar("K")
V = TypeVar("V")


class _Kept(Generic[K, V]):
    """Answers from Discord, each trusted for `kept_seconds`, the longest-kept forgotten past KEPT_AT_MOST; `get`
    wraps an answer in a 1-tuple, since None may be one (not a member)."""

    def __init__(self, clock: Callable[[], float], kept_seconds: float) -> None:
        self.clock = clock
        self.kept_seconds = kept_seconds
        self._found: OrderedDict[K, tuple[float, V]] = OrderedDict()

    def get(self, key: K) -> tuple[V] | None:
        found = self._found.get(key)
        if found is None or self.clock() - found[0] >= self.kept_seconds:
            return None
        return (found[1],)

    def put(self, key: K, value: V) -> None:
        self._found[key] = (self.clock(), value)
        self._found.move_to_end(key)
        if len(self._found) > KEPT_AT_MOST:
            self._found.popitem(last=False)


class DiscordServers(Protocol):
    """discord.py's client, as the members' lookups call it: its servers, cached or asked of Discord, and its shards
    (an AutoShardedClient's `shard_ids` too, read where there is one)."""

    @property
    def guilds(self) -> Sequence[discord.Guild]: ...
    @property
    def shard_count(self) -> int | None: ...

    def get_guild(self, id: int, /) -> discord.Guild | None: ...
    async def fetch_guild(self, guild_id: int, /, *, with_counts: bool = True) -> discord.Guild: ...
    def fetch_guilds(self, *, limit: int | None = 200, with_counts: bool = True) -> AsyncIterator[discord.Guild]: ...


class DiscordMembers:
    """`admission.access_gate.MemberRoles` over a discord.py client: its servers, and a member in any server."""

    def __init__(
        self, client: DiscordServers, *, clock: Callable[[], float] = time.monotonic, kept_seconds: float = KEPT_SECONDS
    ) -> None:
        self.client = client
        self._members: _Kept[tuple[int, int], discord.Member | None] = _Kept(clock, kept_seconds)
        self._servers: _Kept[int, discord.Guild | None] = _Kept(clock, kept_seconds)
        # Every server of the bot's (one entry, 0), for a process serving only some of the shards.
        self._all_servers: _Kept[int, list[int]] = _Kept(clock, kept_seconds)

    async def server_ids(self) -> list[int]:
        """This process's servers, or, when it serves only some of the shards, every server of the bot's, asked of
        Discord (GET /users/@me/guilds, https://discord.com/developers/docs/resources/user#get-current-user-guilds)
        and kept a while."""
        if self._serves_every_shard():
            return [guild.id for guild in self.client.guilds]
        kept = self._all_servers.get(0)
        if kept is not None:
            return kept[0]
        try:
            found = [guild.id async for guild in self.client.fetch_guilds(limit=None, with_counts=False)]
        except (discord.HTTPException, TimeoutError, aiohttp.ClientError, OSError) as error:
            log.warning("could not list Parley's servers: %s", error)
            raise RolesUnknown("Parley's servers") from error
        self._all_servers.put(0, found)
        return found

    def _serves_every_shard(self) -> bool:
        shard_ids = getattr(self.client, "shard_ids", None)  # an AutoShardedClient's; None: all of them
        return shard_ids is None or set(range(self.client.shard_count or 1)) <= set(shard_ids)

    def carried_roles(self, guild_id: int, user: discord.abc.Snowflake) -> frozenset[int] | None:
        # A member object's roles are read against its server's cached roles: trusted only where this process
        # has the server (a payload's member in a server it does not have would seem to hold none).
        if isinstance(user, discord.Member) and self.client.get_guild(guild_id) is not None:
            return role_ids_of(user)
        return None

    async def roles_in(self, guild_id: int, member_id: int) -> frozenset[int] | None:
        member = await self.member_in(guild_id, member_id)
        return None if member is None else role_ids_of(member)

    async def member_in(self, guild_id: int, member_id: int) -> discord.Member | None:
        key = (guild_id, member_id)
        kept = self._members.get(key)
        if kept is not None:
            return kept[0]
        try:
            guild = await self._server(guild_id)
            member = None if guild is None else await guild.fetch_member(member_id)
        except discord.NotFound:
            member = None  # not in the server
        except (discord.HTTPException, TimeoutError, aiohttp.ClientError, OSError) as error:
            log.warning("could not look member %s up in server %s: %s", member_id, guild_id, error)
            raise RolesUnknown(f"member {member_id} in server {guild_id}") from error
        self._members.put(key, member)
        return member

    async def _server(self, guild_id: int) -> discord.Guild | None:
        """The server with its roles: this process's cached one, else fetched (another process serves it); None if
        Parley is no longer in it (an entry another process kept for a server it left while stopped)."""
        guild = self.client.get_guild(guild_id)
        if guild is not None:
            return guild
        kept = self._servers.get(guild_id)
        if kept is not None:
            return kept[0]
        try:
            guild = await self.client.fetch_guild(guild_id, with_counts=False)
        except (discord.NotFound, discord.Forbidden):
            # Discord answers a server the bot is not in with 403 Missing Access (or 404 Unknown Guild).
            guild = None
        self._servers.put(guild_id, guild)
        return guild


def access_gate(client: DiscordServers, settings: Settings) -> AccessGate:
    """The client's access gate: the settings' lists and the archive's entries, members looked up on Discord."""
    return AccessGate(AccessLists(settings), DiscordMembers(client))
