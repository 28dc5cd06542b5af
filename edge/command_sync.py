"""Slash commands registered with Discord only when they changed since they were last registered."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from pathlib import Path

import discord
from discord import app_commands

from archive import Archive, ArchiveWriteFailed
from archive.null import archive_off

log = logging.getLogger("parley")


COMMAND_SYNC_FILE = Path("data") / "command-sync.json"


def command_tree_hash(tree: app_commands.CommandTree, guild: discord.abc.Snowflake | None) -> str:
    """A hash of exactly what `tree.sync(guild=guild)` would send to Discord."""
    payload = [command.to_dict(tree) for command in tree.get_commands(guild=guild)]
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def _read_sync_file() -> dict[str, str]:
    """The command registrations noted without an archive; nothing if the file is missing or unreadable."""
    try:
        noted = json.loads(COMMAND_SYNC_FILE.read_text())
    except (OSError, ValueError):
        return {}
    return noted if isinstance(noted, dict) else {}


def _write_sync_file(key: str, value: str) -> None:
    noted = _read_sync_file() | {key: value}
    COMMAND_SYNC_FILE.parent.mkdir(parents=True, exist_ok=True)
    COMMAND_SYNC_FILE.write_text(json.dumps(noted, indent=2, sort_keys=True) + "\n")


async def sync_commands(
    tree: app_commands.CommandTree,
    *,
    guild_id: int | None,
    application_id: int | None,
    archive: Archive,
    force: bool = False,
) -> None:
    """Register the slash commands with Discord if they changed since the last time (or if `force`).

    In GUILD_ID alone (usable at once) when set, else globally. Discord rate-limits registration
    and advises against it on every start, so the hash of what was last registered is kept (in
    the archive, or in COMMAND_SYNC_FILE without one) and an unchanged tree is not sent again.
    """
    guild = None if guild_id is None else discord.Object(id=guild_id)
    if guild is not None:
        tree.copy_global_to(guild=guild)
    scope = "globally" if guild is None else f"to guild {guild_id}"
    key = f"command_sync:{application_id}:{guild_id or 'global'}"
    digest = command_tree_hash(tree, guild)
    if not force and await _remembered(archive, key) == digest:
        log.info("slash commands unchanged since they were last registered %s", scope)
        return
    try:
        synced = await tree.sync(guild=guild)
    except discord.HTTPException as error:
        # The bot still works without fresh commands; say why they could not be registered.
        log.error("could not sync the slash commands: %s", error)
        return
    log.info("synced %d slash command(s) %s", len(synced), scope)
    await _remember(archive, key, digest)


async def _remembered(archive: Archive, key: str) -> str | None:
    if not archive_off(archive):
        return await archive.get_state(key)
    noted = await asyncio.to_thread(_read_sync_file)
    return noted.get(key)


async def _remember(archive: Archive, key: str, value: str) -> None:
    try:
        if not archive_off(archive):
            await archive.set_state(key, value)
        else:
            await asyncio.to_thread(_write_sync_file, key, value)
    except (OSError, ArchiveWriteFailed) as error:
        log.warning("could not note the command registration (%s): the next start registers them again", error)
