"""The Gatekeeper as a unit: every model call's admission, with records, an injected clock and no bot."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from admission.allowances import SharedAllowances
from admission.declined import Declined
from admission.gatekeeper import (
    MEMBER_RATE_LIMITED,
    REGENERATE_OVER_BUDGET,
    REGENERATE_OVER_ROLE_TOKENS,
    REGENERATE_SLOW_DOWN,
    ROLE_RATE_LIMITED,
    ROLE_TOKEN_BUDGET,
    SERVER_BUDGET,
    Gatekeeper,
)
from admission.optout import OPTED_OUT, OPTED_OUT_REFUSAL
from records import Decision, MessageRecord
from usage.budget import UsageLedger

T0 = datetime(2026, 11, 25, 10, 0, tzinfo=UTC)
GUILD, CHANNEL, ALICE, BOB, CAROL = 11, 22, 33, 44, 55


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


def record(message_id: int, author_id: int = ALICE) -> MessageRecord:
    return MessageRecord(message_id, CHANNEL, author_id, "Alice", "hello", T0)


@pytest.fixture
def clock() -> Clock:
    return Clock()


def gatekeeper(make_settings, clock: Clock, usage: UsageLedger | None = None, **limits: Any):
    settings = make_settings(**{"member_answers_per_hour": 30, "member_answer_burst": 2, **limits})
    return Gatekeeper(settings, usage or UsageLedger(clock), clock=clock)


def spend(usage: UsageLedger, tokens: int) -> None:
    usage.record(GUILD, CHANNEL, ALICE, tokens, 0, model="test:model")


async def test_regenerate_spends_the_members_rate_and_says_when_to_retry(make_settings, clock) -> None:
    """Regenerate takes one of the clicker's answers; past the burst it is refused with the moment one is back,
    as a Discord timestamp rounded up; another member, or the same one later, is admitted."""
    keeper = gatekeeper(make_settings, clock)
    assert await keeper.regenerate_refusal(GUILD, ALICE) is None
    clock.now = T0 + timedelta(seconds=10.2)
    assert await keeper.regenerate_refusal(GUILD, ALICE) is None
    refusal = await keeper.regenerate_refusal(GUILD, ALICE)
    # 30 an hour: the first answer is back 120 s after it was taken.
    back = T0 + timedelta(seconds=120)
    assert refusal == REGENERATE_SLOW_DOWN.format(when=f"<t:{int(back.timestamp())}:R>")
    assert await keeper.regenerate_refusal(GUILD, BOB) is None
    clock.now = back + timedelta(seconds=1)
    assert await keeper.regenerate_refusal(GUILD, ALICE) is None


async def test_a_regenerate_that_makes_no_call_gives_the_answer_back(make_settings, clock) -> None:
    keeper = gatekeeper(make_settings, clock, member_answer_burst=1)
    assert await keeper.regenerate_refusal(GUILD, ALICE) is None
    await keeper.give_back(GUILD, ALICE)
    assert await keeper.regenerate_refusal(GUILD, ALICE) is None
    assert await keeper.regenerate_refusal(GUILD, ALICE) is not None


async def test_regenerate_on_a_spent_budget_is_refused_without_spending_the_rate(make_settings, clock) -> None:
    usage = UsageLedger(clock)
    keeper = gatekeeper(make_settings, clock, usage, server_tokens_per_day=100, member_answer_burst=1)
    spend(usage, 100)
    midnight = datetime(2026, 11, 26, tzinfo=UTC)
    assert await keeper.regenerate_refusal(GUILD, ALICE) == REGENERATE_OVER_BUDGET.format(
        reset=f"<t:{int(midnight.timestamp())}:R>"
    )
    assert await keeper.regenerate_refusal(GUILD + 1, ALICE) is None  # another server's budget is its own
    assert (await keeper.take(GUILD, ALICE)).admitted  # the refusal spent none of Alice's answers here


async def test_the_judge_is_not_called_on_a_spent_budget(make_settings, clock) -> None:
    """On a spent budget the judge's call is closed unstarted and the message declined `server_budget`, for the
    caller to note; otherwise its decision is the judge's."""
    usage = UsageLedger(clock)
    keeper = gatekeeper(make_settings, clock, usage, server_tokens_per_day=100)
    calls: list[int] = []
    yes = Decision(True, "judge_yes", "judge")

    async def judge(message_id: int) -> Decision:
        calls.append(message_id)
        return yes

    assert await keeper.judged(GUILD, judge(1)) is yes
    spend(usage, 100)
    assert await keeper.judged(GUILD, judge(2)) == Declined(SERVER_BUDGET)
    assert calls == [1]


