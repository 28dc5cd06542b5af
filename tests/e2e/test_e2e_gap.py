"""End-to-end: questions asked while Parley was away (an invalidated or unresumable gateway session, a restart) are
answered once from catch-up, with the gap's other messages in their context, or logged when too old."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import discord
import pytest

from answering.gap import GapQuestions
from tests.conftest import fresh_postgres_database
from tests.e2e.test_e2e_backfill import CATCH_UP_BOUND, archived, caught_up
from tests.fakes.fake_discord import ALICE_ID, BOB_ID, BOT_ID, CHANNEL_ID, FakeDiscord
from tests.fakes.fake_llm import FakeLLM, allow_model_requests
from tests.support.e2e_support import (
    RunningBot,
    assert_silent,
    decided,
    eventually,
    request_texts,
    say,
    two_processes_serving_the_server,
)

HISTORY_ROUTE = "GET /channels/{channel_id}/messages"


async def invalidated(fake: FakeDiscord) -> None:
    """Discord invalidates the session: discord.py identifies again after 5 seconds."""
    await fake.invalidate_session()


async def resume_refused(fake: FakeDiscord) -> None:
    """The connection drops and Discord refuses the RESUME (op 9): discord.py identifies again after 5 seconds."""
    fake.refuse_resumes = True
    await fake.drop_gateway(1006)


def held_once(conversation_ids: list[int], *message_ids: int) -> bool:
    return all(conversation_ids.count(message_id) == 1 for message_id in message_ids)


@pytest.mark.slow  # discord.py waits 5 seconds before identifying again
@pytest.mark.parametrize("gap", [invalidated, resume_refused], ids=["op-9", "resume-refused"])
async def test_a_follow_up_sent_in_the_gap_is_answered_once_with_the_bystander_in_its_request(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM, gap: Callable[[FakeDiscord], Awaitable[None]]
) -> None:
    """Mid-conversation the session is lost; a bystander's message and the asker's plain follow-up sent before the
    next session starts are caught up: the follow-up is answered once, and its model request holds the bystander's
    message; both enter the live conversation once, in order."""
    client = await bot.start()
    await say(fake, ALICE_ID, f"<@{BOT_ID}> remember the word pelican")
    await fake.wait_for_posts(1)
    conversation = client.manager.get(CHANNEL_ID)
    assert conversation is not None
    await eventually(lambda: bool(conversation.llm_history))
    await gap(fake)
    bystander = await say(fake, BOB_ID, "the deploy moved to noon")
    follow_up = await say(fake, ALICE_ID, "what word did I ask you to remember?")
    await fake.wait_for_ready(timeout=15, sessions=2)
    posts = await fake.wait_for_posts(2, timeout=CATCH_UP_BOUND)
    await assert_silent(fake, 2)
    assert posts[1].reply_to == int(follow_up["id"])
    assert "what word did I ask you to remember?" in posts[1].content
    texts = request_texts(llm.requests[-1])
    assert any("the deploy moved to noon" in text for text in texts), texts
    assert any("remember the word pelican" in text for text in texts), texts
    assert client.manager.get(CHANNEL_ID) is conversation
    ids = [message.message_id for message in conversation.messages]
    assert held_once(ids, int(bystander["id"]), int(follow_up["id"]))
    assert ids.index(int(bystander["id"])) < ids.index(int(follow_up["id"]))


@pytest.mark.parametrize(
    ("asked", "reason"),
    [(f"<@{BOT_ID}> why is the build red?", "mention"), ("parley, why is the build red?", "called_by_name")],
    ids=["mention", "called-by-name"],
)
async def test_a_mention_sent_while_parley_was_stopped_is_answered_once_when_it_starts(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM, asked: str, reason: str
) -> None:
    """Parley is stopped (a redeploy); a bystander speaks and a member @mentions it (or calls it by name); started
    within GAP_ANSWER_MINUTES, it answers once, with the bystander's message in the model's request."""
    await bot.start()
    await bot.stop()
    fake.add_history(CHANNEL_ID, BOB_ID, "the build is red again")
    question = fake.add_history(CHANNEL_ID, ALICE_ID, asked)
    client = await bot.start()
    [post] = await fake.wait_for_posts(1, timeout=CATCH_UP_BOUND)
    await assert_silent(fake, 1)
    assert post.reply_to == int(question["id"])
    assert any("the build is red again" in text for text in request_texts(llm.requests[-1]))
    entry = await decided(client, question)
    assert (entry.respond, entry.reason) == (True, reason)


@pytest.mark.parametrize(
    ("minutes_ago", "settings"),
    [(15, {}), (0, {"gap_answer_minutes": 0})],
    ids=["older-than-the-window", "gap-answers-off"],
)
async def test_a_mention_from_the_gap_past_the_window_is_archived_logged_and_not_answered(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM, minutes_ago: int, settings: dict[str, Any]
) -> None:
    """A mention from before GAP_ANSWER_MINUTES (or with it 0) is archived and left, its decision `gap_too_old`."""
    await bot.start()
    await bot.stop()
    when = datetime.now(UTC) - timedelta(minutes=minutes_ago)
    question = fake.add_history(CHANNEL_ID, ALICE_ID, f"<@{BOT_ID}> is anyone there?", when)
    client = await bot.start(**settings)
    await caught_up(client)
    entry = await decided(client, question)
    assert (entry.respond, entry.reason) == (False, "gap_too_old")
    await assert_silent(fake, 0)
    assert llm.requests == []
    assert int(question["id"]) in await archived(client)


async def test_messages_the_gateway_delivered_too_are_neither_heard_nor_answered_twice(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """Messages catch-up finds missed that the gateway delivered as well (sent while the new session started) are
    not added to the conversation again, and the mention among them is not answered again."""
    client = await bot.start()
    question = await say(fake, ALICE_ID, f"<@{BOT_ID}> hello there")
    await fake.wait_for_posts(1)
    bystander = await say(fake, BOB_ID, "hello from me too")
    conversation = client.manager.get(CHANNEL_ID)
    assert conversation is not None
    await eventually(lambda: int(bystander["id"]) in [message.message_id for message in conversation.messages])
    gap, channel, archive = client.gap, client.get_channel(CHANNEL_ID), client.archive
    assert isinstance(gap, GapQuestions) and isinstance(channel, discord.TextChannel) and archive is not None
    for sent in (question, bystander):  # as catch-up reads them from the channel's history
        gap.found(await channel.fetch_message(int(sent["id"])))
    gap.caught_up(CHANNEL_ID)
    await gap.settled()
    await assert_silent(fake, 1)
    ids = [message.message_id for message in conversation.messages]
    assert held_once(ids, int(question["id"]), int(bystander["id"]))


async def test_a_question_parley_answered_before_a_crash_is_not_answered_again(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """A mention and Parley's reply to it that the archive lost (a crash before its commit) are caught up; the
    mention is not answered a second time."""
    await bot.start()
    await bot.stop()
    question = fake.add_history(CHANNEL_ID, ALICE_ID, f"<@{BOT_ID}> what is the time?")
    fake.add_history(CHANNEL_ID, BOT_ID, "Noon.", reply_to=int(question["id"]))
    client = await bot.start()
    await caught_up(client)
    await assert_silent(fake, 0)
    assert llm.requests == []
    assert set(await archived(client)) == {int(m["id"]) for m in fake.messages(CHANNEL_ID)}


async def test_two_processes_on_one_postgres_answer_a_mention_from_the_gap_once(
    fake: FakeDiscord,
    llm: FakeLLM,
    tmp_path: Path,
    postgres_server: str,
    discord_endpoints: None,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Two processes sharing one Postgres archive both catch up a mention sent while they were down (both read the
    channel's history before either archived it): exactly one answers it.

    Processes running the same shard are refused (archive/exclusive.py), but across a reshard the old count's process
    and the new count's can both serve a server: here shard 0 of 2 and shard 1 of 7 are both the fake's server's.
    """
    database_url = await fresh_postgres_database(postgres_server)
    question = fake.add_history(CHANNEL_ID, ALICE_ID, f"<@{BOT_ID}> who is on call?")
    fake.held_routes.add(HISTORY_ROUTE)
    with allow_model_requests(), caplog.at_level(logging.INFO, "parley.once"):
        async with two_processes_serving_the_server(fake, llm, tmp_path, database_url):
            # Each process reads the history of both of the server's channels.
            await fake.wait_for(lambda: fake.reached_held_routes.count(HISTORY_ROUTE) == 4, what="both catch-ups")
            fake.release(HISTORY_ROUTE)
            [post] = await fake.wait_for_posts(1, timeout=CATCH_UP_BOUND)
            await eventually(lambda: "is taken up by another process" in caplog.text, CATCH_UP_BOUND)
            await assert_silent(fake, 1)
    assert post.reply_to == int(question["id"])
    assert fake.handler_errors == [] and llm.handler_errors == []


