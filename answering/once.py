"""Every message is decided and answered at most once, however many times it reaches Parley.

The gateway delivers at least once (a resumed session may replay a MESSAGE_CREATE the client had), catch-up reads
back from Discord's history what the gateway may have delivered too (answering/gap.py), and two processes sharing one
archive may both be handed a message (across a reshard, or both catching up one gap). Every one of these deliveries
comes to `MessagePipeline.arrived`, which claims the message here before anything decides it:

- in this process first, with no await between the check and the claim, so two deliveries racing here cannot
  both pass;
- then in the archive, where the first process to commit a claim takes it (archive.Claims); an archive no other
  process writes (SQLite) answers at once for a message newer than every claim, and commits the claim meanwhile.

Only a message that could be answered (it addresses Parley, or its channel has a conversation) is claimed: chatter
elsewhere is neither decided nor answered however often it comes, and would only fill the memory.

A second delivery is recognised and neither decided nor logged again. A claim whose taking-up fails (Discord, the
model, the archive) is given back, so a later delivery may answer the message. A claim the archive cannot store
leaves the message as if it had not come (another process could be answering it), so a later delivery is taken up
whole; one held by a process that died mid-answer stays until the retention, and the message unanswered rather than
risk two answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import uuid
from collections import deque
from collections.abc import AsyncIterator
from datetime import datetime, timedelta

from archive import ArchiveWriteFailed
from archive.holder import ArchiveHolder
from conversation import utc_now

log = logging.getLogger("parley.once")

# How long this process remembers a message it claimed: longer than any resumed session's replay or catch-up's
# answering window (GAP_ANSWER_MINUTES). The archive's claims outlast it, but answer True to their own claimant.
REMEMBERED = timedelta(days=1)


class Claimed(enum.Enum):
    """What claiming a message found."""

    FIRST = "first"  # this delivery takes the message up
    AGAIN = "again"  # this process has it already: a delivery of a message decided or being decided here
    ELSEWHERE = "elsewhere"  # another process has it
    UNSTORED = "unstored"  # the archive could not store the claim: another process might have it, so it is left


class MessageClaims:
    """The messages this process has claimed to decide, here and in the archive it shares."""

    def __init__(self, holder: ArchiveHolder) -> None:
        self.holder = holder
        # This process, in the archive's claims, unique per run: a claim another run left is never taken for ours.
        self.claimant = uuid.uuid4().hex
        self._held: set[int] = set()
        self._order: deque[tuple[datetime, int]] = deque()  # `_held` with when each was claimed, oldest first
        # Per channel, deliveries leave `claim` in the order they came (asyncio's locks are fair), so an archive's
        # round trip never lets a later message of a channel reach its turn first; channels never wait for each
        # other. A channel's lock is kept while a claim in it is under way or waiting (`_users`), then dropped.
        self._in_order: dict[int, asyncio.Lock] = {}
        self._users: dict[int, int] = {}

    async def claim(self, message_id: int, *, channel_id: int, answerable: bool) -> Claimed:
        """Claim the message of `channel_id` for this process if it could be answered (`answerable`), here and in
        the archive.

        One that could not be (chatter in a channel without a conversation) is neither decided nor answered, on
        any delivery: it is not claimed, so that this process remembers only the few that matter.
        """
        if not answerable and channel_id not in self._in_order:
            return Claimed.FIRST  # no earlier delivery of the channel is in `claim`: nothing to keep its turn behind
        async with self._channel_order(channel_id):
            if not answerable:
                return Claimed.FIRST
            if not self._claim_here(message_id):
                log.debug("message %s delivered again: taken up already", message_id)
                return Claimed.AGAIN
            return await self._claim_shared(message_id)

    @contextlib.asynccontextmanager
    async def _channel_order(self, channel_id: int) -> AsyncIterator[None]:
        """The channel's turn to leave `claim`, in the order its deliveries came."""
        lock = self._in_order.setdefault(channel_id, asyncio.Lock())
        self._users[channel_id] = self._users.get(channel_id, 0) + 1
        try:
            async with lock:
                yield
        finally:
            self._users[channel_id] -= 1
            if not self._users[channel_id]:
                del self._users[channel_id], self._in_order[channel_id]

    async def _claim_shared(self, message_id: int) -> Claimed:
        try:
            claimed = await self.holder.archive.claim_message(message_id, self.claimant, utc_now())
        except ArchiveWriteFailed as error:
            # Unclaimed, another process sharing the archive could answer it too: never answer twice.
            log.warning("message %s left undecided: it could not be claimed (%s)", message_id, error)
            self._forget(message_id)
            return Claimed.UNSTORED
        if not claimed:
            log.info("message %s is taken up by another process", message_id)
            return Claimed.ELSEWHERE
        return Claimed.FIRST

    async def give_back(self, message_id: int) -> None:
        """Release a claim whose taking-up failed, so that a later delivery of the message may take it."""
        if message_id not in self._held:
            return  # never claimed: it could not be answered
        self._forget(message_id)
        await self.holder.archive.release_message(message_id, self.claimant)

    def _claim_here(self, message_id: int) -> bool:
        if message_id in self._held:
            return False
        now = utc_now()
        while self._order and self._order[0][0] < now - REMEMBERED:
            self._held.discard(self._order.popleft()[1])
        self._held.add(message_id)
        self._order.append((now, message_id))
        return True

    def _forget(self, message_id: int) -> None:
        self._held.discard(message_id)
        # `_order` keeps the entry until it is old: the set alone says what is held now.
