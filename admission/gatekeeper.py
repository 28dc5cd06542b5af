"""The one admission path: whether, and when, a model call may be made for a message, a member or a channel."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Protocol

import discord

from admission.bots import BotGate
from budget import UsageLedger, next_utc_midnight
from commands import discord_time
from config import Settings
from conversation import Decision, MessageRecord, utc_now
from discord_io import reply_mentions
from limits import TokenBucket, WaitingLine

log = logging.getLogger("parley")

# Decisions the admission limits make instead of the decider: the message is recorded, not answered.
MEMBER_RATE_LIMITED = Decision(False, "member_rate_limited", "limit")
SUPERSEDED = Decision(False, "superseded", "limit")
QUEUE_FULL = Decision(False, "queue_full", "limit")
SLOW_DOWN = "Slow down a little: I can answer you again {when}. Until then I'll stay quiet."
# Said once per server and UTC day, then silence: repeating it would spend the channel's patience instead.
BUDGET_NOTICE = "This server has used up Parley's token budget for today, so I'll stay quiet until it resets {reset}."
SERVER_BUDGET = Decision(False, "server_budget", "budget")


@dataclass
class Turn:
    line: WaitingLine
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    waiting: int = 0


class AdmissionClient(Protocol):
    """The client, as admission needs it: noting a decision it makes, and posting its one-line notices."""

    def decided_here(self, record: MessageRecord, decision: Decision) -> None: ...

    async def deliver(
        self, message: discord.Message, text: str, where: discord.Thread | None = None
    ) -> list[discord.Message]: ...


class Gatekeeper:
    """Every model call Parley makes is admitted here: the bot gate, member rates, channel turns, server budgets."""

    def __init__(self, settings: Settings, usage: UsageLedger, client: AdmissionClient) -> None:
        self.settings = settings
        self.usage = usage
        self.client = client
        self.bot_gate = BotGate(settings.answer_bot_ids, settings.max_bot_exchanges)
        self.turns: dict[int, Turn] = {}
        self.member_rates = (
            TokenBucket(settings.member_answers_per_hour, settings.member_answer_burst, clock=utc_now)
            if settings.member_answers_per_hour
            else None
        )
        self.answer_slots = asyncio.Semaphore(settings.max_concurrent_answers)
        # The UTC day each server was last told its budget is spent.
        self._budget_notices: dict[int, date] = {}

    def within_rate(self, guild_id: int, member_id: int) -> bool:
        """Whether the author may be answered now, without spending their answer: a member past their rate gets no
        thread, only the channel's one-line notice."""
        rates = self.member_rates
        if rates is None:
            return True
        member = (guild_id, member_id)
        if not rates.take(member).admitted:
            return False
        rates.give_back(member)
        return True

    async def say_slow_down(self, message: discord.Message, retry_at: datetime) -> None:
        """Tell a member once, replying to them, when Parley answers them again.

        Not recorded in the conversation: it is no turn of Parley's for the model to see or follow up on.
        """
        # Rounded up: the notice must never name a moment before the member can ask.
        when = f"<t:{math.ceil(retry_at.timestamp())}:R>"
        try:
            await message.channel.send(
                SLOW_DOWN.format(when=when),
                reference=message.to_reference(fail_if_not_exists=False),
                allowed_mentions=reply_mentions(message.author),
            )
        except discord.HTTPException as error:
            log.warning("could not tell a member in channel %s to slow down: %s", message.channel.id, error)

    @contextlib.asynccontextmanager
    async def channel_turn(self, channel_id: int) -> AsyncIterator[None]:
        """One message of a channel at a time, first come first served; idle channels hold no lock."""
        turn = self.turns[channel_id]
        turn.waiting += 1
        try:
            async with turn.lock:
                yield
        finally:
            turn.waiting -= 1
            if turn.waiting == 0:
                del self.turns[channel_id]

    def server_budget_spent(self, guild_id: int) -> bool:
        """Whether the server has used SERVER_TOKENS_PER_DAY today (never, when that is 0)."""
        budget = self.settings.server_tokens_per_day
        return budget > 0 and self.usage.server_tokens(guild_id) >= budget

    async def decline_over_budget(
        self, guild_id: int, message: discord.Message, record: MessageRecord, where: discord.Thread | None = None
    ) -> None:
        """Leave a message unanswered because its server's budget is spent: say so the first time today only."""
        self.client.decided_here(record, SERVER_BUDGET)
        day = self.usage.day
        if self._budget_notices.get(guild_id) == day:
            return
        self._budget_notices[guild_id] = day
        log.warning(
            "server %s has used its %d tokens for %s; answers pause until the next UTC midnight",
            guild_id,
            self.settings.server_tokens_per_day,
            day,
            extra={"guild_id": guild_id},
        )
        await self.client.deliver(message, BUDGET_NOTICE.format(reset=discord_time(next_utc_midnight(day))), where)
