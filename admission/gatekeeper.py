"""The one admission path: whether, and when, a model call may be made for a message, a member or a channel."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import AsyncIterator, Callable, Collection
from dataclasses import dataclass, field
from datetime import date, datetime

import discord

from admission.allowances import Allowances, LocalAllowances, SharedAllowances
from admission.bots import BotGate
from admission.declined import Declined, Notice
from admission.optout import OPTED_OUT, OPTED_OUT_REFUSAL, OptOuts, OptOutTables
from admission.spending import Refused, Spending
from archive.allowances import PostgresAllowances
from config import Settings
from conversation import utc_now
from deciding.decider import JudgeCall
from discord_io import discord_time, guild_id_of
from limits import Admission, MemberLimits, Rate, WaitingLine, limits_for
from records import Decision, MessageRecord
from tools.approval import holding
from usage.budget import UsageLedger, next_utc_midnight

log = logging.getLogger("parley")

# Decisions the admission limits make instead of the decider: the message is recorded, not answered.
MEMBER_RATE_LIMITED = Decision(False, "member_rate_limited", "limit")
# The same, past the rate a role of the member's gives them (ROLE_LIMITS), and past that role's tokens a day.
ROLE_RATE_LIMITED = Decision(False, "role_rate_limited", "limit")
ROLE_TOKEN_BUDGET = Decision(False, "role_token_budget", "limit")
SUPERSEDED = Decision(False, "superseded", "limit")
QUEUE_FULL = Decision(False, "queue_full", "limit")
SLOW_DOWN = "Slow down a little: I can answer you again {when}. Until then I'll stay quiet."
ROLE_TOKENS_NOTICE = (
    "You have used the share of Parley's tokens your role gives you today, so I'll stay quiet with you until it"
    " resets {reset}."
)
# Said once per server and UTC day, then silence: repeating it would spend the channel's patience instead.
BUDGET_NOTICE = "This server has used up Parley's token budget for today, so I'll stay quiet until it resets {reset}."
SERVER_BUDGET = Decision(False, "server_budget", "budget")
# What the member who clicked Regenerate is told, only them, when it is not admitted.
REGENERATE_SLOW_DOWN = "Slow down a little: I can write an answer for you again {when}."
REGENERATE_OVER_BUDGET = "This server has used up Parley's token budget for today; I can write again {reset}."
REGENERATE_OVER_ROLE_TOKENS = "You have used your role's share of Parley's tokens for today; I can write again {reset}."
# What a member is told, once, when an operation under way for them (a catch-up's parts, an answer's tool rounds)
# stops at a budget before its next model call.
STOPPED_AT_ROLE_TOKENS = (
    "I stopped there: you have used the share of Parley's tokens your role gives you today; it resets {reset}."
)
STOPPED_AT_SERVER_BUDGET = (
    "I stopped there: this server has used up Parley's token budget for today; it resets {reset}."
)
# What a member is told, as the whole answer, when an image would pass a daily image limit (no image model is called).
MEMBER_IMAGES = "You've had your {limit} images for today, so I can't make another; more {reset}."
SERVER_IMAGES = "This server has had its {limit} images for today, so I can't make another; more {reset}."
NO_IMAGES = "I don't make images in this server."
# Conversations can end by the thousand at once (a restart, a sweep): their summaries take turns,
# so neither the model provider nor the process's memory sees them all at the same time.
SUMMARIES_AT_ONCE = 4


@dataclass
class _Turn:
    """A channel's turn: its lock, how many hold or await it, and the mentions of Parley waiting in it."""

    line: WaitingLine
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    waiting: int = 0


_ADMITTED = Admission(True)


def _rounded_up(moment: datetime) -> str:
    """`moment` as a Discord timestamp, rounded up: a notice must never name a moment before the member can ask."""
    return f"<t:{math.ceil(moment.timestamp())}:R>"


