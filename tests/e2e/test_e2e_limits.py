"""End-to-end: the admission limits of bot.py's client against the local fake Discord and model server."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from admission.gatekeeper import REGENERATE_SLOW_DOWN
from bot import Parley
from deciding.journal import LoggedDecision
from tests.fakes.fake_discord import (
    ALICE_ID,
    BOB_ID,
    BOT_ID,
    CAROL_ID,
    CHANNEL_ID,
    NEWCOMER_ROLE_ID,
    OTHER_CHANNEL_ID,
    FakeDiscord,
)
from tests.fakes.fake_llm import FakeLLM, ToolCall, echo
from tests.support.e2e_support import (
    RunningBot,
    assert_ephemeral_one_liner,
    assert_silent,
    decided,
    eventually,
    option,
    reply_text,
    request_texts,
    run_command,
    say,
    use_message_command,
)

T0 = datetime(2026, 11, 22, 23, 0, tzinfo=UTC)


class HeldModel:
    """A fake-model handler that keeps every answer waiting until the test lets them through."""

    def __init__(self) -> None:
        self.release = asyncio.Event()

    async def __call__(self, request: dict[str, Any]) -> str:
        await self.release.wait()
        return echo(request)


async def decided_in(client: Parley, channel_id: int, message: dict[str, Any]) -> LoggedDecision:
    """The decision about a message in any channel, once the bot has made it."""
    message_id = int(message["id"])

    def found() -> LoggedDecision | None:
        return next((entry for entry in client.decisions.recent(channel_id) if entry.message_id == message_id), None)

    await eventually(lambda: found() is not None)
    entry = found()
    assert entry is not None
    return entry


def recorded(client: Parley) -> set[int]:
    """The ids of the messages in the channel's conversation: what the model is given to see."""
    conversation = client.manager.get(CHANNEL_ID)
    assert conversation is not None
    return {message.message_id for message in conversation.messages}


