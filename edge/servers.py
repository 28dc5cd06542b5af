"""The servers Parley serves: those outside ALLOWED_SERVERS are left, and a public bot without it is warned about.

A bot application is public by default on Discord: anyone who has its client id can add it to their server, where
it would spend the deployer's tokens. ALLOWED_SERVERS closes that; turning Public Bot off in the Developer Portal
does too, and keeps such servers from adding it at all.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

import discord

log = logging.getLogger("parley")

PUBLIC_BOT_WARNING = (
    "This bot application is public, so anyone with its invite link can add Parley to their server and spend your"
    " tokens: turn Public Bot off (Developer Portal > your application > Bot), or set ALLOWED_SERVERS"
)


async def leave_unserved(guilds: Iterable[discord.Guild], serves: Callable[[int], bool]) -> list[discord.Guild]:
    """Leave each of `guilds` Parley does not serve (`AccessGate.serves`), one log line each; the others."""
    served = []
    for guild in guilds:
        if serves(guild.id):
            served.append(guild)
            continue
        log.warning("leaving server %s (%s): it is not in ALLOWED_SERVERS", guild.id, guild.name)
        try:
            await guild.leave()
        except discord.HTTPException as error:
            # Nothing is answered there meanwhile (the same check refuses it); the next start tries again.
            log.warning("could not leave server %s: %s", guild.id, error)
    return served


def public_bot_warning(application: discord.AppInfo | None, allowed_servers: frozenset[int]) -> str | None:
    """The one line a public application without ALLOWED_SERVERS is warned with at start; None otherwise."""
    if application is None or not application.bot_public or allowed_servers:
        return None
    return PUBLIC_BOT_WARNING
