"""End-to-end: a process running some of the bot's shards (SHARD_COUNT, SHARD_IDS) against the fake Discord."""

from __future__ import annotations

from e2e_support import RunningBot, reply_text, run_command, say
from fake_discord import ALICE_ID, BOT_ID, CHANNEL_ID, FakeDiscord


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
