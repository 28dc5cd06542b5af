"""Where discord.py connects: REST and gateway proxies when configured; a gateway reached before shards start."""

from __future__ import annotations

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