async def test_forty_mentions_in_a_minute_get_the_burst_and_one_notice(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """40 mentions from one member in a minute: 5 answers (the burst), one "slow down" reply, then silence."""
    client = await bot.start()
    now = T0
    client.admission.allowances.clock = lambda: now
    mentions, reasons = [], []
    for number in range(40):
        now = T0 + timedelta(seconds=1.5 * number)
        mention = await say(fake, ALICE_ID, f"<@{BOT_ID}> question {number}")
        mentions.append(mention)
        reasons.append((await decided(client, mention)).reason)
    await eventually(lambda: len(fake.posts_in(CHANNEL_ID)) >= 6)
    await assert_silent(fake, 6)

    posts = fake.posts_in(CHANNEL_ID)
    assert len(llm.requests) == 5
    assert [post.reply_to for post in posts] == [int(m["id"]) for m in mentions[:6]]
    notice = posts[5]
    # The sixth mention came 7.5 s in; one of the 5 tokens is back 2 minutes (30 an hour) after the first.
    back = T0 + timedelta(seconds=7.5) + timedelta(seconds=112.5)
    assert notice.content.startswith("Slow down") and f"<t:{int(back.timestamp())}:R>" in notice.content
    assert [int(user) for user in notice.body["allowed_mentions"]["users"]] == [ALICE_ID]
    assert reasons == ["mention"] * 5 + ["member_rate_limited"] * 35


async def test_a_role_limit_stops_that_role_before_the_member_default_would(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """ROLE_LIMITS gives Newcomers 2 answers an hour (so a burst of 2): Alice, a newcomer, is told once to slow down
    at her third mention (`role_rate_limited`), then silence; Bob, on the member defaults (a burst of 5), is
    answered all three times."""
    fake.give_role(ALICE_ID, NEWCOMER_ROLE_ID)
    client = await bot.start(role_limits=f"{NEWCOMER_ROLE_ID}:2:0")
    client.admission.allowances.clock = lambda: T0
    reasons = []
    for number in range(4):
        mention = await say(fake, ALICE_ID, f"<@{BOT_ID}> alice {number}")
        reasons.append((await decided(client, mention)).reason)
        await fake.wait_for_posts(min(number + 1, 3))
    assert reasons == ["mention", "mention", "role_rate_limited", "role_rate_limited"]
    notice = fake.posts_in(CHANNEL_ID)[2]
    # 2 an hour: the first answer is back 30 minutes after it was taken.
    back = f"<t:{int((T0 + timedelta(minutes=30)).timestamp())}:R>"
    assert notice.content == f"Slow down a little: I can answer you again {back}. Until then I'll stay quiet."
    for number in range(3):
        await say(fake, BOB_ID, f"<@{BOT_ID}> bob {number}")
        await fake.wait_for_posts(4 + number)
    await assert_silent(fake, 6)
    assert len(llm.requests) == 5  # Alice's two, Bob's three


async def test_a_roles_tokens_a_day_stop_its_members_until_midnight(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """ROLE_LIMITS gives Newcomers 1 token a day: once Alice's first answer has spent it, her next mention gets one
    notice of the reset at UTC midnight (`role_token_budget`), the one after it silence; Bob is still answered."""
    fake.give_role(ALICE_ID, NEWCOMER_ROLE_ID)
    client = await bot.start(role_limits=f"{NEWCOMER_ROLE_ID}:0:1")
    await say(fake, ALICE_ID, f"<@{BOT_ID}> first")
    await fake.wait_for_posts(1)
    await eventually(lambda: client.usage.member_tokens(int(fake.guild_id), ALICE_ID) > 0)
    over = [await say(fake, ALICE_ID, f"<@{BOT_ID}> more {number}") for number in range(2)]
    assert [(await decided(client, mention)).reason for mention in over] == ["role_token_budget"] * 2
    [notice] = (await fake.wait_for_posts(2))[1:]
    midnight = datetime.combine(client.usage.day + timedelta(days=1), datetime.min.time(), UTC)
    assert notice.reply_to == int(over[0]["id"])
    assert notice.content.endswith(f"until it resets <t:{int(midnight.timestamp())}:R>.")
    await say(fake, BOB_ID, f"<@{BOT_ID}> my turn")
    await fake.wait_for_posts(3)
    await assert_silent(fake, 3)
    assert len(llm.requests) == 2


async def test_another_member_is_answered_while_one_is_limited(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """With Alice over her rate, Bob's mention is answered, and the model still sees Alice's unanswered message."""
    client = await bot.start(member_answer_burst=1)
    await say(fake, ALICE_ID, f"<@{BOT_ID}> first")
    await fake.wait_for_posts(1)
    limited = await say(fake, ALICE_ID, f"<@{BOT_ID}> the unanswered one")
    await fake.wait_for_posts(2)
    bob = await say(fake, BOB_ID, f"<@{BOT_ID}> my turn?")
    posts = await fake.wait_for_posts(3)
    assert posts[2].reply_to == int(bob["id"])
    assert "the unanswered one" in " ".join(request_texts(llm.requests[-1]))  # recorded, though not answered
    assert (await decided(client, limited)).reason == "member_rate_limited"


async def test_why_and_the_decision_log_show_the_rate_limit(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    """/parley why and the parley.decisions log give a rate-limited mention the reason `member_rate_limited`."""
    caplog.set_level(logging.INFO, logger="parley.decisions")
    client = await bot.start(member_answer_burst=1)
    await say(fake, ALICE_ID, f"<@{BOT_ID}> first")
    await fake.wait_for_posts(1)
    limited = await say(fake, ALICE_ID, f"<@{BOT_ID}> and again")
    await decided(client, limited)
    why = reply_text(await run_command(fake, "why"))
    assert "silent · member_rate_limited (limit): **Alice**" in why
    assert "and again" in why
    [logged] = [record for record in caplog.records if getattr(record, "message_id", None) == int(limited["id"])]
    extra = vars(logged)  # the decision's structured attributes
    assert (extra["respond"], extra["reason"], extra["tier"]) == (False, "member_rate_limited", "limit")


async def test_a_members_waiting_mentions_collapse_into_the_latest(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """While an answer is pending, a member's later mention supersedes their waiting one; others keep their place."""
    held = HeldModel()
    llm.handler = held
    client = await bot.start()
    first = await say(fake, ALICE_ID, f"<@{BOT_ID}> first")
    await eventually(lambda: len(llm.requests) == 1)
    second = await say(fake, ALICE_ID, f"<@{BOT_ID}> second, never mind")
    third = await say(fake, ALICE_ID, f"<@{BOT_ID}> third, the real question")
    bob = await say(fake, BOB_ID, f"<@{BOT_ID}> bob asks")
    await eventually(lambda: int(bob["id"]) in recorded(client))  # all three arrived while the first is held
    held.release.set()
    posts = await fake.wait_for_posts(3)
    await assert_silent(fake, 3)
    assert [post.reply_to for post in posts] == [int(first["id"]), int(third["id"]), int(bob["id"])]
    assert (await decided(client, second)).reason == "superseded"
    assert len(llm.requests) == 3
    assert int(second["id"]) in recorded(client)


async def test_past_the_channel_queue_limit_mentions_are_recorded_not_answered(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """With one mention allowed to wait, a third member's is `queue_full` at once, yet the model later sees it."""
    held = HeldModel()
    llm.handler = held
    client = await bot.start(channel_queue_limit=1)
    alice = await say(fake, ALICE_ID, f"<@{BOT_ID}> alice asks")
    await eventually(lambda: len(llm.requests) == 1)
    bob = await say(fake, BOB_ID, f"<@{BOT_ID}> bob asks")
    carol = await say(fake, CAROL_ID, f"<@{BOT_ID}> carol asks too")
    assert (await decided(client, carol)).reason == "queue_full"
    held.release.set()
    posts = await fake.wait_for_posts(2)
    await assert_silent(fake, 2)
    assert [post.reply_to for post in posts] == [int(alice["id"]), int(bob["id"])]
    assert int(carol["id"]) in recorded(client)


@pytest.mark.parametrize(("cap", "running_together"), [(1, 1), (2, 2)])
async def test_answers_in_progress_are_capped_across_channels(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM, cap: int, running_together: int
) -> None:
    """With MAX_CONCURRENT_ANSWERS=1 a second channel's answer waits for the first; with 2 both run."""
    held = HeldModel()
    llm.handler = held
    client = await bot.start(max_concurrent_answers=cap)
    await say(fake, ALICE_ID, f"<@{BOT_ID}> in general")
    await eventually(lambda: len(llm.requests) == 1)
    elsewhere = await fake.send_user_message(OTHER_CHANNEL_ID, BOB_ID, f"<@{BOT_ID}> in random")
    assert (await decided_in(client, OTHER_CHANNEL_ID, elsewhere)).respond
    await eventually(lambda: len(llm.requests) >= running_together)
    await assert_silent(fake, 0)
    assert len(llm.requests) == running_together
    held.release.set()
    await fake.wait_for_posts(1, CHANNEL_ID)
    await fake.wait_for_posts(1, OTHER_CHANNEL_ID)
    assert len(llm.requests) == 2


async def test_a_chatty_channel_asks_the_judge_at_most_its_calls_per_minute(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """In chatty mode with JUDGE_CALLS_PER_MINUTE=2, six chatter lines reach the judge twice, then `judge_budget`."""

    def judge_says_no(request: dict[str, Any]) -> Any:
        if any(tool["function"]["name"] == "final_result" for tool in request.get("tools", [])):
            return ToolCall("final_result", {"respond": False, "confidence": 0.9, "reason": "side talk"})
        return echo(request)

    llm.handler = judge_says_no
    client = await bot.start(use_llm_judge=True, judge_calls_per_minute=2)
    assert client.decider.judge_budget is not None
    client.decider.judge_budget.clock = lambda: T0  # the six lines come within the same instant
    await run_command(fake, "mode", [option("mode", "chatty")])
    await say(fake, ALICE_ID, f"<@{BOT_ID}> hello")
    await fake.wait_for_posts(1)
    reasons = [(await decided(client, await say(fake, BOB_ID, f"chatter {n}"))).reason for n in range(6)]
    assert reasons == ["judge_no"] * 2 + ["judge_budget"] * 4
    assert len(llm.requests) == 3  # the answer and two judge calls


async def test_regenerate_after_slow_down_makes_no_model_call(bot: RunningBot, fake: FakeDiscord, llm: FakeLLM) -> None:
    """Past her rate ("Slow down"), Alice's Regenerate clicks make no model call; each tells her alone when to retry."""
    client = await bot.start(member_answer_burst=1)
    client.admission.allowances.clock = lambda: T0
    await say(fake, ALICE_ID, f"<@{BOT_ID}> first")
    [answer] = await fake.wait_for_posts(1)
    await say(fake, ALICE_ID, f"<@{BOT_ID}> and again")
    notice = (await fake.wait_for_posts(2))[1]
    assert notice.content.startswith("Slow down")
    await eventually(lambda: client.streams.latest(CHANNEL_ID) is not None)
    asked = len(llm.requests)

    back = f"<t:{int((T0 + timedelta(minutes=2)).timestamp())}:R>"  # 30 an hour: one answer is back in 2 minutes
    for _ in range(3):
        calls = await use_message_command(fake, "Regenerate", answer.message, user_id=ALICE_ID)
        assert assert_ephemeral_one_liner(calls) == REGENERATE_SLOW_DOWN.format(when=back)
    await assert_silent(fake, 2)
    assert len(llm.requests) == asked
    assert fake.bot_messages(CHANNEL_ID)[0]["content"] == answer.content


async def test_a_roles_limit_holds_for_regenerate_and_catchup(bot: RunningBot, fake: FakeDiscord, llm: FakeLLM) -> None:
    """Newcomers get 1 answer an hour: once Alice's mention has spent it, her Regenerate and her `/parley catchup`
    (whose interactions carry her roles) are each refused to her alone with the hour's wait, and make no model call."""
    fake.give_role(ALICE_ID, NEWCOMER_ROLE_ID)
    client = await bot.start(role_limits=f"{NEWCOMER_ROLE_ID}:1:0")
    client.admission.allowances.clock = lambda: T0
    await say(fake, ALICE_ID, f"<@{BOT_ID}> first")
    [answer] = await fake.wait_for_posts(1)
    await eventually(lambda: client.streams.latest(CHANNEL_ID) is not None)
    asked = len(llm.requests)

    back = f"<t:{int((T0 + timedelta(hours=1)).timestamp())}:R>"
    calls = await use_message_command(fake, "Regenerate", answer.message, user_id=ALICE_ID)
    assert assert_ephemeral_one_liner(calls) == REGENERATE_SLOW_DOWN.format(when=back)
    calls = await run_command(fake, "catchup", [option("since", "3h")], user_id=ALICE_ID)
    assert assert_ephemeral_one_liner(calls) == REGENERATE_SLOW_DOWN.format(when=back)
    assert len(llm.requests) == asked
