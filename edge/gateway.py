"""Where and how discord.py connects: REST and gateway proxies when configured; a gateway reached before shards
start; the client's intents, mentions and shards."""

from __future__ import annotations

from typing import Any

import aiohttp
import discord
import yarl

from config import Settings

GATEWAY_PREFLIGHT_SECONDS = 30.0


async def reach_gateway(gateway: yarl.URL) -> None:
    """Open a websocket to the gateway and close it at once, before any shard identifies.

    Raises:
        ConnectionError: nothing answers there as a gateway; the message names the address.
    """
    timeout = aiohttp.ClientTimeout(total=GATEWAY_PREFLIGHT_SECONDS)
    try:
        async with aiohttp.ClientSession(timeout=timeout) as session, session.ws_connect(str(gateway)):
            pass
    except (OSError, aiohttp.ClientError) as error:
        reason = str(error) or type(error).__name__
        raise ConnectionError(f"the gateway {gateway} cannot be reached: {reason}") from None


def point_at_discord(settings: Settings) -> None:
    """Aim discord.py at REST and gateway proxies (local fakes in tests) when configured."""
    if settings.discord_api_base_url:
        discord.http.Route.BASE = settings.discord_api_base_url.rstrip("/")
    if settings.discord_gateway_url:
        discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(settings.discord_gateway_url)


def discord_options(settings: Settings, options: dict[str, Any]) -> dict[str, Any]:
    """discord.py's options for Parley's client: the intents it needs, no pings by default, this process's shards."""
    # discord.py warns at every start that voice needs PyNaCl and davey; Parley never joins voice.
    # These flags are its own switch for exactly those two warnings, so every other one still shows.
    discord.VoiceClient.warn_nacl = discord.VoiceClient.warn_dave = False
    intents = discord.Intents.none()
    intents.guilds = True
    intents.guild_messages = True
    intents.message_content = True
    # Without the intent Discord sends no direct messages at all, so with DIRECT_MESSAGES off none arrive.
    intents.dm_messages = settings.direct_messages
    if settings.shard_ids:  # else every shard of the count
        options["shard_ids"] = sorted(settings.shard_ids)
    options["shard_count"] = settings.shard_count  # None: as many as Discord recommends
    return {"intents": intents, "allowed_mentions": discord.AllowedMentions.none(), **options}
