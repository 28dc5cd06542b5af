"""End-to-end: the real discord.py client from bot.py against a local fake Discord and model server."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.fake_discord import (
    ALICE_ID,
    BOB_ID,
    BOT_ID,
    CAROL_ID,
    CHANNEL_ID,
    OTHER_BOT_ID,
    OTHER_CHANNEL_ID,
    FakeDiscord,
    RecordedRequest,
)
from tests.fakes.fake_llm import Error, FakeLLM, ToolCall, echo, message_text
from tests.support.e2e_support import (
    RunningBot,
    assert_silent,
    bot_environment,
    decided,
    eventually,
    request_texts,
    say,
    start_bot_py,
)

# --- Scenarios ---------------------------------------------------------------------------------


async def test_mention_gets_a_reply(bot: RunningBot, fake: FakeDiscord, llm: FakeLLM) -> None:
    """An @mention is answered with a reply to that message, pinging only its author."""
    await bot.start()
    question = await say(fake, ALICE_ID, f"<@{BOT_ID}> how do I list files?")
    [post] = await fake.wait_for_posts(1)
    assert post.reply_to == int(question["id"])
    assert post.content.startswith("echo: ")
    allowed = post.body["allowed_mentions"]
    assert allowed["parse"] == [] and [int(user) for user in allowed["users"]] == [ALICE_ID]
    [request] = llm.requests
    assert "how do I list files?" in request_texts(request)[-1]


async def test_typing_shows_while_the_model_works(bot: RunningBot, fake: FakeDiscord, llm: FakeLLM) -> None:
    """A slow answer shows the typing indicator before it is posted; an instant one needs none."""

    async def slow_echo(request: dict[str, Any]) -> str:
        await asyncio.sleep(0.6)
        return echo(request)

    llm.handler = slow_echo
    await bot.start()
    await say(fake, ALICE_ID, f"<@{BOT_ID}> think hard about this")
    [post] = await fake.wait_for_posts(1)
    assert [event.channel_id for event in fake.typing_events] == [CHANNEL_ID]
    assert fake.typing_events[0].at < post.at

    llm.handler = echo
    await say(fake, ALICE_ID, f"<@{BOT_ID}> and quickly?")
    await fake.wait_for_posts(2)
    await asyncio.sleep(0.4)  # past the typing delay
    assert len(fake.typing_events) == 1


async def test_chatter_without_conversation_is_ignored(bot: RunningBot, fake: FakeDiscord, llm: FakeLLM) -> None:
    """Messages that do not address the bot start nothing and reach no model."""
    await bot.start()
    await say(fake, ALICE_ID, "anyone know how to list files?")
    await say(fake, BOB_ID, f"<@{ALICE_ID}> try ls")
    await assert_silent(fake, 0)
    assert llm.requests == []


async def test_followup_uses_accumulated_history(bot: RunningBot, fake: FakeDiscord, llm: FakeLLM) -> None:
    """A follow-up without a mention is answered, and the model sees the earlier exchange."""
    llm.handler = lambda request: "Use `ls -la`." if len(llm.requests) == 1 else "Add `-h` for sizes."
    await bot.start()
    await say(fake, ALICE_ID, f"<@{BOT_ID}> how do I list files?")
    await fake.wait_for_posts(1)
    await say(fake, ALICE_ID, "and with human readable sizes?")
    posts = await fake.wait_for_posts(2)
    assert posts[1].content == "Add `-h` for sizes."
    second = request_texts(llm.requests[1])
    assert any("how do I list files?" in text for text in second[:-1])
    assert "Use `ls -la`." in second
    assert "human readable sizes" in second[-1]


async def test_second_person_joins_with_full_context(bot: RunningBot, fake: FakeDiscord, llm: FakeLLM) -> None:
    """Another member joining is answered with everything said so far, unanswered messages included."""
    await bot.start()
    await say(fake, ALICE_ID, f"<@{BOT_ID}> what's the capital of France?")
    await fake.wait_for_posts(1)
    await say(fake, CAROL_ID, "I thought it was Lyon")
    await say(fake, BOB_ID, f"<@{BOT_ID}> and of Italy?")
    posts = await fake.wait_for_posts(2)
    assert posts[1].reply_to is not None
    texts = request_texts(llm.requests[1])
    assert any("capital of France" in text for text in texts[:-1])
    assert "I thought it was Lyon" in texts[-1] and "and of Italy?" in texts[-1]


async def test_message_for_someone_else_is_ignored(bot: RunningBot, fake: FakeDiscord, llm: FakeLLM) -> None:
    """Inside a conversation, a message addressed to another person is left alone."""
    await bot.start()
    await say(fake, ALICE_ID, f"<@{BOT_ID}> hi!")
    await fake.wait_for_posts(1)
    await say(fake, ALICE_ID, f"<@{BOB_ID}> did you see that?")
    await assert_silent(fake, 1)
    assert len(llm.requests) == 1


async def test_conversation_expires(bot: RunningBot, fake: FakeDiscord, llm: FakeLLM) -> None:
    """After the inactivity timeout a follow-up needs a mention again."""
    await bot.start(conversation_timeout_seconds=0.5, followup_window_seconds=60)
    await say(fake, ALICE_ID, f"<@{BOT_ID}> hi!")
    await fake.wait_for_posts(1)
    bot.clock.advance(0.7)
    await say(fake, ALICE_ID, "and another thing")
    await assert_silent(fake, 1)
    assert bot.client is not None and bot.client.manager.get(CHANNEL_ID) is None


async def test_own_and_other_bots_messages_are_ignored(bot: RunningBot, fake: FakeDiscord, llm: FakeLLM) -> None:
    """The bot never answers itself or another bot, even when mentioned."""
    await bot.start()
    await say(fake, OTHER_BOT_ID, f"<@{BOT_ID}> ping")
    await say(fake, BOT_ID, f"<@{BOT_ID}> talking to myself")
    await assert_silent(fake, 0)
    assert llm.requests == []


async def test_long_answer_is_split(bot: RunningBot, fake: FakeDiscord, llm: FakeLLM) -> None:
    """An answer over 2000 characters arrives as several posts, code fences balanced, nothing lost."""
    code = "\n".join(f"echo line {i}" for i in range(450))
    answer = f"Here you go:\n\n```bash\n{code}\n```\n\nThat's all."
    llm.handler = lambda request: answer
    await bot.start()
    question = await say(fake, ALICE_ID, f"<@{BOT_ID}> give me a long script")
    await fake.wait_for(lambda: any("That's all." in p.content for p in fake.posts_in(CHANNEL_ID)), what="last part")
    posts = fake.posts_in(CHANNEL_ID)
    assert len(posts) >= 3
    assert all(len(post.content) <= 2000 for post in posts)
    assert all(post.content.count("```") % 2 == 0 for post in posts)
    assert posts[0].reply_to == int(question["id"]) and all(p.reply_to is None for p in posts[1:])
    lines = [line for post in posts for line in post.content.splitlines() if line.startswith("echo line")]
    assert lines == code.splitlines()


async def test_fence_that_froze_the_bot_is_posted_and_the_bot_keeps_answering(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """The answer that used to hang the splitter (a 1,993-character info string) is at most 4 posts,
    and a mention in another channel right after is still answered."""
    frozen = "```" + "a" * 1993 + "\nhi"
    llm.handler = lambda request: frozen if len(llm.requests) == 1 else echo(request)
    await bot.start()
    await say(fake, ALICE_ID, f"<@{BOT_ID}> write me a code block")
    await fake.wait_for(lambda: any("hi" in post.content for post in fake.posts_in(CHANNEL_ID)), what="the answer")
    posts = fake.posts_in(CHANNEL_ID)
    assert 1 <= len(posts) <= 4 and all(len(post.content) <= 2000 for post in posts)
    await fake.send_user_message(OTHER_CHANNEL_ID, BOB_ID, f"<@{BOT_ID}> are you still there?")
    [elsewhere] = await fake.wait_for_posts(1, OTHER_CHANNEL_ID)
    assert elsewhere.content.startswith("echo: ") and "are you still there?" in elsewhere.content


async def test_huge_answer_is_cut_at_max_answer_posts(bot: RunningBot, fake: FakeDiscord, llm: FakeLLM) -> None:
    """A 112,000-character answer is MAX_ANSWER_POSTS posts, the last ending "(answer cut)", then no more."""
    llm.handler = lambda request: ("All work and no play makes a long answer. " * 3000)[:112_000]
    await bot.start(max_answer_posts=3)
    await say(fake, ALICE_ID, f"<@{BOT_ID}> tell me everything")
    await fake.wait_for(lambda: any(p.content.endswith("(answer cut)") for p in fake.posts_in(CHANNEL_ID)), what="cut")
    await assert_silent(fake, 3)
    posts = fake.posts_in(CHANNEL_ID)
    assert all(len(post.content) <= 2000 for post in posts)
    assert [post.content.endswith("(answer cut)") for post in posts] == [False, False, True]


async def test_everyone_in_model_text_pings_no_one(bot: RunningBot, fake: FakeDiscord, llm: FakeLLM) -> None:
    """Whatever the model writes, no post pings @everyone, @here or a role."""
    llm.handler = lambda request: f"@everyone @here <@{BOB_ID}> look at this"
    await bot.start()
    await say(fake, ALICE_ID, f"<@{BOT_ID}> announce something")
    [post] = await fake.wait_for_posts(1)
    allowed = post.body["allowed_mentions"]
    assert allowed["parse"] == [] and not allowed.get("roles")
    assert [int(user) for user in allowed["users"]] == [ALICE_ID]
    assert post.message["mention_everyone"] is False
    assert [int(user["id"]) for user in post.message["mentions"]] == [ALICE_ID]


async def test_model_failure_apologises_and_keeps_serving(bot: RunningBot, fake: FakeDiscord, llm: FakeLLM) -> None:
    """A failed model run brings a short apology, leaves the history intact, and the next message is answered."""
    failing = True
    llm.handler = lambda request: Error(500, "upstream exploded") if failing else echo(request)
    await bot.start()
    await say(fake, ALICE_ID, f"<@{BOT_ID}> first question")
    [apology] = await fake.wait_for_posts(1)
    assert "sorry" in apology.content.lower()
    assert bot.client is not None
    conversation = bot.client.manager.get(CHANNEL_ID)
    assert conversation is not None and conversation.llm_history == []
    failing = False
    await say(fake, ALICE_ID, f"<@{BOT_ID}> second question")
    posts = await fake.wait_for_posts(2)
    assert "second question" in posts[1].content
    await eventually(lambda: len(conversation.llm_history) >= 2)


@pytest.mark.slow
async def test_sigterm_stops_bot_py_cleanly(fake: FakeDiscord, llm: FakeLLM, tmp_path: Path) -> None:
    """`python bot.py` connects, answers, and on SIGTERM closes and exits 0 (Railway's redeploy)."""
    env = bot_environment(fake, llm, tmp_path / "parley.db")
    process = await start_bot_py(env, tmp_path)
    try:
        await fake.wait_for_ready(timeout=30)
        await say(fake, ALICE_ID, f"<@{BOT_ID}> are you there?")
        await fake.wait_for_posts(1, timeout=15)
        process.send_signal(signal.SIGTERM)
        _, stderr = await asyncio.wait_for(process.communicate(), 15)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode == 0, stderr.decode()
    assert b"Traceback" not in stderr


def judge_or_echo(verdict: bool) -> Callable[[dict[str, Any]], Any]:
    """Answer the judge's structured-output requests with `verdict`, everything else with an echo."""

    def handler(request: dict[str, Any]) -> Any:
        tools = {tool["function"]["name"] for tool in request.get("tools", [])}
        if "final_result" in tools:
            return ToolCall("final_result", {"respond": verdict, "confidence": 0.8, "reason": "asks the bot"})
        return echo(request)

    return handler


@pytest.mark.parametrize("verdict", [True, False])
async def test_judge_decides_ambiguous_message(bot: RunningBot, fake: FakeDiscord, llm: FakeLLM, verdict: bool) -> None:
    """With USE_LLM_JUDGE, a bystander's message inside the window is put to the judge, whose verdict stands."""
    llm.handler = judge_or_echo(verdict)
    client = await bot.start(use_llm_judge=True)
    await say(fake, ALICE_ID, f"<@{BOT_ID}> how do I mount a disk?")
    await fake.wait_for_posts(1)
    await say(fake, BOB_ID, "is that the same on fedora")
    if verdict:
        posts = await fake.wait_for_posts(2)
        assert "fedora" in posts[1].content
    else:
        await assert_silent(fake, 1)
    judge_requests = [
        r for r in llm.requests if any(t["function"]["name"] == "final_result" for t in r.get("tools", []))
    ]
    assert len(judge_requests) == 1
    assert "fedora" in request_texts(judge_requests[0])[-1]
    assert client.decider.judge_calls == 1


# --- The archive and the history tools ---------------------------------------------------------


def search_then_answer(*queries: str) -> Callable[[dict[str, Any]], Any]:
    """The model calls search_history once per query, then answers."""
    calls = iter(queries)

    def handler(request: dict[str, Any]) -> Any:
        query = next(calls, None)
        if query is None:
            return "Found it."
        return ToolCall("search_history", {"query": query})

    return handler


def tool_results(request: dict[str, Any]) -> list[str]:
    return [message_text(message) for message in request["messages"] if message["role"] == "tool"]


async def ask_with_search(fake: FakeDiscord, llm: FakeLLM, *queries: str) -> list[str]:
    """Mention the bot so that it searches for `queries`; returns what each search gave the model."""
    llm.handler = search_then_answer(*queries)
    posts_before = len(fake.posts_in(CHANNEL_ID))
    requests_before = len(llm.requests)
    await say(fake, ALICE_ID, f"<@{BOT_ID}> what did we say earlier?")
    await fake.wait_for_posts(posts_before + 1)
    final = llm.requests[requests_before + len(queries)]
    return tool_results(final)[-len(queries) :]


async def test_search_history_finds_an_earlier_message_of_this_channel_only(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """search_history finds the channel's earlier message, never another channel's."""
    await bot.start()
    await say(fake, BOB_ID, "the staging password rotates on xylophone day")
    await fake.send_user_message(OTHER_CHANNEL_ID, CAROL_ID, "private: xylophone budget is 40k")
    [result] = await ask_with_search(fake, llm, "xylophone")
    assert "the staging password rotates on xylophone day" in result
    assert "Bob" in result
    assert "40k" not in result and "budget" not in result


async def test_search_reads_the_current_channel_whatever_the_model_asks(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """A channel id smuggled into the tool call is refused; the tool never reads another channel."""
    await bot.start()
    await fake.send_user_message(OTHER_CHANNEL_ID, CAROL_ID, "private: xylophone budget is 40k")
    scripted = iter([ToolCall("search_history", {"query": "xylophone", "channel_id": OTHER_CHANNEL_ID})])
    llm.handler = lambda request: next(scripted, "ok")
    await say(fake, ALICE_ID, f"<@{BOT_ID}> search the other channel")
    await fake.wait_for_posts(1)
    everything_the_model_saw = " ".join(text for request in llm.requests for text in request_texts(request))
    assert "40k" not in everything_the_model_saw


async def test_edited_message_is_found_by_its_new_text(bot: RunningBot, fake: FakeDiscord, llm: FakeLLM) -> None:
    """After an edit, search finds the new text and no longer the old."""
    await bot.start()
    original = await say(fake, BOB_ID, "meeting moved to tuesday")
    await fake.edit_user_message(CHANNEL_ID, int(original["id"]), "meeting moved to thursday")
    new, old = await ask_with_search(fake, llm, "thursday", "tuesday")
    assert "meeting moved to thursday" in new
    assert "tuesday" not in old and "No messages found." in old


async def test_deleted_messages_are_gone(bot: RunningBot, fake: FakeDiscord, llm: FakeLLM) -> None:
    """A single delete and a bulk delete both remove the messages from the archive."""
    await bot.start()
    single = await say(fake, BOB_ID, "my phone number is zebra-555")
    first = await say(fake, CAROL_ID, "zebra secret one")
    second = await say(fake, CAROL_ID, "zebra secret two")
    await say(fake, CAROL_ID, "zebra crossing is open")
    await fake.delete_messages(CHANNEL_ID, int(single["id"]))
    await fake.delete_messages(CHANNEL_ID, int(first["id"]), int(second["id"]))
    [result] = await ask_with_search(fake, llm, "zebra")
    assert "zebra crossing is open" in result
    assert "zebra-555" not in result and "secret" not in result


async def test_archive_survives_a_restart(bot: RunningBot, fake: FakeDiscord, llm: FakeLLM) -> None:
    """Messages archived before a restart are found by the next process on the same file."""
    client = await bot.start()
    message = await say(fake, BOB_ID, "the quokka deploy finished at noon")
    await decided(client, message)  # the bot has it before the shutdown
    await bot.stop()
    await bot.start()
    [result] = await ask_with_search(fake, llm, "quokka")
    assert "the quokka deploy finished at noon" in result


@pytest.mark.parametrize("hostile", ['"a AND (b', "NEAR*", "col:x OR", "'; DROP TABLE messages; --", "", "***"])
async def test_hostile_search_string_gets_a_normal_result(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM, hostile: str
) -> None:
    """FTS syntax or SQL in the query is searched for as text: a normal tool result, never an error."""
    await bot.start()
    await say(fake, BOB_ID, "a and b are both fine NEAR the col")
    [result] = await ask_with_search(fake, llm, hostile)
    assert "could not be read" not in result
    assert result.startswith(("No messages found.", "<archived_messages "))


def reads_history(request: RecordedRequest) -> bool:
    return request.method == "GET" and request.path.partition("?")[0].endswith(f"/channels/{CHANNEL_ID}/messages")


async def test_conversation_context_comes_from_the_archive_when_it_covers_the_period(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """Once the archive has watched the channel for the whole context period, no Discord round trip is made."""
    # Catch-up off: its history reads would hide whether context read Discord's.
    client = await bot.start(backfill_max_messages=0)
    client.coverage.watching_since -= timedelta(hours=2)  # as if the bot had been up for two hours
    await say(fake, BOB_ID, "the build server is down again")
    await say(fake, ALICE_ID, f"<@{BOT_ID}> any idea why?")
    await fake.wait_for_posts(1)
    assert not any(reads_history(request) for request in fake.requests)
    assert "the build server is down again" in request_texts(llm.requests[0])[-1]


async def test_conversation_context_comes_from_discord_after_a_fresh_start(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """Right after start the archive has a gap, so the context is read from Discord's history."""
    fake.add_history(CHANNEL_ID, BOB_ID, "said before the bot came up")
    await bot.start()
    await say(fake, ALICE_ID, f"<@{BOT_ID}> what did bob say?")
    await fake.wait_for_posts(1)
    assert any(reads_history(request) for request in fake.requests)
    assert "said before the bot came up" in request_texts(llm.requests[0])[-1]


async def test_one_answer_at_a_time_per_channel(bot: RunningBot, fake: FakeDiscord, llm: FakeLLM) -> None:
    """Two questions at once are answered one after the other, in the order they arrived."""
    in_flight = peak = 0

    async def slow_echo(request: dict[str, Any]) -> str:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.2)
        in_flight -= 1
        return echo(request)

    llm.handler = slow_echo
    await bot.start()
    first = await say(fake, ALICE_ID, f"<@{BOT_ID}> first question")
    second = await say(fake, BOB_ID, f"<@{BOT_ID}> second question")
    posts = await fake.wait_for_posts(2)
    assert [post.reply_to for post in posts] == [int(first["id"]), int(second["id"])]
    assert peak == 1
    assert any("first question" in text for text in request_texts(llm.requests[1]))  # it saw the first exchange


async def test_answer_is_posted_even_if_the_question_was_deleted(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """A question deleted while the model works still gets its answer, as a plain message."""
    asked = asyncio.Event()

    async def slow_echo(request: dict[str, Any]) -> str:
        asked.set()
        await asyncio.sleep(0.2)
        return echo(request)

    llm.handler = slow_echo
    await bot.start()
    question = await say(fake, ALICE_ID, f"<@{BOT_ID}> quick, before I delete this")
    await asyncio.wait_for(asked.wait(), 5)
    await fake.delete_messages(CHANNEL_ID, int(question["id"]))
    [post] = await fake.wait_for_posts(1)
    assert "before I delete this" in post.content
    assert post.body["message_reference"]["fail_if_not_exists"] is False
    assert post.reply_to is not None and post.message.get("message_reference") is None


@pytest.mark.slow
async def test_unusable_database_is_one_line_and_exit_2(fake: FakeDiscord, llm: FakeLLM, tmp_path: Path) -> None:
    """A DATABASE_URL that cannot be opened stops `python bot.py` with one line naming it, exit 2."""
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the database's folder should be")
    env = bot_environment(fake, llm, blocker / "parley.db")
    process = await start_bot_py(env, tmp_path)
    _, stderr = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode == 2
    [line] = stderr.decode().strip().splitlines()[-1:]
    assert line.startswith("Configuration error: DATABASE_URL names ") and "cannot be opened" in line
    assert "Traceback" not in stderr.decode()
