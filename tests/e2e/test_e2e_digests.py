"""End-to-end: a channel's digest (`/parley-admin digest`) is posted once at its hour, not before, across a restart
and across two processes on one Postgres; nothing said, nothing posted and no model call. The clock is the bot's
injected one: each test moves it and awaits the digests' next tick."""

from __future__ import annotations

import asyncio
import logging
import re
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import discord
import pytest

from bot import Parley
from commands.digest import NO_ARCHIVE
from tests.conftest import fresh_postgres_database
from tests.fakes.fake_discord import ALICE_ID, BOT_ID, CHANNEL_ID, GUILD_ID, FakeDiscord, InteractionCall, snowflake_at
from tests.fakes.fake_llm import Error, FakeLLM, ToolCall, allow_model_requests, echo, last_user_text
from tests.support.e2e_support import (
    MODERATOR,
    RunningBot,
    command_payload,
    decided,
    eventually,
    reply_text,
    say,
)
from upkeep.digests import next_due


def digesting(request: dict[str, Any]) -> Any:
    """The model: for the digest's structured output, a point about the first line of each chunk, whose summary
    names a member and @everyone (which must ping no one); any other request is echoed."""
    if "final_result" not in [tool["function"]["name"] for tool in request.get("tools", [])]:
        return echo(request)
    first = re.findall(r"^\[(\d+)\]", last_user_text(request), re.MULTILINE)[0]
    point = {"topic": "Release", "summary": f"<@{ALICE_ID}> and @everyone: the release is friday.", "line": first}
    return ToolCall("final_result", {"points": [point]})


def digest_requests(llm: FakeLLM) -> int:
    return len([request for request in llm.requests if "final_result" in str(request.get("tools"))])


async def digest(fake: FakeDiscord, subcommand: str, **options: Any) -> str:
    """`/parley-admin digest <subcommand>` in #general, by a moderator; the bot's reply."""
    payload = command_payload(fake, "digest", permissions=MODERATOR)
    given = [{"type": 4 if isinstance(v, int) else 3, "name": k, "value": v} for k, v in options.items()]
    payload["data"]["options"] = [
        {"type": 2, "name": "digest", "options": [{"type": 1, "name": subcommand, "options": given}]}
    ]
    token = payload["token"]

    def calls() -> list[InteractionCall]:
        return [call for call in fake.interaction_calls if f"/{token}" in call.path]

    await fake.dispatch("INTERACTION_CREATE", payload)
    await fake.wait_for(lambda: len(calls()) >= 1, what=f"/parley-admin digest {subcommand} answered")
    return reply_text(calls())


async def set_daily(bot: RunningBot, fake: FakeDiscord) -> datetime:
    """A daily digest here at the hour that starts between one and two hours from now; when it is first due."""
    hour = (bot.clock() + timedelta(hours=2)).hour
    told = await digest(fake, "on", hour=hour)
    assert f"daily at {hour:02d}:00 (UTC)" in told, told
    assert bot.client is not None and bot.client.archive is not None
    stored = await bot.client.archive.digest(CHANNEL_ID)
    assert stored is not None
    return next_due(stored, bot.clock(), ZoneInfo("UTC"))


async def talk(client: Parley, fake: FakeDiscord, when: datetime | None = None) -> list[dict[str, Any]]:
    """Members discuss the release (now, or with ids made at `when`); returns their messages once the archive holds
    them."""

    def made(n: int) -> dict[str, Any]:
        return {} if when is None else {"message_id": snowflake_at(when + timedelta(seconds=n))}

    sent = [await say(fake, fake.bob_id, f"release note {n}: step {n} is done", **made(n)) for n in range(3)]
    sent.append(await say(fake, ALICE_ID, "then the release is friday", **made(3)))
    await decided(client, sent[-1])
    assert client.archive is not None
    await client.archive.flush()
    return sent


def heard(client: Parley, message: dict[str, Any]) -> bool:
    return any(entry.message_id == int(message["id"]) for entry in client.decisions.recent(CHANNEL_ID))


async def at(bot: RunningBot, moment: datetime) -> None:
    """Move the bot's clock to `moment` and wait for the digests' tick that follows."""
    bot.clock.advance((moment - bot.clock()).total_seconds())
    assert bot.client is not None
    await bot.client.digests.next_tick()


