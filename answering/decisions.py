"""Every decision to answer or stay silent, kept for `/parley why`: in memory, and in the archive when it is on."""

from __future__ import annotations

from collections.abc import Callable

from admission.optout import OptOuts
from archive.holder import ArchiveHolder
from deciding.journal import IDLE_REASON, DecisionJournal, LoggedDecision, newest_first
from records import Decision, MessageRecord


class DecisionLog:
    """The decider's listener, and the bot's own decisions (limits, budgets, refusals of commands) beside it."""

    def __init__(
        self, journal: DecisionJournal, stores: ArchiveHolder, optouts: OptOuts, guild_of: Callable[[int], int]
    ) -> None:
        self.journal = journal
        self.stores = stores
        self.optouts = optouts
        self.guild_of = guild_of

    def note(self, message: MessageRecord, decision: Decision) -> None:
        """The decider's listener: keep each decision for `/parley why`, in the archive too when it is on. A message
        by a member who opted out is kept as its placeholder, whatever path decided on it (a question asked by
        command is no message the pipeline veiled)."""
        if self.optouts.anyone:  # the channel's server, looked up for every message decided, only matters then
            message = self.optouts.veiled(self.guild_of(message.channel_id), message)
        entry = LoggedDecision.of(message, decision)
        self.journal.add(message.channel_id, entry)
        # Idle decisions stay in memory: archived, they would double the writes of a busy server
        # and crowd the conversation decisions out of the archive's recent_decisions.
        if decision.reason != IDLE_REASON:
            self.stores.archive.record_decision(
                channel_id=message.channel_id,
                message_id=message.message_id,
                author_id=message.author_id,
                author_name=entry.author,
                excerpt=entry.excerpt,
                responded=decision.respond,
                reason=decision.reason,
                tier=decision.tier,
                confidence=decision.confidence,
            )

    async def recent(self, channel_id: int, count: int) -> list[LoggedDecision]:
        """The channel's latest `count` decisions, newest first: this process's, and the archive's from before."""
        kept = {entry.message_id: entry for entry in self.journal.recent(channel_id)}
        for row in await self.stores.archive.recent_decisions(channel_id, count):
            kept.setdefault(row.message_id, LoggedDecision.from_archive(row))
        return newest_first(kept.values())[:count]
