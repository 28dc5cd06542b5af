"""What operators set per channel and Parley keeps in the archive: forget markers, thread settings, its threads."""

from __future__ import annotations

from dataclasses import dataclass, field

from archive import Archive


@dataclass
class ChannelSettings:
    """Shared by reference: the client, forgetting, threads and context loading read and change the same maps, and
    ops.shared.SharedSettings follows other processes' changes into them."""

    # Per channel, the message id its context starts after: set by /parley-admin forget.
    forget_markers: dict[int, int] = field(default_factory=dict)
    # The channels where an @mention opens a thread (`/parley-admin threads on`).
    thread_channels: set[int] = field(default_factory=set)
    # The threads Parley opened (by id, with their server's), in which every message is for Parley while open.
    own_threads: dict[int, int] = field(default_factory=dict)

    async def load(self, archive: Archive) -> None:
        """Take up what the archive keeps, when it opens."""
        self.forget_markers.update(await archive.all_forget_markers())
        self.thread_channels.update(await archive.thread_channels())
        self.own_threads.update(await archive.own_threads())
