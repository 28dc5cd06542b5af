"""End-to-end: bot.py registers its slash commands with the fake Discord only when they changed."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import discord
from discord import app_commands

from bot import build_client
from edge.gateway import point_at_discord
from ops.cli import register_commands, run
from ops.resources import open_resources
from tests.fakes.fake_discord import FakeDiscord
from tests.fakes.fake_llm import FakeLLM
from tests.support.e2e_support import bot_settings


def command_puts(fake: FakeDiscord) -> int:
    """How many times the bot sent Discord its command list (bulk overwrite)."""
    return sum(1 for request in fake.requests if request.method == "PUT" and request.path.endswith("/commands"))


@app_commands.command(description="A command a later version of Parley might add.")
async def ping(interaction: discord.Interaction) -> None:
    await interaction.response.send_message("pong", ephemeral=True)


async def start_and_stop(
    fake: FakeDiscord, llm: FakeLLM, tmp_path: Path, *extra: app_commands.Command[Any, ..., Any], **overrides: Any
) -> None:
    """Start bot.py's client through `bot.run` (with `extra` commands in its tree) until it is ready, then stop it."""
    settings = bot_settings(fake, llm, tmp_path, **overrides)
    point_at_discord(settings)
    async with open_resources(settings) as resources:
        client = build_client(settings, resources, guild_ready_timeout=0.05)
        for command in extra:
            client.tree.add_command(command)
        running = asyncio.create_task(run(client, settings.discord_token.get_secret_value()))
        await fake.wait_for_ready()
        await asyncio.wait_for(client.wait_until_ready(), 5)
        await client.close()
        await asyncio.wait_for(running, 10)


async def test_the_synced_tree_shows_members_their_commands_and_admins_theirs(
    fake: FakeDiscord, llm: FakeLLM, tmp_path: Path, discord_endpoints
) -> None:
    """As Discord receives them: `/parley` carries no default_member_permissions, so every member sees it;
    `/parley-admin` carries Manage Messages, so only admins see it until a server says otherwise."""
    await start_and_stop(fake, llm, tmp_path)
    synced = {command["name"]: command for command in fake.commands[None]}
    assert synced["parley"].get("default_member_permissions") is None
    assert synced["parley-admin"]["default_member_permissions"] == discord.Permissions(manage_messages=True).value
    members = {option["name"] for option in synced["parley"]["options"]}
    assert {"why", "status", "memory", "catchup", "privacy"} <= members
    assert {"mode", "usage", "access", "profile"} <= {option["name"] for option in synced["parley-admin"]["options"]}
    # Message commands (type 3) every member sees, on any message in a server.
    assert {name: command["type"] for name, command in synced.items() if command["type"] == 3} == {
        "Ask Parley": 3,
        "Report to moderators": 3,
        "Regenerate": 3,
    }
    assert synced["Ask Parley"].get("default_member_permissions") is None


async def test_commands_are_registered_once_and_again_only_when_changed(
    fake: FakeDiscord, llm: FakeLLM, tmp_path: Path, discord_endpoints
) -> None:
    """The first start registers the commands, a second with the same tree does not, a changed tree does again."""
    await start_and_stop(fake, llm, tmp_path)
    assert command_puts(fake) == 1
    assert [command["name"] for command in fake.commands[None]] == [
        "parley",
        "parley-admin",
        "remind",
        "ask",
        "Ask Parley",
        "Report to moderators",
        "Regenerate",
    ]

    await start_and_stop(fake, llm, tmp_path)
    assert command_puts(fake) == 1

    await start_and_stop(fake, llm, tmp_path, ping)
    assert command_puts(fake) == 2
    assert sorted(command["name"] for command in fake.commands[None]) == [
        "Ask Parley",
        "Regenerate",
        "Report to moderators",
        "ask",
        "parley",
        "parley-admin",
        "ping",
        "remind",
    ]


async def test_the_archive_remembers_each_scope_apart(
    fake: FakeDiscord, llm: FakeLLM, tmp_path: Path, discord_endpoints
) -> None:
    """Registering globally does not count for a GUILD_ID start, and each is remembered across restarts."""
    await start_and_stop(fake, llm, tmp_path)
    await start_and_stop(fake, llm, tmp_path, guild_id=fake.guild_id)
    await start_and_stop(fake, llm, tmp_path, guild_id=fake.guild_id)
    await start_and_stop(fake, llm, tmp_path)
    assert command_puts(fake) == 2
    assert set(fake.commands) == {None, fake.guild_id}


async def test_sync_flag_registers_even_unchanged_commands_without_a_gateway_session(
    fake: FakeDiscord, llm: FakeLLM, tmp_path: Path, discord_endpoints
) -> None:
    """`--sync` registers the commands although nothing changed, then returns without ever identifying."""
    await start_and_stop(fake, llm, tmp_path)
    identifies = len(fake.identifies)
    settings = bot_settings(fake, llm, tmp_path)
    async with open_resources(settings) as resources:
        client = build_client(settings, resources, sync_commands=True)
        await register_commands(client, settings.discord_token.get_secret_value())
    assert command_puts(fake) == 2
    assert len(fake.identifies) == identifies and client.is_closed()
