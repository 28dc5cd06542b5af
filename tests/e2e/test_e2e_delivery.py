"""End-to-end: an answer Discord will not take at first (a 503, five 500s in a row) is delivered once, or the
member is told it was lost; either way the conversation is not left believing it answered, and the member's next
plain follow-up is answered. A notice (admission's line to a member) is tried again alike and told once."""

from __future__ import annotations

import pytest
from pydantic_ai.messages import ModelResponse, TextPart

from admission.access import AccessVerdict
from answering.outcome import CUT_NOTE, LOST
from tests.fakes.fake_discord import ALICE_ID, BOT_ID, CHANNEL_ID, FakeDiscord
from tests.fakes.fake_llm import FakeLLM, echo
from tests.support.e2e_support import RunningBot, assert_silent, decided, eventually, request_texts, say

# Short enough for a test: the first wait between tries is a thirtieth of it, one try at most a third.
DEADLINE = 3.0


def answer_post_statuses(fake: FakeDiscord) -> list[int]:
    return [r.status for r in fake.requests if r.method == "POST" and r.path.endswith(f"/{CHANNEL_ID}/messages")]


async def follow_up_is_answered(fake: FakeDiscord, posts_before: int) -> None:
    """A plain follow-up (no mention) of the asker gets its own answer."""
    await say(fake, ALICE_ID, "what word did I ask you to remember?")
    posts = await fake.wait_for_posts(posts_before + 1, CHANNEL_ID, timeout=10)
    await assert_silent(fake, posts_before + 1)
    assert "what word did I ask you to remember?" in posts[-1].content


@pytest.mark.parametrize("stream", [False, True])
async def test_a_503_on_the_answer_post_is_retried_and_answered_once(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM, stream: bool
) -> None:
    """discord.py does not retry a 503: Parley does, and the member gets the answer once, recorded once."""
    client = await bot.start(answer_delivery_seconds=DEADLINE, stream_answers=stream)
    fake.fail_next_posts(1, status=503)
    question = await say(fake, ALICE_ID, f"<@{BOT_ID}> remember the word pelican")
    [post] = await fake.wait_for_posts(1, CHANNEL_ID, timeout=10)
    await assert_silent(fake, 1)
    assert answer_post_statuses(fake) == [503, 200]
    assert post.reply_to == int(question["id"]) and "pelican" in post.content
    conversation = client.manager.get(CHANNEL_ID)
    assert conversation is not None
    await eventually(lambda: len(conversation.llm_history) == 2)
    await follow_up_is_answered(fake, 1)