class Gatekeeper:
    """Every model call Parley makes is admitted here: the bot gate, member and role limits, channel turns, server
    budgets.

    A member's request (an answer, a Regenerate) spends one of their answers (MEMBER_ANSWERS_PER_HOUR, or their
    roles' ROLE_LIMITS, which also bound their tokens a day), waits its channel's turn (at most CHANNEL_QUEUE_LIMIT
    members' mentions wait) and is refused once the server has spent SERVER_TOKENS_PER_DAY. An operation that makes
    several model calls (an answer's tool rounds, a catch-up's or a digest's parts) asks the budgets again before
    each of them (`spending`, `call_refusal`), so they hold call by call. Answers and tokens are counted by
    `allowances`: in this process, or in a Postgres archive every process shares (`count_in`). The judge runs
    inside the turn of the message it weighs and is skipped on a spent budget. Summaries are asked for by no
    member, so they spend no member's rate; they still wait for their channel's turn (never beside an answer there)
    and are skipped on a spent budget.
    """

    def __init__(
        self,
        settings: Settings,
        usage: UsageLedger,
        *,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self.settings = settings
        self.usage = usage
        self.bot_gate = BotGate(settings.answer_bot_ids, settings.max_bot_exchanges)
        # The members who opted out are never admitted: the message path passes them over (answering.pipeline).
        self.optouts = OptOuts()
        self._turns: dict[int, _Turn] = {}
        self.default_rate = Rate(settings.member_answers_per_hour, settings.member_answer_burst)
        # In this process until `count_in` moves the count to a Postgres archive that other processes share.
        self.allowances: Allowances = LocalAllowances(usage, clock)
        self._answer_slots = asyncio.Semaphore(settings.max_concurrent_answers)
        self._summary_slots = asyncio.Semaphore(SUMMARIES_AT_ONCE)
        # The UTC day each server was last told its budget is spent, and each member their role's tokens are.
        self._budget_notices: dict[int, date] = {}
        self._token_notices: dict[tuple[int, int], date] = {}

    async def attach(self, archive: OptOutTables) -> None:
        """What admission keeps in the archive, once the other processes' changes are followed: the opt-outs (read
        now, and stored there from now on)."""
        await self.optouts.attach(archive)

    def count_in(self, archive: object) -> None:
        """Count members' answers and the day's tokens in `archive` from now on if other processes may share it
        (Postgres); a SQLite archive has one process, which keeps counting in memory."""
        if isinstance(archive, PostgresAllowances):
            self.allowances = SharedAllowances(archive, self.usage, self.allowances.clock)

    # -- A member's rate and tokens, by default or by role --

    def limits_of(self, role_ids: Collection[int]) -> MemberLimits:
        """The limits of a member with these roles (ROLE_LIMITS, else MEMBER_ANSWERS_PER_HOUR and its burst)."""
        return limits_for(role_ids, self.default_rate, self.settings.role_limits)

    async def take(self, guild_id: int, member_id: int, role_ids: Collection[int] = ()) -> Admission:
        """Spend one of the member's answers in the server, if they have one left."""
        rate = self.limits_of(role_ids).rate
        if rate.per_hour == 0:
            return _ADMITTED
        return await self.allowances.take(guild_id, member_id, rate)

    async def give_back(self, guild_id: int, member_id: int, role_ids: Collection[int] = ()) -> None:
        """Return an answer taken for a model call that was not made after all."""
        rate = self.limits_of(role_ids).rate
        if rate.per_hour:
            await self.allowances.give_back(guild_id, member_id, rate)

    async def tokens_spent(
        self, guild_id: int, member_id: int, role_ids: Collection[int] = (), uncounted: int = 0
    ) -> bool:
        """Whether the member has used the tokens a day their roles give them (never, without such a rule), with
        `uncounted` tokens an operation under way has spent and not yet counted."""
        allowed = self.limits_of(role_ids).tokens_per_day
        return allowed > 0 and await self.allowances.member_tokens(guild_id, member_id) + uncounted >= allowed

    async def within_rate(self, message: discord.Message, roles: Collection[int]) -> bool:
        """Whether the author (holding `roles`) may be answered now, without spending their answer: a member past
        their rate or their role's tokens gets no thread, only the channel's one-line notice."""
        guild_id, author = guild_id_of(message), message.author.id
        if await self.tokens_spent(guild_id, author, roles) or not (await self.take(guild_id, author, roles)).admitted:
            return False
        await self.give_back(guild_id, author, roles)
        return True

    async def admit_member(
        self, guild_id: int, message: discord.Message, record: MessageRecord, addressed: bool, roles: Collection[int]
    ) -> Declined | None:
        """Spend one of the author's answers before their message is decided, so a member over their limits costs no
        judge call either; None admits them. Refused (`member_rate_limited`, `role_rate_limited`,
        `role_token_budget`), the message is declined and, if it `addressed` Parley, its author told once why and
        when to come back. `roles`: those the author holds, as the access gate learnt them (`AccessGate.asker`)."""
        author = record.author_id
        limits = self.limits_of(roles)
        if await self.tokens_spent(guild_id, author, roles):
            if not (addressed and self._first_token_notice(guild_id, author)):
                return Declined(ROLE_TOKEN_BUDGET)
            reset = discord_time(next_utc_midnight(self.usage.day))
            return Declined(ROLE_TOKEN_BUDGET, Notice(message, ROLE_TOKENS_NOTICE.format(reset=reset)))
        admission = await self.take(guild_id, author, roles)
        if admission.admitted:
            return None
        decision = ROLE_RATE_LIMITED if limits.by_role else MEMBER_RATE_LIMITED
        retry_at = admission.retry_at
        if addressed and retry_at is not None and await self.allowances.first_warning(guild_id, author, limits.rate):
            return Declined(decision, Notice(message, SLOW_DOWN.format(when=_rounded_up(retry_at))))
        return Declined(decision)

    def _first_token_notice(self, guild_id: int, member_id: int) -> bool:
        """True once per member and UTC day: their role's tokens are spent until midnight, which one notice says."""
        day = self.usage.day
        if self._token_notices.get((guild_id, member_id)) == day:
            return False
        self._token_notices = {key: told for key, told in self._token_notices.items() if told == day}
        self._token_notices[guild_id, member_id] = day
        log.info("member %s has used their role's tokens for %s in server %s", member_id, day, guild_id)
        return True

    # -- A channel's turn and its line of waiting mentions --

    def idle(self, channel_id: int) -> bool:
        """Whether nothing in the channel holds or awaits its turn."""
        return channel_id not in self._turns

    def join_line(self, channel_id: int, record: MessageRecord) -> bool:
        """Put a mention of Parley in its channel's line; False if the line is full (then it is not answered)."""
        return self._turn_of(channel_id).line.join(record.message_id, record.author_id).admitted

    def leave_line(self, channel_id: int, message_id: int) -> bool:
        """Take a mention out of the line for its turn; False if the same member's later one superseded it."""
        return self._turn_of(channel_id).line.leave(message_id)

    def _turn_of(self, channel_id: int) -> _Turn:
        turn = self._turns.get(channel_id)
        if turn is None:
            turn = self._turns[channel_id] = _Turn(WaitingLine(self.settings.channel_queue_limit))
        return turn

    def answer_slot(self) -> contextlib.AbstractAsyncContextManager[None]:
        """One of MAX_CONCURRENT_ANSWERS, held while answering; let go of while the answer waits for its asker's
        approval (tools.approval.stepped_aside)."""
        return holding(self._answer_slots)

    @contextlib.asynccontextmanager
    async def channel_turn(self, channel_id: int, *, let_go_for_approval: bool = True) -> AsyncIterator[None]:
        """One model call of a channel at a time, first come first served; idle channels hold no lock. The turn is
        let go of while the answer waits for its asker's approval (tools.approval.stepped_aside), unless not
        `let_go_for_approval`."""
        turn = self._turn_of(channel_id)
        turn.waiting += 1
        try:
            async with holding(turn.lock, let_go_for_approval=let_go_for_approval):
                yield
        finally:
            turn.waiting -= 1
            if turn.waiting == 0:
                del self._turns[channel_id]

    # -- The server's budget --

    async def server_budget_spent(self, guild_id: int, uncounted: int = 0) -> bool:
        """Whether the server has used SERVER_TOKENS_PER_DAY today (never, when that is 0), with `uncounted` tokens
        an operation under way has spent and not yet counted."""
        budget = self.settings.server_tokens_per_day
        return budget > 0 and await self.allowances.server_tokens(guild_id) + uncounted >= budget

    def decline_over_budget(
        self, guild_id: int, message: discord.Message, where: discord.Thread | None = None
    ) -> Declined:
        """Leave a message unanswered because its server's budget is spent: its notice (in `where`, the thread opened
        on it, if given) the first time today only."""
        day = self.usage.day
        if self._budget_notices.get(guild_id) == day:
            return Declined(SERVER_BUDGET)
        self._budget_notices[guild_id] = day
        log.warning(
            "server %s has used its %d tokens for %s; answers pause until the next UTC midnight",
            guild_id,
            self.settings.server_tokens_per_day,
            day,
            extra={"guild_id": guild_id},
        )
        line = BUDGET_NOTICE.format(reset=discord_time(next_utc_midnight(day)))
        return Declined(SERVER_BUDGET, Notice(message, line, where, kept=True))

    # -- The entry points that are no answer to a message --

    async def judged(self, guild_id: int, call: JudgeCall) -> Decision | Declined:
        """The judge's decision (which the decider notes), made in the turn its caller holds; on a spent budget it
        is not asked, and the message is declined."""
        if await self.server_budget_spent(guild_id):
            call.close()  # never started: no model call, nothing to clean up
            return Declined(SERVER_BUDGET)
        return await call

    async def regenerate_refusal(self, guild_id: int, member_id: int, role_ids: Collection[int] = ()) -> str | None:
        """Why `member_id` may not have an answer regenerated now, in one line for them alone; None admits them,
        spending one of their answers (`give_back` returns it if no model call follows)."""
        refused = await self.command_refusal(guild_id, member_id, role_ids)
        return None if refused is None else refused.line

    async def command_refusal(self, guild_id: int, member_id: int, role_ids: Collection[int] = ()) -> Refused | None:
        """`regenerate_refusal` with the decision it makes, for `/parley why`; None admits the member, spending one
        of their answers."""
        if self.optouts.opted_out(guild_id, member_id):
            return Refused(OPTED_OUT, OPTED_OUT_REFUSAL)
        reset = discord_time(next_utc_midnight(self.usage.day))
        if await self.server_budget_spent(guild_id):
            return Refused(SERVER_BUDGET, REGENERATE_OVER_BUDGET.format(reset=reset))
        if await self.tokens_spent(guild_id, member_id, role_ids):
            return Refused(ROLE_TOKEN_BUDGET, REGENERATE_OVER_ROLE_TOKENS.format(reset=reset))
        limits = self.limits_of(role_ids)
        admission = await self.take(guild_id, member_id, role_ids)
        if admission.admitted:
            return None
        assert admission.retry_at is not None  # a refusal always says when a token is back
        decision = ROLE_RATE_LIMITED if limits.by_role else MEMBER_RATE_LIMITED
        return Refused(decision, REGENERATE_SLOW_DOWN.format(when=_rounded_up(admission.retry_at)))

    # -- Each model call of an operation under way --

    def spending(self, guild_id: int, member_id: int | None, role_ids: Collection[int] = ()) -> Spending:
        """The spending of one operation for `member_id` (None: asked for by no member, a digest's), which each of
        its model calls asks before it runs (`call_refusal`)."""
        roles = frozenset(role_ids)

        async def check(uncounted: int) -> Refused | None:
            return await self.call_refusal(guild_id, member_id, roles, uncounted)

        return Spending(check)

    async def call_refusal(
        self, guild_id: int, member_id: int | None, role_ids: Collection[int] = (), uncounted: int = 0
    ) -> Refused | None:
        """Why the next model call of an operation under way may not run: the server's SERVER_TOKENS_PER_DAY or the
        member's tokens a day (ROLE_LIMITS) reached, counting the operation's `uncounted` tokens; None admits it.

        The operation's member was admitted when it began (their rate is spent once per operation, here only the
        budgets are asked); a member stopped here was told, so their next mention today gets silence.
        """
        reset = discord_time(next_utc_midnight(self.usage.day))
        if await self.server_budget_spent(guild_id, uncounted):
            return Refused(SERVER_BUDGET, STOPPED_AT_SERVER_BUDGET.format(reset=reset))
        if member_id is None or not await self.tokens_spent(guild_id, member_id, role_ids, uncounted):
            return None
        self._first_token_notice(guild_id, member_id)
        return Refused(ROLE_TOKEN_BUDGET, STOPPED_AT_ROLE_TOKENS.format(reset=reset))

    # -- Images made --

    async def image_refusal(self, guild_id: int, member_id: int) -> str | None:
        """Claim one of today's images for the member (IMAGES_PER_MEMBER_PER_DAY, IMAGES_PER_SERVER_PER_DAY): None,
        and `image_done` ends the claim once the image is recorded; or the one line they are told instead."""
        per_member, per_server = self.settings.images_per_member_per_day, self.settings.images_per_server_per_day
        refused = await self.allowances.claim_image(guild_id, member_id, per_member, per_server)
        if refused is None:
            return None
        log.info("image for member %s in server %s refused: the %s's daily limit", member_id, guild_id, refused)
        limit = per_member if refused == "member" else per_server
        if limit == 0:
            return NO_IMAGES
        reset = _rounded_up(next_utc_midnight(self.usage.today()))
        return (MEMBER_IMAGES if refused == "member" else SERVER_IMAGES).format(limit=limit, reset=reset)

    async def images_left(self, guild_id: int, member_id: int) -> bool:
        """Whether the member and the server have an image left today, claiming none (the native image tool is
        offered only then, and what it draws is counted after the answer)."""
        if await self.image_refusal(guild_id, member_id) is not None:
            return False
        self.image_done(guild_id, member_id)
        return True

    def image_done(self, guild_id: int, member_id: int) -> None:
        """End an image's claim: recorded in the usage ledger, or none was made."""
        self.allowances.release_image(guild_id, member_id)

    async def member_refusal(self, guild_id: int, member_id: int, role_ids: Collection[int] = ()) -> str | None:
        """`regenerate_refusal` for any model call a member asks for by command (a catch-up): the same limits, the
        same budget, the same one line."""
        return await self.regenerate_refusal(guild_id, member_id, role_ids)

    async def unasked_admitted(self, guild_id: int, what: str) -> bool:
        """Whether work no member asked for (`what`: a channel's digest, upkeep/digests.py; a scheduled prompt,
        answering/scheduled.py) may make its next model call: it spends no member's rate; it is refused, with a log
        line saying why, once the server's budget is spent."""
        if await self.call_refusal(guild_id, None) is not None:
            log.info("%s refused: server %s has spent its token budget today", what, guild_id)
            return False
        return True

    @contextlib.asynccontextmanager
    async def summary_call(self, guild_id: int, channel_id: int) -> AsyncIterator[bool]:
        """Hold a summary's place (one of SUMMARIES_AT_ONCE, then its channel's turn); yields whether the server's
        budget admits its model call."""
        async with self._summary_slots, self.channel_turn(channel_id):
            spent = await self.server_budget_spent(guild_id)
            if spent:
                log.info("summary for channel %s skipped: server %s has spent its budget today", channel_id, guild_id)
            yield not spent
