"""Which server actions a server's admins turned off (`/parley-admin actions off <action>`), kept in the archive.

Each server's set is one of the archive's small named values, read again whenever an action runs, so a switch
turned off while a call waits for its asker's Approve holds, in every process sharing the archive.
"""

from __future__ import annotations

from archive import StateStore
from tools.channel_actions import SERVER_ACTIONS


def _state_name(guild_id: int) -> str:
    return f"server_actions_off:{guild_id}"


class ArchivedSwitches:
    """The switches of every server, kept in `state` (the archive's `StateStore`)."""

    def __init__(self, state: StateStore) -> None:
        self.state = state

    async def turned_off(self, guild_id: int) -> frozenset[str]:
        stored = await self.state.get_state(_state_name(guild_id)) or ""
        return frozenset(name for name in stored.split(",") if name in SERVER_ACTIONS)

    async def switch(self, guild_id: int, action: str, *, on: bool) -> frozenset[str]:
        """Turn `action` on or off in the server; the actions turned off there afterwards."""
        off = await self.turned_off(guild_id)
        off = off - {action} if on else off | {action}
        await self.state.set_state(_state_name(guild_id), ",".join(name for name in SERVER_ACTIONS if name in off))
        return off
