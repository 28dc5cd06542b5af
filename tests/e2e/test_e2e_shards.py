"""End-to-end: processes running some of the bot's shards (SHARD_COUNT, SHARD_IDS) against the fake Discord."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from archive.backends import open_archive
from tests.conftest import fresh_postgres_database
from tests.fakes.fake_discord import ALICE_ID, BOT_ID, CHANNEL_ID, GUILD_ID, FakeDiscord, InteractionCall
from tests.fakes.fake_llm import FakeLLM, ToolCall, allow_model_requests, message_text
from tests.support.e2e_support import (
    RunningBot,
    bot_environment,
    command_payload,
    eventually,
    option,
    reply_text,
    run_command,
    say,
    start_bot_py,
)


async def test_a_process_runs_the_shard_it_is_given_and_status_names_it(bot: RunningBot, fake: FakeDiscord) -> None:
    """With SHARD_COUNT=2 and SHARD_IDS=1 the client identifies as shard 1 of 2, answers in a server of that shard
    (never in shard 0's, whose events it does not get), and status names the shard."""
    guild_id, channel_id = await fake.add_guild("Shard One", shard=(1, 2))
    client = await bot.start(shard_count=2, shard_ids=frozenset({1}))
    identify = await fake.wait_until_identified()
    assert identify["shard"] == [1, 2] and client.shard_count == 2
    assert [guild.id for guild in client.guilds] == [guild_id]
    await say(fake, ALICE_ID, f"<@{BOT_ID}> hello from shard 0's server")
    await fake.send_user_message(channel_id, ALICE_ID, f"<@{BOT_ID}> hello")
    await fake.wait_for_posts(1, channel_id)
    status = reply_text(await run_command(fake, "status", channel_id=channel_id))
    assert "Shard: 1 of 2" in status
    assert fake.posts_in(CHANNEL_ID) == []
    assert all(data.get("channel_id") != str(CHANNEL_ID) for _, data in fake.events_of(1))


async def test_without_shard_settings_discord_decides_and_one_process_runs_them(
    bot: RunningBot, fake: FakeDiscord
) -> None:
    """Unset, the client asks Discord how many shards to run (the fake says one) and runs shard 0 of 1."""
    client = await bot.start()
    identify = await fake.wait_until_identified()
    assert identify["shard"] == [0, 1] and client.shard_count == 1
    assert any(request.path.endswith("/gateway/bot") for request in fake.requests)


async def test_a_process_takes_up_only_the_kept_conversations_of_its_shards(bot: RunningBot, fake: FakeDiscord) -> None:
    """A conversation left live by shard 0's process stays in the archive, untouched, when shard 1's process starts."""
    await bot.start(shard_count=2, shard_ids=frozenset({0}))
    await say(fake, ALICE_ID, f"<@{BOT_ID}> remember this conversation")
    await fake.wait_for_posts(1)
    await bot.stop()
    client = await bot.start(shard_count=2, shard_ids=frozenset({1}))
    assert client.archive is not None
    assert client.manager.get(CHANNEL_ID) is None
    assert CHANNEL_ID in await client.archive.stored_conversations()


async def test_each_process_keeps_its_own_archive_coverage(bot: RunningBot, fake: FakeDiscord, tmp_path: Path) -> None:
    """What shard 0's process noted of its channels' coverage for its next start outlives shard 1's start."""
    _, other_channel = await fake.add_guild("Shard One", shard=(1, 2))
    client = await bot.start(shard_count=2, shard_ids=frozenset({0}))
    await eventually(
        lambda: CHANNEL_ID in client.coverage.covered_since and not client.coverage.catching_up, PROCESS_TIMEOUT
    )
    shard_zero_coverage = client.coverage.coverage_state
    await bot.stop()
    client = await bot.start(shard_count=2, shard_ids=frozenset({1}))
    await eventually(
        lambda: other_channel in client.coverage.covered_since and not client.coverage.catching_up, PROCESS_TIMEOUT
    )
    await bot.stop()
    archive = await open_archive(f"sqlite:///{tmp_path / 'parley.db'}")
    try:
        noted = json.loads(await archive.get_state(shard_zero_coverage) or "{}")
    finally:
        await archive.close()
    assert str(CHANNEL_ID) in noted


async def test_forget_on_postgres_says_the_conversation_ended(
    bot: RunningBot, fake: FakeDiscord, postgres_server: str
) -> None:
    """On a Postgres archive, whose change to the marker is announced back to this process too, /parley-admin forget
    still ends the conversation and says so."""
    client = await bot.start(database_url=await fresh_postgres_database(postgres_server))
    for attempt in range(3):
        await say(fake, ALICE_ID, f"<@{BOT_ID}> remember the word pineapple")
        await fake.wait_for_posts(attempt + 1)
        text = reply_text(await run_command(fake, "forget"))
        assert text.startswith("Conversation ended and its model history dropped")
        assert client.manager.get(CHANNEL_ID) is None


# --- Two processes, one Postgres -----------------------------------------------------------------

PROCESS_TIMEOUT = 60.0


@contextlib.asynccontextmanager
async def bot_process(
    fake: FakeDiscord, llm: FakeLLM, folder: Path, database_url: str, shard_id: int
) -> AsyncIterator[asyncio.subprocess.Process]:
    """`python bot.py` running shard `shard_id` of 2 on the shared archive, until the block ends (SIGTERM)."""
    await asyncio.to_thread(folder.mkdir)
    env = bot_environment(fake, llm, folder / "unused.db", SHARD_COUNT="2", SHARD_IDS=str(shard_id))
    env["DATABASE_URL"] = database_url
    with (folder / "output.log").open("wb") as output:
        process = await start_bot_py(env, folder, output=output)
        try:
            yield process
        finally:
            if process.returncode is None:
                process.terminate()
                try:
                    await asyncio.wait_for(process.wait(), 30)
                except TimeoutError:
                    process.kill()
                    await process.wait()


async def command(
    fake: FakeDiscord, channel_id: int, subcommand: str, options: list[dict[str, Any]] | None = None
) -> str:
    """Use `/parley <subcommand>` in `channel_id`; what the bot answered."""
    payload = command_payload(fake, subcommand, options, channel_id=channel_id)
    token = payload["token"]

    def calls() -> list[InteractionCall]:
        return [call for call in fake.interaction_calls if f"/{token}" in call.path]

    await fake.dispatch("INTERACTION_CREATE", payload)
    await fake.wait_for(lambda: bool(calls()), PROCESS_TIMEOUT, f"/parley {subcommand} answered")
    return reply_text(calls())


async def mention(fake: FakeDiscord, channel_id: int, text: str) -> None:
    """Alice @mentions Parley in `channel_id`; returns once Parley has answered there."""
    posts = len(fake.posts_in(channel_id))
    await fake.send_user_message(channel_id, ALICE_ID, f"<@{BOT_ID}> {text}")
    await fake.wait_for_posts(posts + 1, channel_id, timeout=PROCESS_TIMEOUT)


def events_in(fake: FakeDiscord, shard_id: int, channel_id: int) -> list[str]:
    """The events about `channel_id` that shard `shard_id`'s session was sent."""
    return [event for event, data in fake.events_of(shard_id) if data.get("channel_id") == str(channel_id)]


def searches_then_answer(*queries: str) -> Callable[[dict[str, Any]], Any]:
    """The model calls search_history once per query, then answers."""
    remaining = iter(queries)

    def handler(request: dict[str, Any]) -> Any:
        query = next(remaining, None)
        return "Found it." if query is None else ToolCall("search_history", {"query": query})

    return handler


def tool_results(request: dict[str, Any]) -> list[str]:
    return [message_text(message) for message in request["messages"] if message["role"] == "tool"]


@pytest.mark.slow
async def test_two_processes_share_one_postgres_each_serving_its_shard(
    fake: FakeDiscord, llm: FakeLLM, tmp_path: Path, postgres_server: str
) -> None:
    """Two `python bot.py` with SHARD_IDS=0 and 1 each answer only in their own servers; when a server moves to the
    other shard (a reshard), that process honours the mode the first one set and finds what the first archived."""
    _, other_channel = await fake.add_guild("Second", shard=(1, 2))
    database_url = await fresh_postgres_database(postgres_server)
    with allow_model_requests():
        async with (
            bot_process(fake, llm, tmp_path / "shard0", database_url, 0) as zero,
            bot_process(fake, llm, tmp_path / "shard1", database_url, 1) as one,
        ):
            await fake.wait_for_shard(0, PROCESS_TIMEOUT)
            await fake.wait_for_shard(1, PROCESS_TIMEOUT)
            # Each answers in its own server, and hears nothing from the other's.
            await mention(fake, CHANNEL_ID, "the launch code word is pelican")
            await mention(fake, other_channel, "hello from the second server")
            assert "Shard: 0 of 2" in await command(fake, CHANNEL_ID, "status")
            assert "Shard: 1 of 2" in await command(fake, other_channel, "status")
            assert events_in(fake, 0, other_channel) == [] and events_in(fake, 1, CHANNEL_ID) == []
            assert (len(fake.posts_in(CHANNEL_ID)), len(fake.posts_in(other_channel))) == (1, 1)

            # Shard 0's process sets the mode; the server then moves to shard 1's, which read the modes at its start.
            await command(fake, CHANNEL_ID, "mode", [option("mode", "mention-only")])
            await fake.hand_over(GUILD_ID, 1)
            await eventually_said(fake, CHANNEL_ID, "status", "Mode: mention-only")
            # A follow-up to its answer, which a normal channel's conversation would take, is left alone for the mode.
            await mention(fake, CHANNEL_ID, "are you there?")
            await fake.send_user_message(CHANNEL_ID, ALICE_ID, "and what about tomorrow?")
            await eventually_said(fake, CHANNEL_ID, "why", "silent · mention_only (mode): **Alice**")
            assert len(fake.posts_in(CHANNEL_ID)) == 2

            # Its search finds what shard 0's process archived in the server, and what it archived itself.
            llm.handler = searches_then_answer("pelican", "tomorrow")
            requests_before = len(llm.requests)
            await mention(fake, CHANNEL_ID, "what was the code word?")
            found_by_zero, found_by_one = tool_results(llm.requests[requests_before + 2])[-2:]
            assert "the launch code word is pelican" in found_by_zero
            assert "and what about tomorrow?" in found_by_one
    assert (zero.returncode, one.returncode) == (0, 0)
    assert fake.handler_errors == [] and llm.handler_errors == []


async def eventually_said(fake: FakeDiscord, channel_id: int, subcommand: str, expected: str) -> None:
    """Use `/parley <subcommand>` until its answer says `expected` (a change another process made arrives
    on its own schedule)."""
    async with asyncio.timeout(PROCESS_TIMEOUT):
        while expected not in await command(fake, channel_id, subcommand):  # noqa: ASYNC110 - another process
            await asyncio.sleep(0.1)
