"""The Discord calls of the server actions (tools/server_actions.py), in one answer's channel, for its asker.

The tools know them as `tools.channel_actions.ChannelActions`. Permissions are asked when an action runs: the asker's
roles fetched anew (a role taken away while they decided to approve counts), Parley's from its member in the server.
A message is fetched from this channel alone, so another channel's id is not found and nothing is done to it. What
Discord refuses becomes `ActionRefused`, one line the model relays; the reason goes into Discord's own audit log.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import TypeVar

import discord

from edge.asking import Question
from tools.channel_actions import ActionLog, ActionRefused, ActionSwitches, ServerActionDeps

T = TypeVar("T")


def _held(permissions: discord.Permissions) -> frozenset[str]:
    return frozenset(name for name, held in permissions if held)


async def _refused_as_a_line(call: Callable[[], Awaitable[T]], missing: str) -> T:
    """`call()`, with Discord's "not found" (`missing` says what) and "forbidden" as `ActionRefused`."""
    try:
        return await call()
    except discord.NotFound:
        raise ActionRefused(missing) from None
    except discord.Forbidden as error:
        raise ActionRefused(f"Discord refused it ({error.text or 'missing permissions'}).") from None


class ChannelOnDiscord:
    """A `tools.channel_actions.ChannelActions`: the server actions in `channel` of `guild`, asked by `asker_id`."""

    def __init__(self, channel: discord.TextChannel | discord.Thread, guild: discord.Guild, asker_id: int) -> None:
        self.channel = channel
        self.guild = guild
        self.asker_id = asker_id

    async def asker_permissions(self) -> frozenset[str]:
        try:
            member = await self.guild.fetch_member(self.asker_id)
        except discord.NotFound:
            return frozenset()  # they left the server meanwhile
        return _held(self.channel.permissions_for(member))

    async def own_permissions(self) -> frozenset[str]:
        return _held(self.channel.permissions_for(self.guild.me))

    async def _message(self, message_id: int) -> discord.Message:
        missing = f"there is no message {message_id} in this channel."
        return await _refused_as_a_line(lambda: self.channel.fetch_message(message_id), missing)

    async def pin(self, message_id: int, reason: str) -> None:
        message = await self._message(message_id)
        await _refused_as_a_line(lambda: message.pin(reason=reason), "the message is gone.")

    async def unpin(self, message_id: int, reason: str) -> None:
        message = await self._message(message_id)
        await _refused_as_a_line(lambda: message.unpin(reason=reason), "the message is not pinned.")

    async def delete(self, message_id: int, reason: str) -> None:
        message = await self._message(message_id)
        await _refused_as_a_line(lambda: message.delete(), "the message is gone already.")

    async def create_thread(self, name: str, message_id: int | None, reason: str) -> int:
        channel = self.channel
        if isinstance(channel, discord.Thread):
            raise ActionRefused("this is a thread already, and a thread holds no threads.")
        if message_id is not None:
            message = await self._message(message_id)
            thread = await _refused_as_a_line(
                lambda: message.create_thread(name=name, reason=reason), "the message is gone."
            )
        else:
            thread = await _refused_as_a_line(
                lambda: channel.create_thread(name=name, type=discord.ChannelType.public_thread, reason=reason),
                "the channel is gone.",
            )
        return thread.id

    async def set_slowmode(self, seconds: int, reason: str) -> None:
        channel = self.channel
        await _refused_as_a_line(lambda: channel.edit(slowmode_delay=seconds, reason=reason), "the channel is gone.")

    async def time_out(self, member_id: int, until: datetime, reason: str) -> None:
        missing = f"member {member_id} is not in this server."
        member = await _refused_as_a_line(lambda: self.guild.fetch_member(member_id), missing)
        await _refused_as_a_line(lambda: member.timeout(until, reason=reason), missing)


def server_actions_for(
    question: Question, switches: ActionSwitches, log: ActionLog, clock: Callable[[], datetime]
) -> ServerActionDeps | None:
    """What the server actions of the answer to `question` reach: the channel it was asked in (a server's text channel
    or thread; None elsewhere), and the message it replies to there."""
    channel, guild = question.channel, question.guild
    if guild is None or not isinstance(channel, discord.TextChannel | discord.Thread):
        return None
    message = question.message
    reference = None if message is None else message.reference
    replied_to = reference.message_id if reference is not None and reference.channel_id == channel.id else None
    return ServerActionDeps(
        channel.id, ChannelOnDiscord(channel, guild, question.asker_id), switches, log, clock, replied_to
    )
