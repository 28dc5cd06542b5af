"""The channels of a server a member may read, so that what the model is shown from them for that member (the
knowledge base's channel documents: pinned messages) stays with those who could read it on Discord, and with
those who will read the answer."""

from __future__ import annotations

import logging
from collections.abc import Collection

import discord

log = logging.getLogger("parley")

Place = discord.abc.GuildChannel | discord.Thread


def readable_channel_ids(guild: discord.Guild, member: discord.Member) -> frozenset[int]:
    """The ids of the server's channels and (cached) threads in which `member` may view the channel and read its
    message history, as Discord would show them its pins."""
    return frozenset(place.id for place in _places(guild) if _reads(place, member))


def shown_channel_ids(
    guild: discord.Guild, member: discord.Member, posted_in: discord.abc.Messageable | None
) -> frozenset[int]:
    """The channels whose documents an answer of `member`'s may quote. Private (`posted_in` None: only the asker
    reads it): those the asker may read. Posted in a channel: of those, only the channel itself (and a thread's
    parent), or one the server's @everyone role may read, since everyone in the channel reads the answer."""
    readable = readable_channel_ids(guild, member)
    if posted_in is None:
        return readable
    here = {getattr(posted_in, "id", 0), getattr(posted_in, "parent_id", None) or 0}
    return frozenset(
        place.id
        for place in _places(guild)
        if place.id in readable and (place.id in here or _reads(place, guild.default_role))
    )


async def readable_among(
    guild: discord.Guild, member: discord.Member, channel_ids: Collection[int], *, fetch_at_most: int
) -> frozenset[int]:
    """Of `channel_ids` (the server's), those `member` may read: each as discord.py has it cached, or for up to
    `fetch_at_most` others (a forum post's thread archived since, which discord.py forgets) as Discord says it is.
    One Discord no longer has, or past the bound, is not readable."""
    readable = set(readable_channel_ids(guild, member) & set(channel_ids))
    unknown = [channel_id for channel_id in channel_ids if guild.get_channel_or_thread(channel_id) is None]
    for channel_id in sorted(unknown, reverse=True)[:fetch_at_most]:  # the newest first
        try:
            place = await guild.fetch_channel(channel_id)
        except (discord.HTTPException, discord.InvalidData) as error:  # deleted since, hidden from Parley, elsewhere
            log.info("channel %s is not listed: %s", channel_id, error)
            continue
        if _reads(place, member):
            readable.add(channel_id)
    return frozenset(readable)


def _places(guild: discord.Guild) -> list[Place]:
    return [*guild.channels, *guild.threads]


def _reads(place: Place, who: discord.Member | discord.Role) -> bool:
    # discord.py gives a thread its parent's permissions; a private thread is read by its members (those discord.py
    # has cached: one it has not is not known to read it) and those who may manage threads, not by a role.
    # https://discord.com/developers/docs/topics/threads#permissions
    if isinstance(place, discord.Thread) and place.is_private() and not _in_private_thread(place, who):
        return False
    try:
        permissions = place.permissions_for(who)
    except discord.ClientException:  # a thread whose channel discord.py has not cached: not known readable
        return False
    return permissions.view_channel and permissions.read_message_history


def _in_private_thread(thread: discord.Thread, who: discord.Member | discord.Role) -> bool:
    if isinstance(who, discord.Role):
        return False
    if who.id == thread.owner_id or any(member.id == who.id for member in thread.members):
        return True
    try:
        return thread.permissions_for(who).manage_threads
    except discord.ClientException:
        return False
