"""Which model answers a member in a channel: the one they chose with `/parley model`, among MEMBER_MODELS, unless the
channel's own profile pins a model.

A choice is kept per member and server in the archive (archive/member_models.py) and read when an answer to them
starts, so every process sees the latest and an erasure leaves nothing cached. A channel pins its model when its own
profile names one (by command or in the profiles file): an admin who chose a model for that channel chose it for
everyone there. A server-wide profile model is the default members choose away from. A choice no longer on the list
(the admins took it off) is ignored: the profile's model answers.
"""

from __future__ import annotations

from collections.abc import Collection

from archive.holder import ArchiveHolder
from archive.null import archive_off
from profiles.channels import Profile, Source

# The profile values a channel's own admins set: a model set there is the channel's, whoever asks.
_CHANNEL_SOURCES = frozenset({Source.CHANNEL_COMMAND, Source.CHANNEL_FILE})


class ModelNotOffered(ValueError):
    """A member asked for a model the admins do not offer them here."""


def pins_model(profile: Profile) -> bool:
    """Whether the channel's own profile names its model, which members' choices do not change."""
    return profile["model"].source in _CHANNEL_SOURCES


def model_choices(profile: Profile, member_models: Collection[str]) -> list[str]:
    """The models a member may choose in a channel: its profile's (the default) first, then MEMBER_MODELS."""
    if pins_model(profile):
        return [profile.model]
    return list(dict.fromkeys((profile.model, *sorted(member_models))))


def answering_model(profile: Profile, chosen: str | None, member_models: Collection[str]) -> str:
    """The model that answers a member who chose `chosen` (None: nothing) in the channel of `profile`."""
    if chosen is None or pins_model(profile) or chosen not in member_models:
        return profile.model
    return chosen


class MemberModels:
    """Members' model choices: kept in the archive, applied within MEMBER_MODELS and the channel's profile."""

    def __init__(self, stores: ArchiveHolder, member_models: Collection[str]) -> None:
        self.stores = stores
        self.offered = frozenset(member_models)

    @property
    def on(self) -> bool:
        """Whether members may choose at all (MEMBER_MODELS is set)."""
        return bool(self.offered)

    @property
    def kept(self) -> bool:
        """Whether a choice can be kept (the archive is on)."""
        return not archive_off(self.stores.archive)

    async def chosen(self, guild_id: int | None, member_id: int) -> str | None:
        """The member's kept choice in the server; None in a DM, with nothing chosen, or with the picker off."""
        if not self.on or not guild_id:
            return None
        return await self.stores.archive.member_model(guild_id, member_id)

    async def model_for(self, profile: Profile, guild_id: int | None, member_id: int) -> str:
        """The model that answers the member in the channel of `profile`."""
        return answering_model(profile, await self.chosen(guild_id, member_id), self.offered)

    async def choose(self, profile: Profile, guild_id: int, member_id: int, model: str) -> str | None:
        """Keep the member's choice of `model` (the profile's own: back to the default, nothing kept); returns what
        is kept.

        Raises:
            ModelNotOffered: `model` is not among the choices in this channel.
            ArchiveWriteFailed: the choice could not be stored.
        """
        if model not in model_choices(profile, self.offered):
            raise ModelNotOffered(model)
        kept = None if model == profile.model else model
        await self.stores.archive.set_member_model(guild_id, member_id, kept)
        return kept
