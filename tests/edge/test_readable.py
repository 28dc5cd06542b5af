"""edge/readable.py's `readable_among`: of some channels, those a member may read; one discord.py does not have cached
(a forum post's thread archived since) is asked of Discord, within a bound. discord.py's types are specced stand-ins
(the fake Discord has no forums)."""

from __future__ import annotations

from unittest.mock import AsyncMock, MagicMock

import discord

from edge.readable import readable_among

READS = discord.Permissions(view_channel=True, read_message_history=True)
CACHED, HIDDEN, ARCHIVED, GONE = 1, 2, 3, 4


def place(place_id: int, permissions: discord.Permissions) -> MagicMock:
    made = MagicMock(spec=discord.Thread)
    made.id = place_id
    made.is_private.return_value = False
    made.permissions_for.return_value = permissions
    return made


def guild(cached: list[MagicMock], fetched: dict[int, MagicMock]) -> MagicMock:
    made = MagicMock(spec=discord.Guild)
    made.channels, made.threads = [], cached
    made.get_channel_or_thread.side_effect = lambda place_id: next((p for p in cached if p.id == place_id), None)

    async def fetch(place_id: int) -> MagicMock:
        if place_id not in fetched:
            raise discord.NotFound(MagicMock(status=404, reason="Not Found"), "Unknown Channel")
        return fetched[place_id]

    made.fetch_channel = AsyncMock(side_effect=fetch)
    return made


async def test_cached_channels_by_their_permissions_and_archived_posts_asked_of_discord() -> None:
    server = guild(
        [place(CACHED, READS), place(HIDDEN, discord.Permissions(view_channel=True))],
        {ARCHIVED: place(ARCHIVED, READS)},
    )
    member = MagicMock(spec=discord.Member)

    readable = await readable_among(server, member, [CACHED, HIDDEN, ARCHIVED, GONE], fetch_at_most=5)

    assert readable == {CACHED, ARCHIVED}
    assert sorted(call.args[0] for call in server.fetch_channel.await_args_list) == [ARCHIVED, GONE]


async def test_past_the_bound_an_uncached_channel_is_not_readable() -> None:
    server = guild([], {ARCHIVED: place(ARCHIVED, READS), GONE: place(GONE, READS)})
    readable = await readable_among(server, MagicMock(spec=discord.Member), [ARCHIVED, GONE], fetch_at_most=1)
    assert readable == {GONE}  # the newest (the highest id) is asked first