def history_reads(fake: FakeDiscord) -> int:
    route = f"/channels/{CHANNEL_ID}/messages?"
    return sum(request.method == "GET" and route in request.path for request in fake.requests)


@pytest.mark.parametrize("close_code", [None, 1006, 4000], ids=["op-7", "1006", "4000"])
async def test_a_resumed_session_is_not_caught_up_its_replay_brings_the_follow_up(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM, close_code: int | None
) -> None:
    """Discord asks for a reconnect (op 7), or the connection drops (1006) or closes (4000): the session resumes and
    replays what was sent meanwhile, so no catch-up reads the channel's history, neither on the disconnect nor
    after; the follow-up sent meanwhile is answered once."""
    client = await bot.start()
    await say(fake, ALICE_ID, f"<@{BOT_ID}> remember the word pelican")
    await fake.wait_for_posts(1)
    await caught_up(client)
    reads = history_reads(fake)
    await (fake.force_reconnect() if close_code is None else fake.drop_gateway(close_code))
    follow_up = await say(fake, ALICE_ID, "what word was it?")
    await fake.wait_for(lambda: bool(fake.resumes), timeout=15, what="RESUME")
    posts = await fake.wait_for_posts(2, timeout=15)
    await assert_silent(fake, 2)
    assert posts[1].reply_to == int(follow_up["id"])
    assert (len(fake.identifies), history_reads(fake)) == (1, reads)


@pytest.mark.slow  # discord.py waits up to 5 seconds before identifying again
async def test_catch_up_starts_once_the_new_session_is_ready_not_on_the_disconnect(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """The connection drops and Discord refuses the RESUME: nothing reads the channel's history until the client
    has identified again; then catch-up does, and answers the follow-up sent in the gap once."""
    client = await bot.start()
    await say(fake, ALICE_ID, f"<@{BOT_ID}> remember the word pelican")
    await fake.wait_for_posts(1)
    await caught_up(client)
    reads = history_reads(fake)
    await resume_refused(fake)
    follow_up = await say(fake, ALICE_ID, "what word was it?")
    await fake.wait_for(lambda: len(fake.identifies) == 2, timeout=15, what="the second IDENTIFY")
    assert history_reads(fake) == reads
    posts = await fake.wait_for_posts(2, timeout=CATCH_UP_BOUND)
    await assert_silent(fake, 2)
    assert posts[1].reply_to == int(follow_up["id"]) and history_reads(fake) > reads
