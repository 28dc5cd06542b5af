"""The channels of a server a member may read, so that what the model is shown from them for that member (the
knowledge base's channel documents: pinned messages) stays with those who could read it on Discord."""

from __future__ import annotations

import discord


def readable_channel_ids(guild: discord.Guild, member: discord.Member) -> frozenset[int]:
    """The ids of the server's channels and (cached) threads in which `member` may view the channel and read its
    message history, as Discord would show them its pins."""
    readable: set[int] = set()
    for place in [*guild.channels, *guild.threads]:
        try:
            permissions = place.permissions_for(member)
        except discord.ClientException:  # a thread whose channel discord.py has not cached: not known readable
            continue
        if permissions.view_channel and permissions.read_message_history:
            readable.add(place.id)
    return frozenset(readable)
