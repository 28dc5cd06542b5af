"""End-to-end: `/ask`, in public (a message of the channel that starts a conversation) and in private (ephemeral,
nothing posted, nothing kept)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import discord
import pytest

from admission.access import NOTICE
from answering.asked import ASK_FAILED, DIRECT_MESSAGES_OFF, MAY_NOT_POST, NOT_ANSWERED, NOT_ANSWERED_OTHERWISE
from answering.outcome import LOST
from bot import Parley
from edge.streaming import CANNOT_REGENERATE
from tests.e2e.test_e2e_limits import recorded
from tests.fakes.fake_discord import ALICE_ID, BOB_ID, BOT_ID, CHANNEL_ID, GUILD_ID, FakeDiscord, InteractionCall
from tests.fakes.fake_llm import FakeLLM
from tests.support.e2e_support import (
    EPHEMERAL,
    MEMBER,
    RunningBot,
    assert_ephemeral_one_liner,
    assert_told_after_deferral,
    call_text,
    calls_for,
    click,
    decided,
    eventually,
    is_callback,
    option,
    request_texts,
    say,
    settled,
    use_message_command,
    use_top_command,
)

QUESTION = "how do I list the files in a folder?"
ANSWER = "Use `ls -la`."


async def ask(
    fake: FakeDiscord, question: str, *, private: bool = False, user_id: int = ALICE_ID, **who: Any
) -> list[InteractionCall]:
    """`/ask question:… private:…`; the bot's calls once its answer (or refusal) has reached the asker."""
    options = [option("question", question)] + ([option("private", True)] if private else [])
    calls = await use_top_command(fake, "ask", options, user_id=user_id, **who)

    def answered() -> bool:
        return any(call.body and call_text(call) for call in calls_for(fake, calls))

    await fake.wait_for(answered, what="the /ask answer")
    return calls_for(fake, calls)


def flags_of(call: InteractionCall) -> int:
    assert call.body is not None
    data = call.body.get("data") or call.body
    return int(data.get("flags") or 0)


