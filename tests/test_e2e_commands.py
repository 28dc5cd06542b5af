"""End-to-end: /parley commands reach bot.py's client as INTERACTION_CREATE and are answered through the callback."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime
from typing import Any

import discord
from fake_discord import (
    ALICE_ID,
    APPLICATION_ID,
    BOT_ID,
    BOT_PERMISSIONS,
    CHANNEL_ID,
    EVERYONE_PERMISSIONS,
    GUILD_ID,
    FakeDiscord,
    InteractionCall,
    snowflake_at,
)
from test_e2e import RunningBot, bot, discord_endpoints, eventually, fake, llm, say  # noqa: F401 (fixtures)

from bot import LoggedDecision, Parley

EPHEMERAL = 1 << 6
CHANNEL_MESSAGE_WITH_SOURCE = 4
MEMBER = EVERYONE_PERMISSIONS
MODERATOR = EVERYONE_PERMISSIONS | discord.Permissions(manage_messages=True, manage_channels=True)

_interaction_numbers = itertools.count(1)


def option(name: str, value: Any) -> dict[str, Any]:
    """A command option as Discord sends it: integers are type 4, strings type 3."""
    return {"type": 4 if isinstance(value, int) else 3, "name": name, "value": value}


def command_payload(
    fake: FakeDiscord,
    subcommand: str,
    options: list[dict[str, Any]] | None = None,
    *,
    user_id: int = ALICE_ID,
    permissions: discord.Permissions = MODERATOR,
    in_guild: bool = True,
) -> dict[str, Any]:
    """An INTERACTION_CREATE for `/parley <subcommand>` in the fake's #general, or in a DM.

    https://discord.com/developers/docs/interactions/receiving-and-responding#interaction-object
    """
    number = next(_interaction_numbers)
    user = fake.users[user_id]
    payload: dict[str, Any] = {
        "id": str(snowflake_at(datetime.now(UTC), number)),
        "application_id": str(APPLICATION_ID),
        "type": 2,  # APPLICATION_COMMAND
        "token": f"interaction-token-{number}",
        "version": 1,
        "locale": "en-US",
        "entitlements": [],
        "attachment_size_limit": 10 * 2**20,
        "data": {
            "id": str(snowflake_at(datetime(2022, 1, 1, tzinfo=UTC))),
            "name": "parley",
            "type": 1,  # CHAT_INPUT
            "options": [{"type": 1, "name": subcommand, "options": options or []}],  # 1: SUB_COMMAND
        },
    }
    if in_guild:
        payload |= {
            "guild_id": str(GUILD_ID),
            "guild_locale": "en-US",
            "channel_id": str(CHANNEL_ID),
            "channel": fake.channels[CHANNEL_ID].payload(),
            "member": {"user": user.payload(), **user.member_payload(), "permissions": str(permissions.value)},
            "app_permissions": str((EVERYONE_PERMISSIONS | BOT_PERMISSIONS).value),
            "authorizing_integration_owners": {"0": str(GUILD_ID)},
            "context": 0,
        }
    else:
        dm_id = snowflake_at(datetime(2022, 1, 2, tzinfo=UTC))
        payload |= {
            "channel_id": str(dm_id),
            "channel": {"id": str(dm_id), "type": 1, "recipients": [user.payload()]},
            "user": user.payload(),
            "authorizing_integration_owners": {"1": str(user_id)},
            "context": 1,
        }
    return payload


async def run_command(
    fake: FakeDiscord, subcommand: str, options: list[dict[str, Any]] | None = None, *, posts: int = 1, **who: Any
) -> list[InteractionCall]:
    """Use `/parley <subcommand>`; returns the bot's calls for it once it has made `posts` of them."""
    payload = command_payload(fake, subcommand, options, **who)
    token = payload["token"]

    def calls() -> list[InteractionCall]:
        return [call for call in fake.interaction_calls if f"/{token}" in call.path]

    await fake.dispatch("INTERACTION_CREATE", payload)
    await fake.wait_for(lambda: len(calls()) >= posts, what=f"/parley {subcommand} answered")
    return calls()


def reply_text(calls: list[InteractionCall]) -> str:
    """Everything the bot said in answer, callback and follow-ups joined by newlines."""
    return "\n".join(call_text(call) for call in calls)


def is_callback(call: InteractionCall) -> bool:
    """Whether the call is the interaction's initial response (not a webhook follow-up)."""
    return call.path.partition("?")[0].endswith("/callback")


def call_text(call: InteractionCall) -> str:
    assert call.body is not None
    return (call.body.get("data") or call.body).get("content", "")


def assert_ephemeral_one_liner(calls: list[InteractionCall]) -> str:
    """The answer is a single ephemeral callback of one line; returns that line."""
    [call] = calls
    assert is_callback(call) and call.body is not None
    assert call.body["type"] == CHANNEL_MESSAGE_WITH_SOURCE and call.body["data"]["flags"] & EPHEMERAL
    text = call.body["data"]["content"]
    assert "\n" not in text
    return text


async def decided(client: Parley, message: dict[str, Any]) -> LoggedDecision:
    """The decision about a message sent through the fake, once the bot has made it."""
    message_id = int(message["id"])

    def found() -> LoggedDecision | None:
        return next((entry for entry in client.decisions.recent(CHANNEL_ID) if entry.message_id == message_id), None)

    await eventually(lambda: found() is not None)
    entry = found()
    assert entry is not None
    return entry


# --- Scenarios ---------------------------------------------------------------------------------


async def test_why_is_answered_through_the_interaction_callback(bot: RunningBot, fake: FakeDiscord) -> None:
    """INTERACTION_CREATE for /parley why gets an ephemeral type-4 callback listing the decisions, newest first."""
    await bot.start()
    question = await say(fake, ALICE_ID, f"<@{BOT_ID}> how do I list files?")
    await fake.wait_for_posts(1)
    chatter = await say(fake, ALICE_ID, f"<@{fake.bob_id}> lunch?")
    await decided(bot.client, chatter)
    [call] = await run_command(fake, "why", [option("count", 5)])
    assert call.method == "POST" and call.path.startswith("/api/v10/interactions/")
    assert call.body is not None and call.body["type"] == CHANNEL_MESSAGE_WITH_SOURCE
    data = call.body["data"]
    assert data["flags"] & EPHEMERAL
    header, newest, oldest = data["content"].splitlines()
    assert header == f"Last 2 decisions in <#{CHANNEL_ID}>, newest first:"
    assert newest.startswith("**silent** `addressed_to_other` (gate) · **Alice**")
    assert oldest.startswith("**answered** `mention` (explicit) · **Alice**")
    assert f"(https://discord.com/channels/{GUILD_ID}/{CHANNEL_ID}/{question['id']})" in oldest
    assert "how do I list files?" in oldest


async def test_mode_changes_the_next_decision(bot: RunningBot, fake: FakeDiscord) -> None:
    """After /parley mode mention-only a follow-up is left alone; after normal the same follow-up is answered."""
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
    assert (await decided(client, followup)).reason == "followup"


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
    assert f"/{question['id']})" in why and "`mention` (explicit)" in why
    await say(fake, ALICE_ID, f"<@{BOT_ID}> and hidden ones?")
    await fake.wait_for_posts(2)
    followup = await say(fake, ALICE_ID, "thanks, and sizes?")
    assert (await decided(client, followup)).reason == "mention_only"
    assert "Mode: **mention-only**" in reply_text(await run_command(fake, "status"))
