"""End-to-end: `/parley-admin threads on` moves a conversation into a thread Parley opens, which lives while it is
open."""

from __future__ import annotations

from typing import Any

import discord

from bot import Parley
from tests.fakes.fake_discord import ALICE_ID, BOB_ID, BOT_ID, CHANNEL_ID, GUILD_ID, FakeDiscord, Post
from tests.fakes.fake_llm import FakeLLM, ToolCall, echo
from tests.support.e2e_support import (
    MEMBER,
    RunningBot,
    eventually,
    option,
    reply_text,
    request_texts,
    run_command,
    say,
    settled,
)
from tools import HISTORY_NOT_PERMITTED

# Short: the tests move the engine's clock past it (RunningBot.clock); a channel's conversation would be over by then.
TIMEOUT = 1.0


async def threads_on(fake: FakeDiscord) -> str:
    """Use `/parley-admin threads on` in #general; what Parley replied."""
    return reply_text(await run_command(fake, "threads", [option("setting", "on")]))


async def open_thread(fake: FakeDiscord, question: str = "how do I list files?") -> tuple[int, Post]:
    """Alice @mentions Parley in #general; the thread Parley opened on her message, and its first post there."""
    message = await say(fake, ALICE_ID, f"<@{BOT_ID}> {question}")
    thread_id = int(message["id"])
    [post] = await fake.wait_for_posts(1, channel_id=thread_id)
    return thread_id, post


async def in_thread(fake: FakeDiscord, thread_id: int, author: int, content: str, **options: Any) -> dict[str, Any]:
    return await fake.send_user_message(thread_id, author, content, **options)


async def test_a_mention_opens_a_thread_on_the_message_and_is_answered_inside(
    bot: RunningBot, fake: FakeDiscord
) -> None:
    """With threads on, an @mention gets a thread started from it (named from the question) and the answer is there."""
    await bot.start()
    assert "Threads are **on**" in await threads_on(fake)
    thread_id, post = await open_thread(fake)
    [(channel_id, message_id, body)] = fake.threads_started
    assert (channel_id, message_id) == (CHANNEL_ID, thread_id)
    assert body["name"] == "how do I list files?"
    assert "how do I list files?" in post.content
    assert fake.posts_in(CHANNEL_ID) == []
    # The answer pings no one but the asker, whatever it says.
    assert post.body["allowed_mentions"] == {"parse": [], "users": [ALICE_ID], "replied_user": True}