async def test_a_member_over_their_rate_is_noted_and_not_admitted(make_settings, clock) -> None:
    keeper = gatekeeper(make_settings, clock, member_answer_burst=1)
    message = SimpleNamespace(author=SimpleNamespace(id=ALICE))
    assert await keeper.admit_member(GUILD, message, record(1), addressed=False, roles=frozenset()) is None
    # Declined, for the caller to note, and with no notice: the message did not address Parley.
    assert await keeper.admit_member(GUILD, message, record(2), addressed=False, roles=frozenset()) == Declined(
        MEMBER_RATE_LIMITED
    )


async def test_a_summary_waits_for_its_channels_turn(make_settings, clock) -> None:
    """A summary's model call never runs beside an answer in its channel: it takes the channel's turn after it."""
    keeper = gatekeeper(make_settings, clock)
    order: list[str] = []
    answering = asyncio.Event()
    finish_answer = asyncio.Event()

    async def answer() -> None:
        async with keeper.channel_turn(CHANNEL):
            answering.set()
            await finish_answer.wait()
            order.append("answer")

    async def summary() -> None:
        async with keeper.summary_call(GUILD, CHANNEL) as admitted:
            order.append(f"summary admitted={admitted}")

    answer_task = asyncio.create_task(answer())
    await answering.wait()
    summary_task = asyncio.create_task(summary())
    await asyncio.sleep(0)  # let the summary reach the channel's lock
    assert order == [] and not keeper.idle(CHANNEL)
    finish_answer.set()
    await asyncio.gather(answer_task, summary_task)
    assert order == ["answer", "summary admitted=True"]
    assert keeper.idle(CHANNEL)


async def test_a_summary_on_a_spent_budget_is_not_admitted(make_settings, clock) -> None:
    usage = UsageLedger(clock)
    keeper = gatekeeper(make_settings, clock, usage, server_tokens_per_day=100)
    spend(usage, 150)
    async with keeper.summary_call(GUILD, CHANNEL) as admitted:
        assert not admitted
    async with keeper.summary_call(GUILD + 1, CHANNEL) as admitted:
        assert admitted


async def test_the_line_keeps_one_mention_per_member_up_to_its_limit(make_settings, clock) -> None:
    keeper = gatekeeper(make_settings, clock, channel_queue_limit=1)
    assert keeper.idle(CHANNEL)
    assert keeper.join_line(CHANNEL, record(1, ALICE))
    assert not keeper.join_line(CHANNEL, record(2, BOB))  # full
    assert keeper.join_line(CHANNEL, record(3, ALICE))  # supersedes Alice's first
    async with keeper.channel_turn(CHANNEL):
        assert not keeper.leave_line(CHANNEL, 1)
        assert keeper.leave_line(CHANNEL, 3)
    assert keeper.idle(CHANNEL)


# Role ids as Discord makes them: ROLE_LIMITS takes nothing else.
NEWCOMERS, TRUSTED = 1187034472391798790, 1187034472391798791


async def test_a_roles_rate_stops_its_members_before_the_default_would(make_settings, clock) -> None:
    """Newcomers get 1 an hour: a newcomer's second Regenerate is refused with the hour's wait, while a member
    without the role still has the default burst of 2, and a newcomer who is also trusted has no limit."""
    keeper = gatekeeper(make_settings, clock, role_limits=f"{NEWCOMERS}:1:0,{TRUSTED}:0:0")
    assert await keeper.regenerate_refusal(GUILD, ALICE, {NEWCOMERS}) is None
    back = f"<t:{int((T0 + timedelta(hours=1)).timestamp())}:R>"
    assert await keeper.regenerate_refusal(GUILD, ALICE, {NEWCOMERS}) == REGENERATE_SLOW_DOWN.format(when=back)
    bob = [await keeper.regenerate_refusal(GUILD, BOB, {99}) for _ in range(3)]
    assert bob[:2] == [None, None] and bob[2] is not None
    assert [await keeper.regenerate_refusal(GUILD, CAROL, {NEWCOMERS, TRUSTED}) for _ in range(20)] == [None] * 20


