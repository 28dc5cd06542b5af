"""End-to-end: per-answer token limits, the server's daily budget and /parley status, through the fakes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from agent import LIMIT_NOTE
from tests.fakes.fake_discord import ALICE_ID, BOB_ID, BOT_ID, CHANNEL_ID, GUILD_ID, NEWCOMER_ROLE_ID, FakeDiscord
from tests.fakes.fake_llm import FakeLLM, ToolCall, message_text
from tests.support.e2e_support import RunningBot, assert_silent, decided, eventually, reply_text, run_command, say


def tool_looper(*, answers_without_tools: bool) -> Any:
    """A model that reads the channel again whenever it is offered a tool; without one it answers, or calls anyway."""

    def handler(request: dict[str, Any]) -> Any:
        if request.get("tools") or not answers_without_tools:
            return ToolCall("get_recent_messages", {"limit": 100})
        return "From what I read: the deploy moved to Friday."

    return handler


async def fill_the_archive(fake: FakeDiscord, client: Any, count: int = 40) -> None:
    """Messages long enough that every read of the channel returns a tool result of about 4,000 characters."""
    for number in range(count):
        await say(fake, BOB_ID, f"status report {number}: " + "the deploy pipeline is waiting on review " * 12)
    assert client.archive is not None
    await client.archive.flush()


async def test_a_tool_loop_stops_at_the_input_token_limit_with_an_answer(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """A model that keeps reading the channel has its tools withdrawn before ANSWER_INPUT_TOKENS_LIMIT, and answers."""
    client = await bot.start(answer_input_tokens_limit=20000, max_model_requests=20)
    await fill_the_archive(fake, client)
    llm.handler = tool_looper(answers_without_tools=True)
    await say(fake, ALICE_ID, f"<@{BOT_ID}> what happened to the deploy?")
    [post] = await fake.wait_for_posts(1)
    assert post.content == "From what I read: the deploy moved to Friday."
    # MAX_ANSWER_TOKENS caps every response, as the chat-completions API's max_completion_tokens.
    assert {request.get("max_completion_tokens") for request in llm.requests} == {1000}
    offered_tools = [bool(request.get("tools")) for request in llm.requests]
    assert offered_tools[-1] is False and all(offered_tools[:-1]) and 2 < len(offered_tools) < 20
    # The fake counts a token per word: everything the answer sent stayed within the limit.
    sent = sum(len(message_text(message).split()) for request in llm.requests for message in request["messages"])
    assert sent <= 20000
    await eventually(lambda: client.usage.server_tokens(GUILD_ID) > 0)


async def test_a_model_that_ignores_the_wind_down_gets_stopped_with_an_honest_line(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """A model that calls tools even when offered none is cut off at MAX_MODEL_REQUESTS; the member is told why."""
    client = await bot.start(max_model_requests=4)
    await fill_the_archive(fake, client, count=5)
    llm.handler = tool_looper(answers_without_tools=False)
    await say(fake, ALICE_ID, f"<@{BOT_ID}> what happened to the deploy?")
    [post] = await fake.wait_for_posts(1)
    assert post.content == LIMIT_NOTE
    assert len(llm.requests) <= 4
    # The bot keeps serving: the next question gets a normal answer.
    llm.handler = lambda request: "Friday."
    await say(fake, ALICE_ID, f"<@{BOT_ID}> and when is it now?")
    posts = await fake.wait_for_posts(2)
    assert posts[1].content == "Friday."


async def test_a_spent_server_budget_gives_one_notice_then_silence(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """Past SERVER_TOKENS_PER_DAY, one short notice naming the reset, then silence; every such decision says why."""
    client = await bot.start(server_tokens_per_day=50)
    await say(fake, ALICE_ID, f"<@{BOT_ID}> how do I list files in a long and detailed way please?")
    await fake.wait_for_posts(1)
    await eventually(lambda: client.usage.server_tokens(GUILD_ID) >= 50)

    second = await say(fake, ALICE_ID, f"<@{BOT_ID}> and hidden ones?")
    [_, notice] = await fake.wait_for_posts(2)
    midnight = datetime.combine(datetime.now(UTC).date() + timedelta(days=1), datetime.min.time(), UTC)
    assert notice.content == (
        "This server has used up Parley's token budget for today, so I'll stay quiet until it resets"
        f" <t:{int(midnight.timestamp())}:R>."
    )
    assert notice.reply_to == int(second["id"])
    entry = await decided(client, second)
    assert (entry.respond, entry.reason) == (False, "server_budget")

    third = await say(fake, BOB_ID, f"<@{BOT_ID}> can you help me too?")
    entry = await decided(client, third)
    assert (entry.respond, entry.reason, entry.tier) == (False, "server_budget", "budget")
    await assert_silent(fake, 2)
    assert len(llm.requests) == 1

    status = reply_text(await run_command(fake, "status"))
    spent = client.usage.server_tokens(GUILD_ID)
    assert f"This server: {spent:,} of 50 (resets <t:{int(midnight.timestamp())}:R>)" in status
    assert f"Top members today: <@{ALICE_ID}> {spent:,}" in status
    why = reply_text(await run_command(fake, "why"))
    assert why.count("silent · server_budget (budget)") == 2


async def test_the_spent_budget_holds_across_a_restart(bot: RunningBot, fake: FakeDiscord, llm: FakeLLM) -> None:
    """With the archive on, a restarted bot still knows the server's tokens today and stays silent."""
    client = await bot.start(server_tokens_per_day=50)
    await say(fake, ALICE_ID, f"<@{BOT_ID}> how do I list files in a long and detailed way please?")
    await fake.wait_for_posts(1)
    await eventually(lambda: client.usage.server_tokens(GUILD_ID) >= 50)
    spent = client.usage.server_tokens(GUILD_ID)
    await bot.stop()

    client = await bot.start(server_tokens_per_day=50)
    assert client.usage.server_tokens(GUILD_ID) == spent
    question = await say(fake, ALICE_ID, f"<@{BOT_ID}> still there?")
    assert (await decided(client, question)).reason == "server_budget"
    assert len(llm.requests) == 1


