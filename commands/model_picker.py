"""`/parley model`: a member picks, from a menu of the models the admins offer (MEMBER_MODELS, the channel's profile
model first), the model that answers them in this server; profiles/member_models.py has the rules."""

from __future__ import annotations

from typing import Any, Protocol, cast

import discord
from discord import app_commands

from archive import ArchiveWriteFailed
from commands.tree import Refusal, place_of
from profiles.channels import Profile, Profiles
from profiles.member_models import MemberModels, ModelNotOffered, model_choices, pins_model

# Discord's limit on a select menu's options.
MENU_MAX_OPTIONS = 25
PICKER_OFF = "Members don't choose models on this server: its admins offer none (MEMBER_MODELS is empty)."
NO_ARCHIVE = "Choosing a model keeps your choice in the archive, which is off here (DATABASE_URL is empty)."
PINNED = "This channel's profile sets its model ({model}) for everyone, so a choice of yours does not apply here."
NOT_KEPT = "Your choice could not be kept just now; your answers keep their model. Please try again in a moment."


class PickerOperated(Protocol):
    """The client, as /parley model sees it (bot.py's Parley)."""

    @property
    def profiles(self) -> Profiles: ...
    @property
    def member_models(self) -> MemberModels: ...


def operated(interaction: discord.Interaction) -> PickerOperated:
    """The client an interaction came to; discord.py types it as any client, and only Parley's tree runs this."""
    return cast(PickerOperated, interaction.client)


def model_command() -> app_commands.Command[Any, ..., None]:
    """A new `model` command for the members' group (one per client: a command belongs to one group)."""

    @app_commands.command(name="model", description="Choose the model that answers you on this server.")
    async def model(interaction: discord.Interaction) -> None:
        await pick_model(interaction)

    return model


async def pick_model(interaction: discord.Interaction) -> None:
    """Show the member a menu of the models they may choose here, their current one marked."""
    guild_id, channel_id = place_of(interaction)
    client = operated(interaction)
    if not client.member_models.on:
        raise Refusal(PICKER_OFF)
    if not client.member_models.kept:
        raise Refusal(NO_ARCHIVE)
    profile = client.profiles.for_channel(channel_id)
    current = await client.member_models.model_for(profile, guild_id, interaction.user.id)
    note = PINNED.format(model=profile.model) if pins_model(profile) else None
    menu = ModelMenu(client.member_models, profile, guild_id, current)
    text = "\n".join(filter(None, [f"Parley answers you here with `{current}`. Choose another:", note]))
    await interaction.response.send_message(text, view=menu, ephemeral=True)


class ModelMenu(discord.ui.View):
    """The menu of models, on a message only its member sees; it lapses after a few minutes."""

    def __init__(self, members: MemberModels, profile: Profile, guild_id: int, current: str) -> None:
        super().__init__(timeout=300)
        self.members = members
        self.profile = profile
        self.guild_id = guild_id
        choices = model_choices(profile, members.offered)[:MENU_MAX_OPTIONS]
        select: discord.ui.Select[ModelMenu] = discord.ui.Select(
            placeholder="Model for your answers",
            options=[
                discord.SelectOption(
                    label=name[:100],
                    value=name,
                    description="the channel's default" if name == profile.model else None,
                    default=name == current,
                )
                for name in choices
            ],
        )
        select.callback = self.chosen  # type: ignore[method-assign]
        self.select = select
        self.add_item(select)

    async def chosen(self, interaction: discord.Interaction) -> None:
        """Keep the member's choice, within the offered models whatever the request says."""
        [model] = self.select.values or [""]
        try:
            await self.members.choose(self.profile, self.guild_id, interaction.user.id, model)
        except ModelNotOffered:
            await interaction.response.edit_message(content=f"`{model[:100]}` is not offered here.", view=None)
            return
        except ArchiveWriteFailed:
            await interaction.response.edit_message(content=NOT_KEPT, view=None)
            return
        await interaction.response.edit_message(content=f"Parley answers you on this server with `{model}`.", view=None)
