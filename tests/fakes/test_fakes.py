"""The fakes work with the real discord.py client and pydantic-ai's OpenAI chat model."""

from __future__ import annotations

import asyncio
import io
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import aiohttp
import discord
import pytest
import yarl
from pydantic_ai import Agent, ModelHTTPError
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from tests.fakes.fake_discord import FakeDiscord
from tests.fakes.fake_llm import MODEL_NAME, Error, FakeLLM, ToolCall, allow_model_requests, replies

STARTUP_TIMEOUT = 5.0


class RecordingClient(discord.Client):
    def __init__(self) -> None:
        intents = discord.Intents(guilds=True, guild_messages=True, message_content=True)
        super().__init__(intents=intents, guild_ready_timeout=0.1)
        self.received: asyncio.Queue[discord.Message] = asyncio.Queue()

    async def on_message(self, message: discord.Message) -> None:
        await self.received.put(message)

    async def next_message(self) -> discord.Message:
        return await asyncio.wait_for(self.received.get(), timeout=2.0)


@pytest.fixture
async def client(fake: FakeDiscord, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[RecordingClient]:
    monkeypatch.setattr(discord.http.Route, "BASE", fake.api_base_url)
    monkeypatch.setattr(discord.gateway.DiscordWebSocket, "DEFAULT_GATEWAY", yarl.URL(fake.gateway_url))
    client = RecordingClient()
    running = asyncio.create_task(client.start(fake.token))
    ready = asyncio.create_task(client.wait_until_ready())
    done, _ = await asyncio.wait({running, ready}, timeout=STARTUP_TIMEOUT, return_when=asyncio.FIRST_COMPLETED)
    if ready not in done:
        ready.cancel()
        await client.close()
        [outcome] = await asyncio.gather(running, return_exceptions=True)
        raise AssertionError(f"client did not become ready within {STARTUP_TIMEOUT}s: {outcome!r}")
    yield client
    await client.close()
    await running


@pytest.fixture
async def agent(llm: FakeLLM) -> AsyncIterator[Agent[None, str]]:
    model = OpenAIChatModel(MODEL_NAME, provider=OpenAIProvider(base_url=llm.base_url, api_key="x"))
    # Entering the agent makes it close the HTTP client its provider created, on exit.
    with allow_model_requests():
        async with Agent(model) as agent:
            yield agent


async def test_client_reaches_ready_and_sees_the_world(fake: FakeDiscord, client: RecordingClient) -> None:
    """Login, IDENTIFY and GUILD_CREATE give the client its user, the guild, channels and permissions."""
    assert client.user is not None and client.user.id == fake.bot_id
    guild = client.get_guild(fake.guild_id)
    assert guild is not None and not guild.unavailable
    channel = guild.get_channel(fake.channel_id)
    assert isinstance(channel, discord.TextChannel)
    assert guild.get_channel(fake.other_channel_id) is not None
    perms = channel.permissions_for(guild.me)
    assert perms.view_channel and perms.send_messages and perms.read_message_history
    identify = await fake.wait_until_identified()
    assert discord.Intents._from_value(identify["intents"]).message_content
    assert fake.unknown_routes == []
    assert fake.handler_errors == []


async def test_injected_reply_arrives_with_author_mentions_and_reference(
    fake: FakeDiscord, client: RecordingClient
) -> None:
    """A user's reply reaches on_message with its member author, pinged users and resolved reference."""
    earlier = fake.add_history(fake.channel_id, fake.bot_id, "what do you all think?")
    sent = await fake.send_user_message(
        fake.channel_id, fake.alice_id, f"<@{fake.carol_id}> agrees", reply_to=int(earlier["id"])
    )
    message = await client.next_message()
    assert message.id == int(sent["id"])
    assert isinstance(message.author, discord.Member) and message.author.id == fake.alice_id
    assert message.guild is not None and message.guild.id == fake.guild_id
    assert {user.id for user in message.mentions} == {fake.carol_id, fake.bot_id}  # the reply pings its author
    assert message.reference is not None and message.reference.message_id == int(earlier["id"])
    assert isinstance(message.reference.resolved, discord.Message)
    assert message.reference.resolved.content == "what do you all think?"
    assert abs(message.created_at - datetime.now(UTC)) < timedelta(seconds=5)


async def test_send_stores_reference_and_allowed_mentions(fake: FakeDiscord, client: RecordingClient) -> None:
    """channel.send posts the JSON body Discord expects, and the fake echoes the post over the gateway."""
    user_message = await fake.send_user_message(fake.channel_id, fake.bob_id, "hello bot")
    received = await client.next_message()
    sent = await received.channel.send(
        f"hi <@{fake.bob_id}>",
        reference=received,
        allowed_mentions=discord.AllowedMentions(users=False, replied_user=False),
    )
    [post] = await fake.wait_for_posts(1, channel_id=fake.channel_id)
    assert post.content == f"hi <@{fake.bob_id}>"
    assert post.reply_to == int(user_message["id"])
    assert post.body["allowed_mentions"] == {"parse": ["everyone", "roles"]}  # discord.py omits replied_user=False
    assert sent.id == int(post.message["id"]) and sent.mentions == []
    echo = await client.next_message()
    assert echo.id == sent.id and echo.author == client.user


async def test_history_pages_seeded_messages(fake: FakeDiscord, client: RecordingClient) -> None:
    """channel.history returns seeded messages newest first, honouring limit, before and after."""
    start = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
    for minute, author in enumerate((fake.alice_id, fake.bob_id, fake.carol_id, fake.alice_id)):
        fake.add_history(fake.channel_id, author, f"m{minute}", start + timedelta(minutes=minute))
    channel = client.get_channel(fake.channel_id)
    assert isinstance(channel, discord.TextChannel)
    assert [m.content async for m in channel.history(limit=3)] == ["m3", "m2", "m1"]
    assert [m.content async for m in channel.history(after=start)] == ["m1", "m2", "m3"]
    before = start + timedelta(minutes=2)
    older = [m async for m in channel.history(before=before)]
    assert [m.content for m in older] == ["m1", "m0"]
    assert older[-1].created_at == start and older[-1].author.id == fake.alice_id


async def test_pins_are_listed_in_pages_and_changes_dispatched(fake: FakeDiscord, client: RecordingClient) -> None:
    """channel.pins() pages through the listing (50 a page, newest pin first); a pin or an unpin dispatches
    CHANNEL_PINS_UPDATE; a deleted message leaves the pins; a channel whose pins may not be read answers 403."""
    changes: asyncio.Queue[int] = asyncio.Queue()

    async def pins_changed(channel: discord.abc.GuildChannel, last_pin: datetime | None) -> None:
        await changes.put(channel.id)

    client.on_guild_channel_pins_update = pins_changed  # type: ignore[attr-defined]
    messages = [await fake.send_user_message(fake.channel_id, fake.alice_id, f"note {n}") for n in range(53)]
    for message in messages:
        await fake.pin(fake.channel_id, int(message["id"]), quietly=True)
    channel = client.get_channel(fake.channel_id)
    assert isinstance(channel, discord.TextChannel)
    listed = [m async for m in channel.pins(limit=None)]
    assert [m.content for m in listed] == [f"note {n}" for n in reversed(range(53))]
    assert all(m.pinned and m.pinned_at is not None for m in listed)

    await fake.unpin(fake.channel_id, int(messages[0]["id"]))
    assert await asyncio.wait_for(changes.get(), 2.0) == fake.channel_id
    await fake.delete_messages(fake.channel_id, int(messages[1]["id"]))
    assert len([m async for m in channel.pins(limit=None)]) == 51

    fake.pin_failures[fake.channel_id] = 403
    with pytest.raises(discord.Forbidden):
        [m async for m in channel.pins()]


async def test_threads_and_nicknames_reach_the_client(fake: FakeDiscord, client: RecordingClient) -> None:
    """A thread the fake opens is a discord.Thread in its parent channel; a member's nickname is their display name."""
    fake.users[fake.alice_id] = replace(fake.users[fake.alice_id], nick="Parley")
    thread_id = await fake.create_thread(fake.channel_id, "release planning")
    await fake.send_user_message(thread_id, fake.alice_id, "first post in the thread")
    message = await client.next_message()
    assert isinstance(message.channel, discord.Thread)
    assert message.channel.name == "release planning" and message.channel.parent_id == fake.channel_id
    assert message.author.display_name == "Parley" and message.author.id == fake.alice_id

    await message.channel.send("answered in the thread")
    assert [post.content for post in fake.posts_in(thread_id)] == ["answered in the thread"]


async def test_typing_is_recorded(fake: FakeDiscord, client: RecordingClient) -> None:
    """channel.typing() hits POST /typing, which the fake records per channel."""
    channel = client.get_channel(fake.other_channel_id)
    assert isinstance(channel, discord.TextChannel)
    async with channel.typing():
        pass
    assert [event.channel_id for event in fake.typing_events] == [fake.other_channel_id]


async def test_injected_post_failures_are_retried(fake: FakeDiscord, client: RecordingClient) -> None:
    """discord.py retries a 500 (after 1 s) and a 429 (after retry_after) and the post then lands."""
    # The 500 goes first: discord.py waits 1 + 2 * attempt seconds before retrying one.
    fake.fail_next_posts(1, status=500)
    fake.fail_next_posts(1, status=429, retry_after=0.05)
    channel = client.get_channel(fake.channel_id)
    assert isinstance(channel, discord.TextChannel)
    await channel.send("persistent")
    statuses = [r.status for r in fake.requests if r.method == "POST" and r.path.endswith("/messages")]
    assert statuses == [500, 429, 200]
    assert [post.content for post in fake.bot_posts] == ["persistent"]


async def test_file_upload_is_parsed_from_multipart(fake: FakeDiscord, client: RecordingClient) -> None:
    """A send with a file arrives as multipart; the fake reads payload_json and the file."""
    channel = client.get_channel(fake.channel_id)
    assert isinstance(channel, discord.TextChannel)
    sent = await channel.send("see attached", file=discord.File(io.BytesIO(b"abc"), "notes.txt"))
    [post] = fake.bot_posts
    assert post.content == "see attached" and post.files == [("notes.txt", b"abc")]
    assert sent.attachments[0].filename == "notes.txt"


async def test_client_resumes_after_reconnect_request(fake: FakeDiscord, client: RecordingClient) -> None:
    """After op 7 the client RESUMEs the same session and keeps receiving events."""
    await fake.force_reconnect()
    await fake.wait_for(lambda: len(fake.resumes) == 1, what="RESUME")
    sent = await fake.send_user_message(fake.channel_id, fake.carol_id, "still there?")
    assert (await client.next_message()).id == int(sent["id"])
    assert len(fake.identifies) == 1


async def test_agent_returns_scripted_text(llm: FakeLLM, agent: Agent[None, str]) -> None:
    """An agent run returns the (awaited) handler's text and the fake records the prompt sent."""

    async def slow_reply(request: dict[str, object]) -> str:
        await asyncio.sleep(0.01)
        return "scripted answer"

    llm.handler = slow_reply
    result = await agent.run("what is up?")
    assert result.output == "scripted answer"
    [request] = llm.requests
    assert request["model"] == MODEL_NAME
    assert request["messages"][-1] == {"role": "user", "content": "what is up?"}


async def test_agent_calls_scripted_tool(llm: FakeLLM, agent: Agent[None, str]) -> None:
    """A scripted tool call runs the agent's tool, whose result goes back in the next request."""
    calls: list[tuple[int, int]] = []

    @agent.tool_plain
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        calls.append((a, b))
        return a + b

    llm.handler = replies(ToolCall("add", {"a": 2, "b": 3}), "the sum is 5")
    result = await agent.run("add 2 and 3")
    assert result.output == "the sum is 5"
    assert calls == [(2, 3)]
    assert [tool["function"]["name"] for tool in llm.requests[0]["tools"]] == ["add"]
    tool_message = llm.requests[1]["messages"][-1]
    assert tool_message["role"] == "tool" and tool_message["content"] == "5"


async def test_agent_raises_on_server_error(llm: FakeLLM, agent: Agent[None, str]) -> None:
    """A 500 surfaces as ModelHTTPError after the openai SDK's two quick retries."""
    llm.handler = lambda request: Error(500, "boom")
    with pytest.raises(ModelHTTPError) as raised:
        await agent.run("hello")
    assert raised.value.status_code == 500
    assert len(llm.requests) == 3


async def test_agent_streams_default_echo(llm: FakeLLM, agent: Agent[None, str]) -> None:
    """Streaming runs get SSE chunks; the default handler echoes the last user message."""
    async with agent.run_stream("ping pong") as result:
        output = await result.get_output()
    assert output == "echo: ping pong"
    assert llm.requests[0]["stream"] is True


async def test_llm_lists_models(llm: FakeLLM) -> None:
    """GET /v1/models lists the fake model, as OpenAI-compatible servers do."""
    async with aiohttp.ClientSession() as session, session.get(f"{llm.base_url}/models") as response:
        listing = await response.json()
    assert [model["id"] for model in listing["data"]] == [MODEL_NAME]


class ShardClient(discord.AutoShardedClient):
    def __init__(self, **options: object) -> None:
        intents = discord.Intents(guilds=True, guild_messages=True, message_content=True)
        super().__init__(intents=intents, guild_ready_timeout=0.1, **options)  # type: ignore[arg-type]

    async def before_identify_hook(self, shard_id: int | None, *, initial: bool = False) -> None:
        """Identify at once: discord.py's default waits 5 s before each IDENTIFY after the first, as Discord's
        identify rate limit asks, which the fake does not have.

        https://discordpy.readthedocs.io/en/stable/api.html#discord.Client.before_identify_hook
        """


async def test_each_shard_session_gets_only_its_servers_events(monkeypatch: pytest.MonkeyPatch) -> None:
    """Unasked, two shards run; a client of shard 0 alone sees only its servers until one is handed over to it."""
    async with FakeDiscord(shard_count=2) as fake:
        monkeypatch.setattr(discord.http.Route, "BASE", fake.api_base_url)
        monkeypatch.setattr(discord.gateway.DiscordWebSocket, "DEFAULT_GATEWAY", yarl.URL(fake.gateway_url))
        other_guild, other_channel = await fake.add_guild("Other Guild", shard=(1, 2))
        assert fake.shard_of(fake.guild_id, 2) == 0
        both = ShardClient()
        async with both:
            running = asyncio.create_task(both.start(fake.token))
            await asyncio.wait_for(both.wait_until_ready(), STARTUP_TIMEOUT)
            assert sorted(identify["shard"] for identify in fake.identifies) == [[0, 2], [1, 2]]
            assert {guild.id for guild in both.guilds} == {fake.guild_id, other_guild}
            await both.close()
            await running
        zero = ShardClient(shard_count=2, shard_ids=[0])
        async with zero:
            running = asyncio.create_task(zero.start(fake.token))
            await fake.wait_for_shard(0)
            await asyncio.wait_for(zero.wait_until_ready(), STARTUP_TIMEOUT)
            assert [guild.id for guild in zero.guilds] == [fake.guild_id]
            await fake.send_user_message(other_channel, fake.alice_id, "for shard 1")
            assert all(data.get("content") != "for shard 1" for _, data in fake.events_of(0))
            await fake.hand_over(other_guild, 0)
            async with asyncio.timeout(STARTUP_TIMEOUT):
                while zero.get_guild(other_guild) is None:  # noqa: ASYNC110 - the client's cache has no event
                    await asyncio.sleep(0.01)
            await fake.send_user_message(other_channel, fake.alice_id, "now for shard 0")
            assert ("MESSAGE_CREATE", "now for shard 0") in [
                (event, data.get("content")) for event, data in fake.events_of(0)
            ]
            await zero.close()
            await running