async def test_a_503_on_an_access_notice_is_retried_and_the_notice_told_once(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """The notice a blocked member is told goes the answers' way: a 503 is tried again, the member is told once,
    replying to them, and their next mention gets silence."""
    client = await bot.start(answer_delivery_seconds=DEADLINE, blocked_members=frozenset({ALICE_ID}))
    fake.fail_next_posts(1, status=503)
    question = await say(fake, ALICE_ID, f"<@{BOT_ID}> what's the weather like?")
    [notice] = await fake.wait_for_posts(1, CHANNEL_ID, timeout=10)
    assert notice.content == AccessVerdict.MEMBER_BLOCKED.notice and notice.reply_to == int(question["id"])
    assert answer_post_statuses(fake) == [503, 200]
    again = await say(fake, ALICE_ID, f"<@{BOT_ID}> hello?")
    assert (await decided(client, again)).reason == "not_allowed"
    await assert_silent(fake, 1)
    assert answer_post_statuses(fake) == [503, 200] and llm.requests == []


async def test_a_503_on_a_slow_down_notice_is_retried_and_the_notice_told_once(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """Past her rate, Alice's "Slow down" notice goes the answers' way: a 503 is tried again, she is told once,
    replying to her; the notice is no turn of the conversation, and her next mention gets silence."""
    client = await bot.start(answer_delivery_seconds=DEADLINE, member_answer_burst=1)
    await say(fake, ALICE_ID, f"<@{BOT_ID}> remember the word pelican")
    await fake.wait_for_posts(1, CHANNEL_ID, timeout=10)
    fake.fail_next_posts(1, status=503)
    question = await say(fake, ALICE_ID, f"<@{BOT_ID}> and another word?")
    [_, notice] = await fake.wait_for_posts(2, CHANNEL_ID, timeout=10)
    assert notice.content.startswith("Slow down") and notice.reply_to == int(question["id"])
    assert answer_post_statuses(fake) == [200, 503, 200]
    again = await say(fake, ALICE_ID, f"<@{BOT_ID}> hello?")
    assert (await decided(client, again)).reason == "member_rate_limited"
    await assert_silent(fake, 2)
    conversation = client.manager.get(CHANNEL_ID)
    assert conversation is not None
    assert all(not message.content.startswith("Slow down") for message in conversation.messages)
    assert len(llm.requests) == 1


@pytest.mark.slow  # discord.py's own waits between its retries of a 500 (1, 3, 5... s) take seconds
async def test_five_500s_past_the_deadline_end_in_one_lost_line_and_no_recorded_answer(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """Five 500s in a row outlast the deadline: the member gets one line saying the answer was lost, once Discord
    takes posts again, and the conversation holds no answer, so the next plain message is decided afresh."""
    client = await bot.start(answer_delivery_seconds=DEADLINE, stream_answers=False)
    fake.fail_next_posts(5, status=500)
    question = await say(fake, ALICE_ID, f"<@{BOT_ID}> remember the word pelican")
    [post] = await fake.wait_for_posts(1, CHANNEL_ID, timeout=15)
    await assert_silent(fake, 1)
    assert post.content == LOST and post.reply_to == int(question["id"])
    assert answer_post_statuses(fake) == [500] * 5 + [200]
    conversation = client.manager.get(CHANNEL_ID)
    assert conversation is not None
    assert conversation.llm_history == [] and conversation.latest_answer is None
    await follow_up_is_answered(fake, 1)


@pytest.mark.slow  # as above
async def test_five_500s_within_the_deadline_end_in_one_answer(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """Five 500s in a row that end before the deadline: the answer itself is posted, once."""
    client = await bot.start(answer_delivery_seconds=3 * DEADLINE, stream_answers=False)
    fake.fail_next_posts(5, status=500)
    await say(fake, ALICE_ID, f"<@{BOT_ID}> remember the word pelican")
    [post] = await fake.wait_for_posts(1, CHANNEL_ID, timeout=15)
    await assert_silent(fake, 1)
    assert "pelican" in post.content and post.content != LOST
    assert answer_post_statuses(fake) == [500] * 5 + [200]
    conversation = client.manager.get(CHANNEL_ID)
    assert conversation is not None
    await eventually(lambda: len(conversation.llm_history) == 2)
    await follow_up_is_answered(fake, 1)


async def test_503s_on_the_edits_of_a_streamed_answer_are_retried_and_it_ends_whole(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """discord.py does not retry a 503 on an edit either: Parley does, and the streamed answer still ends whole,
    recorded as answered."""
    prose = " ".join(f"Sentence number {i} says a little more about it." for i in range(30))
    llm.handler = lambda request: prose
    llm.stream_delay, llm.words_per_chunk = 0.015, 6  # 0.7 s: a few edits at 0.2 s, the first two refused
    fake.fail_next_edits(2, status=503)
    client = await bot.start(answer_delivery_seconds=DEADLINE, stream_edit_seconds=0.2)
    await say(fake, ALICE_ID, f"<@{BOT_ID}> tell me about it")
    await fake.wait_for(
        lambda: [m["content"] for m in fake.bot_messages(CHANNEL_ID)] == [prose], timeout=15, what="the whole answer"
    )
    assert [r.status for r in fake.requests if r.method == "PATCH"].count(503) == 2
    conversation = client.manager.get(CHANNEL_ID)
    assert conversation is not None
    await eventually(lambda: len(conversation.llm_history) == 2)


async def test_a_streamed_answer_cut_off_by_failed_edits_is_recorded_as_the_member_saw_it(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """Discord takes a streamed answer's first post, then no edit until the deadline: the member sees its start and
    the "lost" line; the bot's turn in the conversation is that start, marked cut off, not the whole answer, and the
    member's next plain follow-up is answered with it in the model's history."""
    prose = " ".join(f"Sentence number {i} says a little more about it." for i in range(30))
    answers = iter([prose])
    llm.handler = lambda request: next(answers, None) or echo(request)
    llm.stream_delay, llm.words_per_chunk = 0.03, 6
    fake.fail_next_edits(1_000, status=503)
    # Half the usual deadline: no edit ever lands, so the test waits the whole of it for the "lost" line.
    client = await bot.start(answer_delivery_seconds=DEADLINE / 2, stream_edit_seconds=0.2)
    question = await say(fake, ALICE_ID, f"<@{BOT_ID}> tell me about it")
    posts = await fake.wait_for_posts(2, CHANNEL_ID, timeout=15)
    await assert_silent(fake, 2)
    assert [post.reply_to for post in posts] == [int(question["id"])] * 2 and posts[1].content == LOST
    [shown, _] = [message["content"] for message in fake.bot_messages(CHANNEL_ID)]
    assert shown and prose.startswith(shown) and shown != prose
    conversation = client.manager.get(CHANNEL_ID)
    assert conversation is not None
    await eventually(lambda: len(conversation.llm_history) == 2)
    turn = conversation.llm_history[-1]
    assert isinstance(turn, ModelResponse)
    assert [part.content for part in turn.parts if isinstance(part, TextPart)] == [f"{shown}\n\n{CUT_NOTE}"]
    fake.stop_failing()
    await follow_up_is_answered(fake, 2)
    assert any(f"{shown}\n\n{CUT_NOTE}" in text for text in request_texts(llm.requests[-1]))