async def test_every_message_in_the_thread_is_for_parley_unless_addressed_to_someone_else(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """A follow-up in the thread without a mention is answered; a message there to another member is left alone."""
    client = await bot.start()
    await threads_on(fake)
    thread_id, _ = await open_thread(fake)
    await in_thread(fake, thread_id, BOB_ID, "and with sizes?")
    posts = await fake.wait_for_posts(2, channel_id=thread_id)
    assert "and with sizes?" in posts[1].content
    aside = await in_thread(fake, thread_id, ALICE_ID, f"<@{BOB_ID}> did that work for you?")
    entry = await wait_for_decision(client, thread_id, aside)
    assert (entry.respond, entry.reason) == (False, "addressed_to_other")
    await settled(fake)
    assert len(fake.posts_in(thread_id)) == 2
    # The aside is still part of the conversation: the next answer's prompt quotes it.
    await in_thread(fake, thread_id, ALICE_ID, "thanks, anything else?")
    await fake.wait_for_posts(3, channel_id=thread_id)
    assert "did that work for you?" in request_texts(llm.requests[-1])[-1]


async def test_the_thread_outlives_the_inactivity_timeout_and_a_restart(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """Long after the timeout, and after a restart, a message in Parley's thread is answered with the earlier turns."""
    await bot.start(conversation_timeout_seconds=TIMEOUT)
    await threads_on(fake)
    thread_id, _ = await open_thread(fake, "my favourite animal is the ferret")
    bot.clock.advance(TIMEOUT * 2)
    await in_thread(fake, thread_id, ALICE_ID, "still there?")
    await fake.wait_for_posts(2, channel_id=thread_id)
    await bot.stop()
    bot.clock.advance(TIMEOUT * 2)

    client = await bot.start(conversation_timeout_seconds=TIMEOUT)
    conversation = client.manager.get(thread_id)
    assert conversation is not None and conversation.bot_turns == 2
    await in_thread(fake, thread_id, ALICE_ID, "which animal was that?")
    posts = await fake.wait_for_posts(3, channel_id=thread_id)
    assert "which animal was that?" in posts[2].content
    assert any("ferret" in text for text in request_texts(llm.requests[-1])[:-1])


async def test_an_archived_or_locked_thread_ends_the_conversation(bot: RunningBot, fake: FakeDiscord) -> None:
    """Archiving the thread ends its conversation; reopened by a member, it is Parley's again (a new conversation),
    and locking ends it again. Parley never reopens a thread itself."""
    client = await bot.start()
    await threads_on(fake)
    thread_id, _ = await open_thread(fake)
    await fake.update_thread(thread_id, archived=True)
    await eventually(lambda: client.manager.get(thread_id) is None)
    await fake.update_thread(thread_id, archived=False)
    await in_thread(fake, thread_id, ALICE_ID, "back again")
    await fake.wait_for_posts(2, channel_id=thread_id)
    await fake.update_thread(thread_id, locked=True)
    await eventually(lambda: client.manager.get(thread_id) is None)
    await settled(fake)
    assert not any(request.method == "PATCH" and f"/channels/{thread_id}" in request.path for request in fake.requests)


async def test_search_in_a_thread_follows_the_parent_channels_permissions(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """In a thread of a channel whose history Bob may not read, his search returns nothing of it; Alice's finds it."""
    fake.deny(CHANNEL_ID, BOB_ID, discord.Permissions(read_message_history=True))

    def search_first(request: dict[str, Any]) -> str | ToolCall:
        if request["messages"][-1]["role"] == "tool":
            return "done"
        if "search for" in request_texts(request)[-1]:
            return ToolCall("search_history", {"query": "ferret"})
        return echo(request)

    llm.handler = search_first
    await bot.start()
    await threads_on(fake)
    thread_id, _ = await open_thread(fake, "the ferret is called Bilbo")
    await in_thread(fake, thread_id, BOB_ID, "search for what was said about it")
    await fake.wait_for_posts(2, channel_id=thread_id)
    bobs = tool_results(llm.requests[-1])
    await in_thread(fake, thread_id, ALICE_ID, "search for what was said about it")
    await fake.wait_for_posts(3, channel_id=thread_id)
    alices = tool_results(llm.requests[-1])
    assert bobs == [HISTORY_NOT_PERMITTED]
    assert "Bilbo" in alices[-1]


async def test_threads_off_answers_in_the_channel(bot: RunningBot, fake: FakeDiscord) -> None:
    """`/parley-admin threads off` puts Parley back to answering in the channel, and the setting outlives a restart."""
    await bot.start()
    await threads_on(fake)
    assert "Threads are **off**" in reply_text(await run_command(fake, "threads", [option("setting", "off")]))
    await bot.stop()
    await bot.start()
    await say(fake, ALICE_ID, f"<@{BOT_ID}> how do I list files?")
    await fake.wait_for_posts(1, channel_id=CHANNEL_ID)
    assert fake.threads_started == []


def tool_results(request: dict[str, Any]) -> list[str]:
    return [message["content"] for message in request["messages"] if message["role"] == "tool"]


async def wait_for_decision(client: Parley, channel_id: int, message: dict[str, Any]) -> Any:
    """The decision about a message in `channel_id`, once made."""
    message_id = int(message["id"])

    def found() -> Any:
        return next((e for e in client.decisions.recent(channel_id) if e.message_id == message_id), None)

    await eventually(lambda: found() is not None)
    return found()


async def test_a_thread_archived_while_parley_was_away_is_not_taken_up_again(
    bot: RunningBot, fake: FakeDiscord
) -> None:
    """A thread archived while Parley was down has its kept conversation ended at the next start."""
    await bot.start()
    await threads_on(fake)
    thread_id, _ = await open_thread(fake)
    await bot.stop()
    fake.channels[thread_id].archived = True
    client = await bot.start()
    await eventually(lambda: client.manager.get(thread_id) is None)


async def test_only_manage_channels_may_switch_threads_on(bot: RunningBot, fake: FakeDiscord) -> None:
    """A member without Manage Channels is told so in one line, and mentions keep being answered in the channel."""
    await bot.start()
    calls = await run_command(fake, "threads", [option("setting", "on")], permissions=MEMBER)
    assert "You need the Manage Channels permission" in reply_text(calls)
    await say(fake, ALICE_ID, f"<@{BOT_ID}> how do I list files?")
    await fake.wait_for_posts(1, channel_id=CHANNEL_ID)
    assert fake.threads_started == []


async def test_the_threads_tokens_count_for_the_thread(bot: RunningBot, fake: FakeDiscord) -> None:
    """The tokens of an answer given in a thread Parley opened are the thread's, not the parent channel's."""
    client = await bot.start()
    await threads_on(fake)
    thread_id, _ = await open_thread(fake)
    await eventually(lambda: client.usage.summary(GUILD_ID, thread_id).channel_tokens > 0)
    assert client.usage.summary(GUILD_ID, CHANNEL_ID).channel_tokens == 0


async def test_a_member_past_their_rate_gets_no_thread(bot: RunningBot, fake: FakeDiscord) -> None:
    """Over MEMBER_ANSWERS_PER_HOUR, a mention opens no thread: the slow-down line is said in the channel."""
    await bot.start(member_answers_per_hour=1, member_answer_burst=1)
    await threads_on(fake)
    await open_thread(fake)
    await say(fake, ALICE_ID, f"<@{BOT_ID}> and another question?")
    [notice] = await fake.wait_for_posts(1, channel_id=CHANNEL_ID)
    assert notice.content.startswith("Slow down a little")
    assert len(fake.threads_started) == 1
