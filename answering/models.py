"""The models a channel's profile names (or a member chose, for the answers to them), for answers and for the judge,
each built once and closed at the end."""

from __future__ import annotations

from pydantic_ai.models import Model

from config import Settings
from profiles.channels import Profile, Profiles
from profiles.member_models import MemberModels
from providers.models import build_model, close_model


class ProfileModels:
    """The answer and judge models profiles name; the defaults (LLM_MODEL, JUDGE_MODEL) are the agents' own."""

    def __init__(self, settings: Settings, profiles: Profiles, members: MemberModels) -> None:
        self.settings = settings
        self.profiles = profiles
        # What members chose with /parley model, within MEMBER_MODELS and the channel's profile.
        self.members = members
        self._answer_models: dict[str, Model] = {}
        self._judge_models: dict[str, Model] = {}

    def answer_model(self, name: str) -> Model | None:
        """The model a profile names for answers, built once; None for LLM_MODEL, the responder's own."""
        if name == self.settings.llm_model:
            return None
        if name not in self._answer_models:
            self._answer_models[name] = build_model(self.settings, name)
        return self._answer_models[name]

    async def answer_model_for(self, profile: Profile, guild_id: int | None, member_id: int) -> Model | None:
        """The model of an answer to the member in the channel of `profile`: their choice where they may make one,
        else the profile's; None for LLM_MODEL, the responder's own."""
        return self.answer_model(await self.members.model_for(profile, guild_id, member_id))

    def judge_model_for(self, channel_id: int) -> Model | None:
        """The judge model of a channel's profile, built once; None for JUDGE_MODEL, the judge's own."""
        name = self.profiles.for_channel(channel_id).judge_model
        if name == self.settings.judge_model:
            return None
        if name not in self._judge_models:
            # As build_judge does: one quick retry at most, within the decider's short timeout.
            self._judge_models[name] = build_model(self.settings, name, max_retries=min(self.settings.model_retries, 1))
        return self._judge_models[name]

    async def close(self) -> None:
        for model in [*self._answer_models.values(), *self._judge_models.values()]:
            await close_model(model)
