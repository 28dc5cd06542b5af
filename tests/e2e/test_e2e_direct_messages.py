"""End-to-end: direct messages are ignored unless DIRECT_MESSAGES is on; then every one is for Parley, and its tools
there reach that DM alone."""

from __future__ import annotations

from typing import Any

from tests.fakes.fake_discord import ALICE_ID, BOB_ID, CHANNEL_ID, DIRECT_MESSAGES_INTENT, GUILD_ID, FakeDiscord
from tests.fakes.fake_llm import FakeLLM, ToolCall, echo
from tests.support.e2e_support import RunningBot, eventually, request_texts, say, settled


async def test_direct_messages_are_ignored_by_default(bot: RunningBot, fake: FakeDiscord) -> None:
    """With DIRECT_MESSAGES off the bot asks Discord for no DMs, and a DM gets no answer."""
    await bot.start()
    assert not fake.identifies[-1]["intents"] & DIRECT_MESSAGES_INTENT
    dm = fake.dm_channel(ALICE_ID)
    await fake.send_dm(ALICE_ID, "hello, are you there?")
    await settled(fake)
    assert fake.posts_in(dm) == []


async def test_every_direct_message_is_answered(bot: RunningBot, fake: FakeDiscord, llm: FakeLLM) -> None:
    """With DIRECT_MESSAGES on, each DM is answered in the DM without any mention, with the earlier turns in history."""
    await bot.start(direct_messages=True)
    assert fake.identifies[-1]["intents"] & DIRECT_MESSAGES_INTENT
    dm = fake.dm_channel(ALICE_ID)
    await fake.send_dm(ALICE_ID, "my favourite animal is the ferret")
    await fake.wait_for_posts(1, channel_id=dm)
    await fake.send_dm(ALICE_ID, "which animal was that?")
    posts = await fake.wait_for_posts(2, channel_id=dm)
    assert "which animal was that?" in posts[1].content
    assert any("ferret" in text for text in request_texts(llm.requests[-1])[:-1])


async def test_tools_in_a_dm_reach_nothing_of_the_servers(bot: RunningBot, fake: FakeDiscord, llm: FakeLLM) -> None:
    """In a DM, searching the history and recalling memories finds what was said in that DM, never a server's."""

    def search_and_recall(request: dict[str, Any]) -> str | list[ToolCall]:
        if request["messages"][-1]["role"] == "tool":
            return "done"
        if "look it up" in request_texts(request)[-1]:
            return [ToolCall("search_history", {"query": "launch code"}), ToolCall("recall", {"query": "launch code"})]
        return echo(request)

    llm.handler = search_and_recall
    client = await bot.start(direct_messages=True)
    await say(fake, ALICE_ID, "the launch code is tango-1234")
    memory = client.memory
    assert memory is not None
    await memory.remember(
        guild_id=GUILD_ID,
        channel_id=CHANNEL_ID,
        said_by_id=ALICE_ID,
        source_message_id=1,
        fact="Alice's launch code is tango-1234",
        about_speaker=True,
    )
    dm = fake.dm_channel(ALICE_ID)
    await fake.send_dm(ALICE_ID, "my own launch code is zulu-9876")
    await fake.wait_for_posts(1, channel_id=dm)
    await fake.send_dm(ALICE_ID, "look it up: what is the launch code?")
    await fake.wait_for_posts(2, channel_id=dm)
    search, recall = tool_results(llm.requests[-1])
    assert "zulu-9876" in search and "tango-1234" not in search
    assert "tango-1234" not in recall


async def test_one_persons_dm_is_not_anothers(bot: RunningBot, fake: FakeDiscord, llm: FakeLLM) -> None:
    """Bob's DM conversation knows nothing of Alice's: each DM is its own conversation and archive."""
    await bot.start(direct_messages=True)
    alice_dm, bob_dm = fake.dm_channel(ALICE_ID), fake.dm_channel(BOB_ID)
    await fake.send_dm(ALICE_ID, "my secret is the ferret")
    await fake.wait_for_posts(1, channel_id=alice_dm)
    await fake.send_dm(BOB_ID, "what did alice tell you?")
    await fake.wait_for_posts(1, channel_id=bob_dm)
    await eventually(lambda: len(llm.requests) >= 2)
    assert not any("ferret" in text for text in request_texts(llm.requests[-1]))


def tool_results(request: dict[str, Any]) -> list[str]:
    return [message["content"] for message in request["messages"] if message["role"] == "tool"]


async def test_an_entry_kept_for_a_server_parley_is_not_in_does_not_silence_direct_messages(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """A role blocked by command in a server Parley has since left (the entry outlived it: Parley was stopped, or
    another process served it): Discord answers that server with 403 Missing Access, which says Parley is not
    there, so that server's lists do not refuse anyone's DMs."""
    gone = GUILD_ID + (1 << 22)
    fake.failing_routes.add("GET /guilds/{guild_id}")  # 403, as Discord answers a server the bot is not in
    client = await bot.start(direct_messages=True)
    await client.access.lists.put(gone, 1234, "role", "block", ALICE_ID)
    await fake.send_dm(BOB_ID, "hello?")
    await fake.wait_for_posts(1, channel_id=fake.dm_channel(BOB_ID))
    asked = [request.status for request in fake.requests if request.path.startswith(f"/api/v10/guilds/{gone}?")]
    assert asked == [403]