async def test_a_private_ask_is_answered_to_the_asker_alone_and_kept_nowhere(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    llm.handler = lambda request: ANSWER
    client = await bot.start()
    await say(fake, BOB_ID, "we keep the build scripts in tools/")
    calls = await ask(fake, QUESTION, private=True)

    deferral, *answer = calls
    assert is_callback(deferral) and flags_of(deferral) & EPHEMERAL
    assert ANSWER in "\n".join(call_text(call) for call in answer)
    # Nothing in the channel: only Bob's message is there, and the bot posted nothing.
    assert [message["author"]["id"] for message in fake.messages(CHANNEL_ID)] == [str(BOB_ID)]
    assert fake.posts_in(CHANNEL_ID) == []
    # The model saw the channel as a mention's answer would.
    assert any("tools/" in text for text in request_texts(llm.requests[0]))
    # The question started no conversation and is in no archive.
    assert client.manager.get(CHANNEL_ID) is None
    assert client.archive is not None
    await client.archive.flush()
    rows = await client.archive.recent(CHANNEL_ID, limit=10)
    assert [row.content for row in rows] == ["we keep the build scripts in tools/"]


async def test_a_public_ask_starts_a_conversation_a_plain_follow_up_continues(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    llm.handler = lambda request: ANSWER if len(llm.requests) == 1 else "Add `-h` for sizes."
    client = await bot.start()
    calls = await ask(fake, QUESTION)

    deferral, *answer = calls
    assert is_callback(deferral) and not flags_of(deferral) & EPHEMERAL
    # The answer is the command's response, a message of the channel by Parley that members can reply to.
    await eventually(lambda: [m["content"] for m in fake.bot_messages(CHANNEL_ID)] == [ANSWER])
    assert not any(flags_of(call) & EPHEMERAL for call in answer)

    follow_up = await say(fake, ALICE_ID, "and with human readable sizes?")
    [post] = await fake.wait_for_posts(1, CHANNEL_ID)
    assert post.content == "Add `-h` for sizes."
    assert (await decided(client, follow_up)).respond
    second = request_texts(llm.requests[1])
    assert any(QUESTION in text for text in second[:-1]) and ANSWER in second
    assert "human readable sizes" in second[-1]
    conversation = client.manager.get(CHANNEL_ID)
    assert conversation is not None and ALICE_ID in conversation.participants


async def test_a_public_ask_is_a_mention_for_why(bot: RunningBot, fake: FakeDiscord, llm: FakeLLM) -> None:
    """`/parley why` shows the question's decision as for a message, with its asker and words."""
    llm.handler = lambda request: ANSWER
    client: Parley = await bot.start()
    await ask(fake, QUESTION)
    await eventually(lambda: bool(client.decisions.recent(CHANNEL_ID)))
    [entry] = client.decisions.recent(CHANNEL_ID)
    assert entry.respond and entry.reason == "mention" and QUESTION in entry.excerpt


async def test_a_private_ask_of_a_member_without_history_sees_none_of_the_others(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    llm.handler = lambda request: ANSWER
    await bot.start()
    await say(fake, BOB_ID, "the secret plan is in tools/")
    no_history = discord.Permissions(MEMBER.value)
    no_history.read_message_history = False
    await ask(fake, QUESTION, private=True, permissions=no_history)
    texts = request_texts(llm.requests[0])
    assert not any("secret plan" in text for text in texts)
    assert any(QUESTION in text for text in texts)


async def refused(fake: FakeDiscord, question: str, **who: Any) -> str:
    """`/ask` acknowledged, then turned down: the one ephemeral line the asker is told, and nothing else."""
    options = [option("question", question)]
    calls = await use_top_command(fake, "ask", options, **who)
    await settled(fake)  # nothing follows the refusal
    return assert_told_after_deferral(calls_for(fake, calls))


async def test_a_member_who_may_not_post_is_not_answered_in_public(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """Discord posts a command's response whatever the channel's permissions: a member denied Send Messages is told
    to ask privately, and nothing is posted nor any model called."""
    await bot.start()
    muted = discord.Permissions(MEMBER.value)
    muted.send_messages = False
    calls = await use_top_command(fake, "ask", [option("question", QUESTION)], user_id=BOB_ID, permissions=muted)
    await settled(fake)  # nothing follows the refusal
    # Refused before the acknowledgement: a public "thinking…" would itself be a post in the channel.
    assert assert_ephemeral_one_liner(calls_for(fake, calls)) == MAY_NOT_POST
    assert llm.requests == [] and fake.messages(CHANNEL_ID) == []


async def test_a_blocked_role_is_refused_in_one_private_line(bot: RunningBot, fake: FakeDiscord, llm: FakeLLM) -> None:
    """BLOCKED_ROLES: Bob's /ask is refused in one line only he sees, no model is called, and `/parley why` says
    `not_allowed` for it."""
    muted = fake.add_role("muted", members=[BOB_ID])
    client = await bot.start(blocked_roles=frozenset({muted}))
    line = await refused(fake, QUESTION, user_id=BOB_ID)
    assert line == NOTICE.format(why="an admin has blocked one of your roles from using it in this server")
    assert llm.requests == [] and fake.messages(CHANNEL_ID) == []
    [entry] = client.decisions.recent(CHANNEL_ID)
    assert entry.reason == "not_allowed" and QUESTION in entry.excerpt


async def test_a_member_past_their_rate_is_told_when_to_come_back(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """/ask spends a member's answer as a mention does: past the burst, one private "slow down" line."""
    llm.handler = lambda request: ANSWER
    client = await bot.start(member_answer_burst=1)
    await ask(fake, QUESTION, private=True)
    line = await refused(fake, "and another thing?")
    assert line.startswith("Slow down a little: I can write an answer for you again <t:")
    assert len(llm.requests) == 1
    assert client.decisions.recent(CHANNEL_ID)[0].reason == "member_rate_limited"


async def test_an_ask_that_fails_is_told_in_one_line_and_its_answer_given_back(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failure past admission is no lost answer: one private line says so, and the asker may ask again at once."""
    llm.handler = lambda request: ANSWER
    client = await bot.start(member_answer_burst=1)
    answer_for_real = client.pipeline.asked

    async def broken(arrival: Any) -> None:
        raise RuntimeError("the pipeline broke")

    monkeypatch.setattr(client.pipeline, "asked", broken)
    assert await refused(fake, QUESTION) == ASK_FAILED
    monkeypatch.setattr(client.pipeline, "asked", answer_for_real)
    await ask(fake, "and now?")
    assert len(llm.requests) == 1 and "and now?" in request_texts(llm.requests[0])[-1]


async def test_an_ask_whose_token_expired_before_its_turn_calls_no_model_and_is_given_back(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    """Discord's interaction token lasts 15 minutes: an answer past it could go nowhere, so none is written."""
    llm.handler = lambda request: ANSWER
    await bot.start(member_answer_burst=1)
    long_ago = datetime.now(UTC) - timedelta(minutes=16)
    await use_top_command(fake, "ask", [option("question", QUESTION)], used_at=long_ago)
    await eventually(lambda: "its interaction expired while it waited" in caplog.text)
    assert llm.requests == []
    await ask(fake, "and now?")  # the answer it was admitted for was given back
    assert len(llm.requests) == 1


async def test_an_ask_is_counted_against_its_asker(bot: RunningBot, fake: FakeDiscord, llm: FakeLLM) -> None:
    """The tokens of an /ask answer, public or private, are the asker's, in their server and channel."""
    llm.handler = lambda request: ANSWER
    client = await bot.start()
    await ask(fake, QUESTION, private=True)
    # A streamed answer shows before its tail counts it.
    await eventually(lambda: client.usage.member_tokens(GUILD_ID, ALICE_ID) > 0)
    after_private = client.usage.member_tokens(GUILD_ID, ALICE_ID)
    await ask(fake, QUESTION, user_id=BOB_ID)
    await eventually(lambda: client.usage.member_tokens(GUILD_ID, BOB_ID) > 0)
    assert client.usage.member_tokens(GUILD_ID, ALICE_ID) == after_private
    assert client.usage.server_tokens(GUILD_ID) == after_private + client.usage.member_tokens(GUILD_ID, BOB_ID)


async def test_a_long_private_answer_goes_on_in_private_follow_ups(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """Not streamed: the deferred response holds the first part, ephemeral follow-ups the rest; `/parley why` shows
    that a question was asked privately, not what."""
    long_answer = "word " * 700  # two posts' worth
    llm.handler = lambda request: long_answer
    client = await bot.start(stream_answers=False)
    calls = await ask(fake, QUESTION, private=True)
    await eventually(lambda: len(calls_for(fake, calls)) == 3)
    _, original, follow_up = calls_for(fake, calls)
    assert original.method == "PATCH" and "@original" in original.path
    assert follow_up.method == "POST" and flags_of(follow_up) & EPHEMERAL
    assert (call_text(original) + " " + call_text(follow_up)).split() == long_answer.split()
    assert fake.messages(CHANNEL_ID) == []
    [entry] = client.decisions.recent(CHANNEL_ID)
    assert entry.reason == "asked_privately" and QUESTION not in entry.excerpt


async def test_a_public_ask_superseded_while_it_waited_gives_way_to_a_private_line(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """Alice's /ask waits for the channel's turn; her @mention meanwhile supersedes it, as a newer mention would.
    Its "thinking…" response leaves the channel and she alone is told why; her mention is answered."""
    busy = asyncio.Event()

    async def answer(request: dict[str, Any]) -> str:
        if len(llm.requests) == 1:
            await busy.wait()
        return ANSWER

    llm.handler = answer
    client = await bot.start()
    await say(fake, BOB_ID, f"<@{BOT_ID}> what's up?")
    await eventually(lambda: len(llm.requests) == 1)  # Bob's answer is under way
    calls = await use_top_command(fake, "ask", [option("question", QUESTION)])
    await fake.wait_for(lambda: len(fake.bot_messages(CHANNEL_ID)) == 1, what="the public thinking… response")
    newer = await say(fake, ALICE_ID, f"<@{BOT_ID}> never mind, what time is it?")
    # Her mention is recorded, and so in the waiting line, before Bob's answer ends (its claim takes an archive
    # round trip first: answering/once.py), else the /ask would take its turn first and nothing would supersede it.
    await eventually(lambda: int(newer["id"]) in recorded(client))
    busy.set()

    def told() -> list[InteractionCall]:
        return [call for call in calls_for(fake, calls) if call.method == "POST" and not is_callback(call)]

    await fake.wait_for(lambda: bool(told()), what="the superseded line")
    [line] = told()
    assert call_text(line) == NOT_ANSWERED["superseded"] and flags_of(line) & EPHEMERAL
    assert any(call.method == "DELETE" for call in calls_for(fake, calls))
    asked_id = int(calls[0].path.split("/")[-3])
    assert (await decided(client, {"id": str(asked_id)})).reason == "superseded"
    await eventually(lambda: len(llm.requests) == 2)  # Alice's mention, answered
    assert "what time is it" in request_texts(llm.requests[1])[-1]
    assert int(newer["id"]) > asked_id


async def test_a_public_answer_discord_would_not_take_is_told_once_and_privately(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """The response's first post is turned down: the asker gets one line, only they see it, and nothing of it is
    posted in (or recorded by) the channel's conversation."""
    llm.handler = lambda request: ANSWER
    client = await bot.start(stream_answers=False)
    fake.fail_next_edits(1, status=400)
    calls = await use_top_command(fake, "ask", [option("question", QUESTION)])

    def notices() -> list[InteractionCall]:
        return [
            call for call in calls_for(fake, calls) if call.body and call_text(call) in (LOST, NOT_ANSWERED_OTHERWISE)
        ]

    await fake.wait_for(lambda: bool(notices()), what="the line saying the answer was lost")
    await settled(fake)  # no second notice follows
    [notice] = notices()
    assert notice.method == "POST" and flags_of(notice) & EPHEMERAL
    assert fake.bot_messages(CHANNEL_ID) == []
    conversation = client.manager.get(CHANNEL_ID)
    assert conversation is not None and conversation.llm_history == []


async def test_in_direct_messages_ask_follows_the_direct_messages_setting(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """DIRECT_MESSAGES off: one line says so, and no model is called. On: the answer is the command's response in
    the DM."""
    llm.handler = lambda request: ANSWER
    await bot.start()
    calls = await use_top_command(fake, "ask", [option("question", QUESTION)], in_guild=False)
    await settled(fake)
    assert assert_told_after_deferral(calls_for(fake, calls)) == DIRECT_MESSAGES_OFF
    assert llm.requests == []
    await bot.stop()

    await bot.start(direct_messages=True)
    calls = await ask(fake, QUESTION, in_guild=False)
    assert ANSWER in "\n".join(call_text(call) for call in calls)
    assert any(QUESTION in text for text in request_texts(llm.requests[0]))


async def test_a_public_ask_streams_into_its_response_with_a_stop_button(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """A long answer streams into the command's response, edited as it grows, with Stop: the asker's press ends it
    there, marked "(stopped)", as it would a mention's answer."""
    prose = " ".join(f"Sentence number {i} says a little more about it." for i in range(120))
    llm.handler = lambda request: prose
    llm.stream_delay, llm.words_per_chunk = 0.05, 2
    client = await bot.start(stream_edit_seconds=0.2)
    await use_top_command(fake, "ask", [option("question", "tell me everything")])

    def stop_id() -> str | None:
        messages = fake.bot_messages(CHANNEL_ID)
        rows = messages[0].get("components") or [] if messages else []
        return next((button["custom_id"] for row in rows for button in row.get("components", [])), None)

    await fake.wait_for(lambda: stop_id() is not None, timeout=10, what="Stop")
    [response] = fake.bot_messages(CHANNEL_ID)
    await eventually(lambda: client.streams.live_on(int(response["id"])) is not None)
    custom_id = stop_id()
    assert custom_id is not None
    await click(fake, response, custom_id, user_id=ALICE_ID)
    await fake.wait_for(lambda: fake.bot_messages(CHANNEL_ID)[0]["content"].endswith("(stopped)"), timeout=10)
    [stopped] = fake.bot_messages(CHANNEL_ID)
    assert stop_id() is None and len(stopped["content"]) < len(prose)


async def test_after_a_public_ask_an_earlier_answer_is_not_regenerated_in_its_place(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """Regenerate rewrites the conversation's last bot turn: once an /ask answer is that turn (which Regenerate
    cannot write again: no member's message asked it), the mention's answer before it is refused."""
    llm.handler = lambda request: ANSWER
    await bot.start()
    await say(fake, BOB_ID, f"<@{BOT_ID}> hello?")
    [post] = await fake.wait_for_posts(1, CHANNEL_ID)
    await ask(fake, QUESTION, user_id=BOB_ID)
    await eventually(lambda: len(fake.bot_messages(CHANNEL_ID)) == 2)
    calls = await use_message_command(fake, "Regenerate", post.message, user_id=BOB_ID)
    assert assert_ephemeral_one_liner(calls) == CANNOT_REGENERATE
    assert len(llm.requests) == 2
