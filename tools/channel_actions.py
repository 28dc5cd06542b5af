"""What a server action (tools/server_actions.py) needs of the world: the Discord calls in the answer's channel, which
admins turned off, and the audit log, each a narrow Protocol, so the tools never import discord.

edge/server_actions.py makes the Discord calls, bound to one answer's server, channel and asker; action_switches.py
keeps what admins turned off; the archive keeps the audit log (archive/moderation.py). Which permission each action
takes, of the asker and of Parley, is here: the one table the tools and the docs read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol, get_args

from records import ModerationAction

# The server actions by the name the audit log and `/parley-admin actions` give them.
ServerAction = Literal["pin", "unpin", "thread", "slowmode", "delete", "timeout"]
SERVER_ACTIONS: tuple[ServerAction, ...] = get_args(ServerAction)


@dataclass(frozen=True)
class Needs:
    """The permissions an action takes in the channel, by discord.py's names: the asker must hold one of `asker`'s,
    Parley one of `parley`'s (what Discord itself checks when Parley makes the call)."""

    asker: tuple[str, ...]
    parley: tuple[str, ...]


NEEDS: dict[ServerAction, Needs] = {
    "pin": Needs(("manage_messages",), ("pin_messages",)),
    "unpin": Needs(("manage_messages",), ("pin_messages",)),
    "delete": Needs(("manage_messages",), ("manage_messages",)),
    "thread": Needs(("manage_threads", "create_public_threads"), ("create_public_threads",)),
    "slowmode": Needs(("manage_channels",), ("manage_channels",)),
    "timeout": Needs(("moderate_members",), ("moderate_members",)),
}


def permission_name(permission: str) -> str:
    """A permission as Discord's settings show it: `manage_messages` -> Manage Messages."""
    return permission.replace("_", " ").title()


class ActionRefused(Exception):
    """Discord would not do it (the message is gone, or not this channel's; Parley ranks below the member): the
    message is one line for the model to relay."""


class ChannelActions(Protocol):
    """Discord's side of the server actions in one answer's channel, for its asker (edge/server_actions.py).

    The permissions are asked when an action runs, never kept from when the answer began. A message id is looked up
    in this channel alone: another channel's is not found. Each call raises `ActionRefused` when Discord refuses.
    """

    async def asker_permissions(self) -> frozenset[str]: ...
    async def own_permissions(self) -> frozenset[str]: ...
    async def pin(self, message_id: int, reason: str) -> None: ...
    async def unpin(self, message_id: int, reason: str) -> None: ...
    async def delete(self, message_id: int, reason: str) -> None: ...
    async def create_thread(self, name: str, message_id: int | None, reason: str) -> int: ...
    async def set_slowmode(self, seconds: int, reason: str) -> None: ...
    async def time_out(self, member_id: int, until: datetime, reason: str) -> None: ...


class ActionSwitches(Protocol):
    """Which server actions a server's admins turned off (tools/action_switches.py)."""

    async def turned_off(self, guild_id: int) -> frozenset[str]: ...


class ActionLog(Protocol):
    """The audit log every executed action lands in (archive/moderation.py)."""

    async def record_action(self, action: ModerationAction) -> object: ...


@dataclass
class ServerActionDeps:
    """What one answer's server actions reach: the channel the question was asked in (`channel_id`, on Discord), the
    server's switches, the audit log and the clock, and the message the question replies to there (the one "pin that"
    means).

    `offered_off` is what the switches said when the tools were first offered in this answer, read once; an action
    reads them again when it runs.
    """

    channel_id: int
    discord: ChannelActions
    switches: ActionSwitches
    log: ActionLog
    clock: Callable[[], datetime]
    replied_to: int | None = None
    offered_off: frozenset[str] | None = None

    async def off_when_offered(self, guild_id: int) -> frozenset[str]:
        if self.offered_off is None:
            self.offered_off = await self.switches.turned_off(guild_id)
        return self.offered_off