async def test_a_roles_tokens_a_day_refuse_it_without_spending_the_rate(make_settings, clock) -> None:
    usage = UsageLedger(clock)
    keeper = gatekeeper(make_settings, clock, usage, role_limits=f"{NEWCOMERS}:0:100", member_answer_burst=1)
    spend(usage, 100)
    midnight = f"<t:{int(datetime(2026, 11, 26, tzinfo=UTC).timestamp())}:R>"
    assert await keeper.regenerate_refusal(GUILD, ALICE, {NEWCOMERS}) == REGENERATE_OVER_ROLE_TOKENS.format(
        reset=midnight
    )
    assert await keeper.tokens_spent(GUILD, ALICE, {NEWCOMERS})
    assert not await keeper.tokens_spent(GUILD, ALICE, ())  # without the role, the defaults: no token limit
    assert (await keeper.take(GUILD, ALICE)).admitted  # the refusal spent none of Alice's answers
    clock.now = T0 + timedelta(days=1)
    assert await keeper.regenerate_refusal(GUILD, ALICE, {NEWCOMERS}) is None  # a new UTC day


async def test_a_commands_refusal_carries_the_decision_why_shows(make_settings, clock) -> None:
    """`command_refusal` (/ask) refuses as Regenerate does, with the decision `/parley why` logs for it: the default
    rate, a role's rate, a role's tokens, the server's budget, an opt-out; None admits, spending an answer."""
    usage = UsageLedger(clock)
    keeper = gatekeeper(
        make_settings, clock, usage, member_answer_burst=1, role_limits=f"{NEWCOMERS}:1:0,{TRUSTED}:0:50"
    )
    assert await keeper.command_refusal(GUILD, ALICE) is None
    refused = await keeper.command_refusal(GUILD, ALICE)
    assert refused is not None and refused.decision == MEMBER_RATE_LIMITED
    assert refused.line == await keeper.regenerate_refusal(GUILD, ALICE)
    assert await keeper.command_refusal(GUILD, BOB, {NEWCOMERS}) is None
    refused = await keeper.command_refusal(GUILD, BOB, {NEWCOMERS})
    assert refused is not None and refused.decision == ROLE_RATE_LIMITED
    usage.record(GUILD, CHANNEL, CAROL, 50, 0, model="test:model")
    refused = await keeper.command_refusal(GUILD, CAROL, {TRUSTED})
    assert refused is not None and refused.decision == ROLE_TOKEN_BUDGET
    await keeper.optouts.set(GUILD, CAROL, True)
    refused = await keeper.command_refusal(GUILD, CAROL)
    assert refused is not None and refused.decision == OPTED_OUT and refused.line == OPTED_OUT_REFUSAL


async def test_a_command_on_a_spent_budget_is_refused_with_the_budgets_decision(make_settings, clock) -> None:
    usage = UsageLedger(clock)
    keeper = gatekeeper(make_settings, clock, usage, server_tokens_per_day=100)
    spend(usage, 100)
    refused = await keeper.command_refusal(GUILD, BOB)
    assert refused is not None and refused.decision == SERVER_BUDGET


async def test_the_count_moves_to_the_archive_only_when_processes_may_share_it(make_settings, clock, archive) -> None:
    """On Postgres the Gatekeeper counts in the archive (other processes see it); on SQLite it keeps counting here."""
    keeper = gatekeeper(make_settings, clock)
    keeper.count_in(archive)
    shared = isinstance(keeper.allowances, SharedAllowances)
    assert shared == (archive.dialect == "postgres")
    assert keeper.allowances.clock is clock


async def test_an_operations_spending_counts_what_it_has_not_recorded_yet_and_stays_refused(
    make_settings, clock
) -> None:
    """Before each model call of an operation, the budgets are asked with the tokens it has spent but not yet
    recorded (an answer records its tokens when it ends); the first refusal stops the rest of it, without taking
    the member's rate, and is what the member is told."""
    usage = UsageLedger(clock)
    budgets = {"role_limits": f"{NEWCOMERS}:0:100", "server_tokens_per_day": 500}
    keeper = gatekeeper(make_settings, clock, usage, **budgets)
    spend(usage, 60)
    alice = keeper.spending(GUILD, ALICE, {NEWCOMERS})
    assert await alice.admits(39) and not await alice.admits(40)
    assert alice.refused is not None and alice.refused.decision == ROLE_TOKEN_BUDGET
    assert await alice.stop_line(0) == alice.line and alice.line is not None and "resets <t:" in alice.line
    assert (await keeper.take(GUILD, ALICE, {NEWCOMERS})).admitted
    # Without the role, no tokens of her own; asked for by no member (a digest), the server's budget alone.
    assert await keeper.spending(GUILD, ALICE, ()).admits(439)
    server = keeper.spending(GUILD, None)
    assert not await server.admits(440)
    assert server.refused is not None and server.refused.decision == SERVER_BUDGET
