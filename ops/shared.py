"""In step with the other processes sharing a Postgres archive (issue 13).

Each process reads the shared settings into memory at start: profiles, /parley-admin forget markers, the channels
where a mention opens a thread, the threads Parley opened, the members who opted out, and the servers' access
lists; and it keeps whether each server has knowledge documents once asked. Another process's change reaches this
one's memory as Postgres announces it (archive/changes.py): the changed channel's (or member's, or server's) rows
are read again (a server's documents when next asked), or all of them after the listening connection was lost. With
SQLite there is one process, and nothing to follow.

The conversations kept in the archive are each process's own: a process takes up at start only those of the
servers on its shards.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from archive import ChannelSettingsStore, Lifecycle, MessageLog
from profiles.channels import Profiles

if TYPE_CHECKING:
    from archive.changes import ChangeListener


class Reloaded(Protocol):
    """What keeps a shared table in memory and reads it again from the archive: by one key, or whole."""

    async def reload(self, key: int) -> None: ...

    async def reload_all(self) -> None: ...


class KeptPerServer(Protocol):
    """What keeps something of each server's as last read, and reads it again when next asked once told to forget it
    (the knowledge base's "has documents")."""

    def forget_cached(self, guild_id: int | None = None) -> None: ...


class SharedSettings:
    """This process's copies of the shared settings, and how to read each again from the archive.

    `forgotten(channel_id)` is called when another process's /parley-admin forget moved a channel's marker on, so
    the channel's live conversation here ends as it would have in that process.
    """

    def __init__(
        self,
        archive: ChannelSettingsStore,
        profiles: Profiles,
        forget_markers: dict[int, int],
        thread_channels: set[int],
        own_threads: dict[int, int],
        forgotten: Callable[[int], None],
        opt_outs: Reloaded,
        access: Reloaded | None = None,
        knowledge: KeptPerServer | None = None,
    ) -> None:
        self.archive = archive
        self.profiles = profiles
        self.forget_markers = forget_markers
        self.thread_channels = thread_channels
        self.own_threads = own_threads
        self.forgotten = forgotten
        # The members who opted out or erased their data (admission.optout), keyed by member.
        self.opt_outs = opt_outs
        # The servers' access lists (admission.access_lists), keyed by server.
        self.access = access
        # Whether each server has knowledge documents (knowledge.base), keyed by server.
        self.knowledge = knowledge

    async def reread(self, table: str, key: int) -> None:
        """Read the rows of `table` for the channel (or server, thread or member) `key` again."""
        if table == "profile_settings":
            await self.profiles.reload(key)
        elif table == "access_entries":
            if self.access is not None:
                await self.access.reload(key)
        elif table == "forget_markers":
            self._take_marker(key, await self.archive.forget_marker(key))
        elif table == "thread_settings":
            if await self.archive.threads_enabled(key):
                self.thread_channels.add(key)
            else:
                self.thread_channels.discard(key)
        elif table in ("opt_outs", "erasures"):
            await self.opt_outs.reload(key)
        elif table == "knowledge_documents":
            if self.knowledge is not None:
                self.knowledge.forget_cached(key)
        elif table == "own_threads":
            guild_id = await self.archive.own_thread_guild(key)
            if guild_id is not None:
                self.own_threads[key] = guild_id
            else:
                self.own_threads.pop(key, None)

    async def reread_all(self) -> None:
        """Read every shared setting again: changes were announced while this process was not listening."""
        await self.profiles.reload_all()
        await self.opt_outs.reload_all()
        if self.access is not None:
            await self.access.reload_all()
        if self.knowledge is not None:
            self.knowledge.forget_cached()
        markers = await self.archive.all_forget_markers()
        for channel_id in self.forget_markers.keys() - markers.keys():
            self._take_marker(channel_id, None)
        for channel_id, marker in markers.items():
            self._take_marker(channel_id, marker)
        threads = await self.archive.thread_channels()
        self.thread_channels.intersection_update(threads)
        self.thread_channels.update(threads)
        own = await self.archive.own_threads()
        for thread_id in self.own_threads.keys() - own.keys():
            del self.own_threads[thread_id]
        self.own_threads.update(own)

    def _take_marker(self, channel_id: int, marker: int | None) -> None:
        known = self.forget_markers.get(channel_id)
        if marker is None:
            self.forget_markers.pop(channel_id, None)
        elif marker != known:
            self.forget_markers[channel_id] = marker
            if known is None or marker > known:
                self.forgotten(channel_id)


async def follow_other_processes(url: str, archive: Lifecycle, shared: SharedSettings) -> ChangeListener | None:
    """Listen for other processes' changes to the shared settings (Postgres only); None with SQLite.

    Call it before reading the settings, so that a change made meanwhile is either read or announced.

    Raises:
        DatabaseUrlError: the listening connection could not be opened; the message names the database.
    """
    if archive.dialect != "postgres":
        return None
    from archive.changes import ChangeListener  # asyncpg is loaded only for a Postgres archive

    listener = ChangeListener(url, shared.reread, shared.reread_all)
    await listener.start()
    return listener


async def channels_served_elsewhere(archive: MessageLog, shard_ids: frozenset[int], shard_count: int) -> set[int]:
    """The archived channels whose server is on none of `shard_ids`: another process serves them.

    Discord sends a server's events to shard `(guild_id >> 22) % shard_count`, and direct messages (server 0)
    to shard 0.
    """
    channels = await archive.archived_channels()
    return {channel_id for channel_id, guild_id in channels.items() if (guild_id >> 22) % shard_count not in shard_ids}
