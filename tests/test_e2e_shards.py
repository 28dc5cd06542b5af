"""End-to-end: a process running some of the bot's shards (SHARD_COUNT, SHARD_IDS) against the fake Discord."""

from __future__ import annotations

from e2e_support import RunningBot, reply_text, run_command, say
from fake_discord import ALICE_ID, BOT_ID, GUILD_ID, FakeDiscord


async def test_a_process_runs_the_shard_it_is_given_and_status_names_it(bot: RunningBot, fake: FakeDiscord) -> None:
    """With SHARD_COUNT=2 and SHARD_IDS=1 the client identifies as shard 1 of 2, answers, and status names it."""
    client = await bot.start(shard_count=2, shard_ids=frozenset({1}))
    identify = await fake.wait_until_identified()
    assert identify["shard"] == [1, 2] and client.shard_count == 2
    await say(fake, ALICE_ID, f"<@{BOT_ID}> hello")
    await fake.wait_for_posts(1)
    status = reply_text(await run_command(fake, "status"))
    assert f"Shard: {(GUILD_ID >> 22) % 2} of 2" in status


async def test_without_shard_settings_discord_decides_and_one_process_runs_them(
    bot: RunningBot, fake: FakeDiscord
) -> None:
    """Unset, the client asks Discord how many shards to run (the fake says one) and runs shard 0 of 1."""
    client = await bot.start()
    identify = await fake.wait_until_identified()
    assert identify["shard"] == [0, 1] and client.shard_count == 1
    assert any(request.path.endswith("/gateway/bot") for request in fake.requests)
