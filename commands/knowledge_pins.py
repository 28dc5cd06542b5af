"""`/parley-admin knowledge pins on|off|status`: whether the channel's pinned messages are part of the server's
knowledge base (edge/pins.py keeps them in step)."""

from __future__ import annotations

from typing import Literal, Protocol, cast

import discord

from archive import ArchiveWriteFailed
from commands.tree import Refusal, place_of, send_ephemeral
from edge.pins import PinnedKnowledge


class PinsOperated(Protocol):
    """The client, as /parley-admin knowledge pins see it (bot.py's Parley)."""

    @property
    def pins(self) -> PinnedKnowledge: ...


def operated(interaction: discord.Interaction) -> PinsOperated:
    """The client an interaction came to; discord.py types it as any client, and only Parley's tree runs these."""
    return cast(PinsOperated, interaction.client)


PinSetting = Literal["on", "off", "status"]
PIN_SETTINGS: tuple[str, ...] = ("on", "off", "status")
NO_ARCHIVE = "Pinned messages go into the knowledge base, which is kept in the archive: set DATABASE_URL to use it."
NOT_SAVED = "The setting could not be saved, so it is unchanged; the details are in Parley's log."
NOT_TEXT = "Only the pinned messages of text channels and threads can go into the knowledge base."
# A private thread's pins would reach members of its channel who are not in it.
PRIVATE_THREAD = "A private thread's pinned messages cannot go into the knowledge base: its members alone read them."
# Discord lists a channel's pins only to those who may view the channel and read its history.
# https://discord.com/developers/docs/resources/message#get-channel-pins
CANNOT_READ = " Parley cannot read the pins here yet: grant it View Channel and Read Message History in this channel."


async def answer_pins(interaction: discord.Interaction, setting: str) -> None:
    """Turn the channel's pins on or off in the knowledge base, or say how it stands; one line only its user sees."""
    # Discord offers only the choices, but a request can still say otherwise.
    if setting not in PIN_SETTINGS:
        raise Refusal(f"Unknown setting {setting!r}: choose on, off or status.")
    guild_id, channel_id = place_of(interaction)
    pins = operated(interaction).pins
    try:
        if setting == "on":
            if not isinstance(interaction.channel, discord.TextChannel | discord.Thread):
                raise Refusal(NOT_TEXT)  # edge/pins.py reads the pins of text channels and threads only
            if isinstance(interaction.channel, discord.Thread) and interaction.channel.is_private():
                raise Refusal(PRIVATE_THREAD)
            await pins.turn_on(channel_id, guild_id, interaction.user.id)
            reply = (
                f"Pinned messages in <#{channel_id}> now go into the knowledge base, read in now and kept in step"
                " with pins and unpins; only members who can read this channel find them."
            )
            granted = interaction.app_permissions
            if not (granted.view_channel and granted.read_message_history):
                reply += CANNOT_READ
        elif setting == "off":
            removed = await pins.turn_off(channel_id, guild_id, interaction.user.id)
            reply = (
                f"Pinned messages in <#{channel_id}> no longer go into the knowledge base;"
                f" {_pins(removed)} taken in before {'was' if removed == 1 else 'were'} removed."
            )
        else:
            taken, held = await pins.status(channel_id, guild_id)
            reply = (
                f"Pinned messages in <#{channel_id}> go into the knowledge base: it holds {_pins(held)} from here."
                if taken
                else f"Pinned messages in <#{channel_id}> do not go into the knowledge base"
                " (`/parley-admin knowledge pins on` here to change it)."
            )
    except LookupError:
        raise Refusal(NO_ARCHIVE) from None
    except ArchiveWriteFailed:
        raise Refusal(NOT_SAVED) from None
    await send_ephemeral(interaction, reply)


def _pins(count: int) -> str:
    return f"{count} pinned message{'' if count == 1 else 's'}"