async def test_the_judges_tokens_count_against_the_server(bot: RunningBot, fake: FakeDiscord, llm: FakeLLM) -> None:
    """With USE_LLM_JUDGE, the judge's verdict on a bystander's message is counted for that bystander."""

    def judge_says_no(request: dict[str, Any]) -> Any:
        tools = {tool["function"]["name"] for tool in request.get("tools", [])}
        if "final_result" in tools:
            return ToolCall("final_result", {"respond": False, "confidence": 0.9, "reason": "talking to alice"})
        return "Use mount."

    llm.handler = judge_says_no
    client = await bot.start(use_llm_judge=True)
    await say(fake, ALICE_ID, f"<@{BOT_ID}> how do I mount a disk?")
    await fake.wait_for_posts(1)
    bystander = await say(fake, BOB_ID, "is that the same on fedora")
    assert (await decided(client, bystander)).reason == "judge_no"
    members = dict(client.usage.summary(GUILD_ID, CHANNEL_ID).top_members)
    assert members[BOB_ID] > 0 and members[ALICE_ID] > 0


async def test_an_answers_tool_rounds_stop_at_the_members_tokens_a_day(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """Alice's role gives her 3,000 tokens a day; a model that keeps reading the channel makes each tool round a
    bigger request. Every request starts while Alice's tokens, this answer's included, are under 3,000; the
    answer then stops with one line saying why and when her tokens reset."""
    fake.give_role(ALICE_ID, NEWCOMER_ROLE_ID)
    client = await bot.start(role_limits=f"{NEWCOMER_ROLE_ID}:0:3000", max_model_requests=20)
    await fill_the_archive(fake, client, count=5)
    llm.handler = tool_looper(answers_without_tools=False)
    await say(fake, ALICE_ID, f"<@{BOT_ID}> what happened to the deploy?")
    [post] = await fake.wait_for_posts(1)
    spent_before = [sum(usage["total_tokens"] for usage in llm.usages[:index]) for index in range(len(llm.usages))]
    assert all(spent < 3000 for spent in spent_before), spent_before
    midnight = datetime.combine(client.usage.day + timedelta(days=1), datetime.min.time(), UTC)
    assert "your role gives you" in post.content and f"<t:{int(midnight.timestamp())}:R>" in post.content
    # Told once: her next mention today is not answered, and not told again.
    await eventually(lambda: client.usage.member_tokens(GUILD_ID, ALICE_ID) >= 3000)
    again = await say(fake, ALICE_ID, f"<@{BOT_ID}> and now?")
    assert (await decided(client, again)).reason == "role_token_budget"
    await assert_silent(fake, 1)