def linked_ids(text: str) -> set[int]:
    return {int(found) for found in re.findall(rf"/channels/{GUILD_ID}/{CHANNEL_ID}/(\d+)\)", text)}


async def test_a_daily_digest_is_posted_once_at_its_hour_and_not_before(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    llm.handler = digesting
    client = await bot.start()
    due = await set_daily(bot, fake)
    sent = await talk(client, fake)

    await at(bot, due - timedelta(minutes=1))
    assert fake.posts_in(CHANNEL_ID) == [] and digest_requests(llm) == 0

    await at(bot, due + timedelta(seconds=30))
    [post] = fake.posts_in(CHANNEL_ID)
    assert post.content.startswith(f"**Daily digest: {len(sent)} messages since <t:")
    assert "**Release**" in post.content and "Asked of you" not in post.content and "late" not in post.content
    assert linked_ids(post.content) <= {int(message["id"]) for message in sent}
    assert linked_ids(post.content)
    # The post names members and @everyone as the model wrote them, and pings no one.
    assert f"<@{ALICE_ID}>" in post.content
    assert post.body["allowed_mentions"]["parse"] == [] and not post.body["allowed_mentions"].get("users")

    # Its tokens count for the server, under Parley's own id: no member asked for them.
    assert client.usage.member_tokens(GUILD_ID, BOT_ID) > 0 and client.usage.member_tokens(GUILD_ID, ALICE_ID) == 0

    await at(bot, due + timedelta(minutes=5))
    assert len(fake.posts_in(CHANNEL_ID)) == 1 and digest_requests(llm) == 1
    assert "The latest was due" in await digest(fake, "show")


async def test_nothing_said_in_the_period_is_no_post_and_no_model_call(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    llm.handler = digesting
    await bot.start()
    due = await set_daily(bot, fake)
    await at(bot, due + timedelta(seconds=30))
    assert fake.posts_in(CHANNEL_ID) == [] and llm.requests == []


async def test_without_the_archive_there_is_no_digest(bot: RunningBot, fake: FakeDiscord) -> None:
    await bot.start(database_url="")
    assert await digest(fake, "on") == NO_ARCHIVE


async def test_a_digest_due_while_parley_was_stopped_is_posted_once_when_it_is_back(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """Stopped before the hour and started after it (within the period), Parley posts the digest once, saying it is
    late; started again, it does not post it again."""
    llm.handler = digesting
    client = await bot.start()
    due = await set_daily(bot, fake)
    await talk(client, fake)
    await bot.stop()

    bot.clock.advance((due + timedelta(hours=2) - bot.clock()).total_seconds())
    await bot.start()
    await at(bot, due + timedelta(hours=2, seconds=1))
    [post] = fake.posts_in(CHANNEL_ID)
    assert "**Daily digest: 4 messages" in post.content and "Posted late" in post.content

    await bot.stop()
    await bot.start()
    await at(bot, due + timedelta(hours=3))
    assert len(fake.posts_in(CHANNEL_ID)) == 1 and digest_requests(llm) == 1


async def test_a_model_failure_gives_the_period_back_and_the_next_tick_posts_it(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    llm.handler = lambda request: Error(400, "the model is down", retryable=False)
    client = await bot.start()
    due = await set_daily(bot, fake)
    await talk(client, fake)
    with caplog.at_level(logging.WARNING, "parley.digests"):
        await at(bot, due + timedelta(seconds=30))
    assert fake.posts_in(CHANNEL_ID) == []
    [logged] = [record for record in caplog.records if record.name == "parley.digests"]
    assert "not posted" in logged.getMessage()

    llm.handler = digesting
    await at(bot, due + timedelta(minutes=2))
    assert len(fake.posts_in(CHANNEL_ID)) == 1  # the failed period is tried again, and posted once
    await at(bot, due + timedelta(minutes=4))
    await talk(client, fake, when=due + timedelta(hours=1))
    await at(bot, due + timedelta(days=1, seconds=30))
    assert len(fake.posts_in(CHANNEL_ID)) == 2


async def test_a_digest_discord_refuses_to_post_is_switched_off(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    llm.handler = digesting
    client = await bot.start()
    due = await set_daily(bot, fake)
    await talk(client, fake)
    fake.fail_next_posts(1, status=403, channel_id=CHANNEL_ID)
    with caplog.at_level(logging.WARNING, "parley.digests"):
        await at(bot, due + timedelta(seconds=30))
    assert "switched off" in caplog.text
    assert client.archive is not None and await client.archive.digest(CHANNEL_ID) is None
    assert "has no digest" in await digest(fake, "show")


async def test_two_processes_on_one_postgres_post_a_digest_once(
    fake: FakeDiscord, llm: FakeLLM, tmp_path: Path, postgres_server: str, discord_endpoints: None
) -> None:
    """Shard 0 of 2 and shard 1 of 7 both serve the fake's server (as across a reshard): both find the digest due
    at the same tick, one claims it and posts it."""
    llm.handler = digesting
    database_url = await fresh_postgres_database(postgres_server)
    shards = [(2, 0), (7, 1)]
    assert all(fake.shard_of(GUILD_ID, count) == shard for count, shard in shards)
    processes = [RunningBot(fake, llm, tmp_path / name) for name in ("first", "second")]
    with allow_model_requests():
        try:
            clients = [
                await process.start(database_url=database_url, shard_count=count, shard_ids=frozenset({shard}))
                for process, (count, shard) in zip(processes, shards, strict=True)
            ]
            due = await set_daily(processes[0], fake)
            # The fake sends the server's events to one of the two sessions: whichever hears them archives them.
            said = await say(fake, fake.bob_id, "the release is friday")
            await eventually(lambda: any(heard(client, said) for client in clients))
            for client in clients:
                assert client.archive is not None
                await client.archive.flush()
            for process in processes:
                process.clock.advance((due + timedelta(seconds=30) - process.clock()).total_seconds())
            await asyncio.gather(*(client.digests.next_tick() for client in clients))
            await asyncio.gather(*(client.digests.next_tick() for client in clients))
        finally:
            for process in processes:
                await process.stop()
    [post] = fake.posts_in(CHANNEL_ID)
    assert "**Daily digest:" in post.content and digest_requests(llm) == 1
    assert fake.handler_errors == [] and llm.handler_errors == []


async def test_a_digest_whose_next_period_began_while_parley_was_stopped_is_left_out(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """Down across two due moments, Parley posts only the latest period's digest: here nothing was said in it, so
    nothing is posted, and the missed period (which had the messages) is not posted late."""
    llm.handler = digesting
    client = await bot.start()
    due = await set_daily(bot, fake)
    await talk(client, fake)
    await bot.stop()
    bot.clock.advance((due + timedelta(days=1, hours=1) - bot.clock()).total_seconds())
    await bot.start()
    await at(bot, due + timedelta(days=1, hours=1, seconds=1))
    assert fake.posts_in(CHANNEL_ID) == [] and llm.requests == []


async def test_a_digest_set_after_its_hour_starts_with_the_next_period(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    llm.handler = digesting
    client = await bot.start()
    # Said in the period whose digest was due at the hour, which had passed when the digest was set.
    await talk(client, fake, when=bot.clock() - timedelta(hours=3))
    hour = (bot.clock() - timedelta(hours=1)).hour
    assert "the first" in await digest(fake, "on", hour=hour)
    await at(bot, bot.clock() + timedelta(seconds=1))
    assert fake.posts_in(CHANNEL_ID) == [] and digest_requests(llm) == 0


async def test_a_digest_in_a_channel_parley_may_no_longer_post_in_is_switched_off_without_a_model_call(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    llm.handler = digesting
    client = await bot.start()
    due = await set_daily(bot, fake)
    await talk(client, fake)
    await bot.stop()
    fake.deny(CHANNEL_ID, BOT_ID, discord.Permissions(send_messages=True))
    client = await bot.start()
    with caplog.at_level(logging.WARNING, "parley.digests"):
        await at(bot, due + timedelta(seconds=30))
    assert "switched off: Parley may not post there" in caplog.text
    assert fake.posts_in(CHANNEL_ID) == [] and digest_requests(llm) == 0
    assert client.archive is not None and await client.archive.digest(CHANNEL_ID) is None
