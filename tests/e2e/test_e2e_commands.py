"""End-to-end: /parley commands reach bot.py's client as INTERACTION_CREATE and are answered through the callback."""

from __future__ import annotations

from tests.fakes.fake_discord import ALICE_ID, BOT_ID, CHANNEL_ID, GUILD_ID, FakeDiscord
from tests.support.e2e_support import (
    CHANNEL_MESSAGE_WITH_SOURCE,
    EPHEMERAL,
    RunningBot,
    decided,
    option,
    reply_text,
    run_command,
    say,
)


async def test_why_is_answered_through_the_interaction_callback(bot: RunningBot, fake: FakeDiscord) -> None:
    """INTERACTION_CREATE for /parley why gets an ephemeral type-4 callback: an embed of the decisions, newest first."""
    client = await bot.start()
    question = await say(fake, ALICE_ID, f"<@{BOT_ID}> how do I list files?")
    await fake.wait_for_posts(1)
    chatter = await say(fake, ALICE_ID, f"<@{fake.bob_id}> lunch?")
    await decided(client, chatter)
    [call] = await run_command(fake, "why", [option("count", 5)])
    assert call.method == "POST" and call.path.startswith("/api/v10/interactions/")
    assert call.body is not None and call.body["type"] == CHANNEL_MESSAGE_WITH_SOURCE
    data = call.body["data"]
    assert data["flags"] & EPHEMERAL
    [embed] = data["embeds"]
    assert embed["description"] == f"Last 2 decisions in <#{CHANNEL_ID}>, newest first."
    newest, oldest = embed["fields"]
    assert newest["name"] == "silent · addressed_to_other (gate)" and newest["value"].startswith("**Alice**")
    assert oldest["name"] == "answered · mention (explicit)" and oldest["value"].startswith("**Alice**")
    assert f"(https://discord.com/channels/{GUILD_ID}/{CHANNEL_ID}/{question['id']})" in oldest["value"]
    assert "how do I list files?" in oldest["value"]


async def test_mode_changes_the_next_decision(bot: RunningBot, fake: FakeDiscord) -> None:
    """After /parley-admin mode mention-only a follow-up is left alone; after normal the same follow-up is answered."""
    client = await bot.start()
    await run_command(fake, "mode", [option("mode", "mention-only")])
    await say(fake, ALICE_ID, f"<@{BOT_ID}> how do I list files?")
    await fake.wait_for_posts(1)
    followup = await say(fake, ALICE_ID, "and hidden ones too?")
    entry = await decided(client, followup)
    assert (entry.respond, entry.reason) == (False, "mention_only")

    await run_command(fake, "mode", [option("mode", "normal")])
    await say(fake, ALICE_ID, f"<@{BOT_ID}> how do I list files?")
    await fake.wait_for_posts(2)
    followup = await say(fake, ALICE_ID, "and hidden ones too?")
    await fake.wait_for_posts(3)
    assert (await decided(client, followup)).reason == "followup"  # the rule's "yes" stands: the tier weighs its "no"


async def test_mode_and_decisions_survive_a_restart(bot: RunningBot, fake: FakeDiscord) -> None:
    """With the archive on, a new process on the same file keeps the channel's mode and its earlier decisions."""
    await bot.start()
    await run_command(fake, "mode", [option("mode", "mention-only")])
    question = await say(fake, ALICE_ID, f"<@{BOT_ID}> how do I list files?")
    await fake.wait_for_posts(1)
    await bot.stop()

    client = await bot.start()
    assert client.decisions.recent(CHANNEL_ID) == []
    why = reply_text(await run_command(fake, "why"))
    assert f"/{question['id']})" in why and "answered · mention (explicit)" in why
    await say(fake, ALICE_ID, f"<@{BOT_ID}> and hidden ones?")
    await fake.wait_for_posts(2)
    followup = await say(fake, ALICE_ID, "thanks, and sizes?")
    assert (await decided(client, followup)).reason == "mention_only"
    assert "Mode: mention-only" in reply_text(await run_command(fake, "status"))
