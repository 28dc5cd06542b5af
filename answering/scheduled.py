"""Scheduled prompts (`/parley-admin schedule`): at each of its times, the prompt an admin set is answered by the model
with the channel's profile and the tools that change nothing, and the answer is what the reminders' scheduler posts.

The scheduler (reminders/scheduler.py) has claimed the time before asking, so a run is tried once across processes
and restarts; this says what the post is, or None when there is none this time: the server's budget is spent, the
model failed, or Parley no longer sees the channel. Each of those is one log line, and the next time is tried as
usual. No member asked for the run: it spends the server's budget alone, and counts under Parley's own id.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from typing import Protocol

import discord
from pydantic_ai import RunUsage

from admission.optout import OptOuts, VeiledArchive
from admission.spending import Spending
from agent import ReplyFailed, Responder, scheduled_reply
from answering.models import ProfileModels
from archive import Reminder
from archive.holder import ArchiveHolder
from archive.knowledge_types import KnowledgeSearch
from archive.null import archive_off
from archive.text import safe_text
from profiles.channels import Profiles, persona_instructions
from prompting.context import scheduled_prompt_text
from reminders.when import describe_every
from tools import ChatDeps
from usage.budget import UsageLedger

log = logging.getLogger("parley.reminders")


class ScheduleAdmission(Protocol):
    """The one admission path (admission/gatekeeper.py), as a run no member asked for asks it."""

    @property
    def optouts(self) -> OptOuts: ...

    async def unasked_admitted(self, guild_id: int, what: str) -> bool: ...
    def spending(self, guild_id: int, member_id: int | None, role_ids: Collection[int]) -> Spending: ...


class ScheduleStores(ArchiveHolder, Protocol):
    @property
    def knowledge(self) -> KnowledgeSearch | None: ...


class ScheduledPrompts:
    """Runs a scheduled prompt's model call and says what to post (`reminders.scheduler.PromptRunner`)."""

    def __init__(
        self,
        responder: Responder,
        stores: ScheduleStores,
        profiles: Profiles,
        models: ProfileModels,
        admission: ScheduleAdmission,
        usage: UsageLedger,
        *,
        own_user: Callable[[], discord.ClientUser | None],
        get_guild: Callable[[int], discord.Guild | None],
    ) -> None:
        self.responder = responder
        self.stores = stores
        self.profiles = profiles
        self.models = models
        self.admission = admission
        self.usage = usage
        self.own_user = own_user
        self.get_guild = get_guild

    async def answer(self, schedule: Reminder) -> str | None:
        """The model's answer to `schedule`'s prompt in its channel, or None (with one log line) when there is none."""
        what = f"scheduled prompt {schedule.id}"
        user = self.own_user()
        guild = self.get_guild(schedule.guild_id)
        channel = None if guild is None else guild.get_channel_or_thread(schedule.channel_id)
        if user is None or guild is None or not isinstance(channel, discord.abc.Messageable):
            log.warning("%s not run: Parley does not see channel %s", what, schedule.channel_id)
            return None
        if not await self.admission.unasked_admitted(guild.id, what):
            return None
        profile = self.profiles.for_channel(schedule.channel_id)
        deps = self._deps(schedule, user, guild, channel, profile.tool_sets)
        every = describe_every(schedule.every) if schedule.every else "once"
        try:
            reply = await scheduled_reply(
                self.responder,
                scheduled_prompt_text(deps, schedule.text, every),
                deps,
                model=self.models.answer_model(profile.model),
                instructions=persona_instructions(profile.persona),
            )
        except ReplyFailed as failure:
            self._count(schedule, failure.usage, "")
            log.warning("%s failed, tried again at its next time: %s", what, failure)
            return None
        self._count(schedule, reply.usage, reply.model)
        if reply.limited == "token_budget":
            log.info("%s not posted: server %s spent its token budget during the run", what, guild.id)
            return None
        return reply.text

    def _deps(
        self,
        schedule: Reminder,
        user: discord.ClientUser,
        guild: discord.Guild,
        channel: discord.abc.Messageable,
        tool_sets: frozenset[str] | None,
    ) -> ChatDeps:
        """What the run's tools reach: the schedule's channel, read as far as its owner may read it, with the tool
        sets of the channel's profile (`scheduled_reply` offers the read-only ones alone)."""
        archive = self.stores.archive
        owner = guild.get_member(schedule.owner_id)
        reads_history = (
            owner is not None
            and isinstance(channel, discord.abc.GuildChannel | discord.Thread)
            and channel.permissions_for(owner).read_message_history
        )
        return ChatDeps(
            bot_name=safe_text(user.display_name),
            bot_user_id=user.id,
            guild_id=guild.id,
            guild_name=safe_text(guild.name),
            channel_id=schedule.channel_id,
            channel_name=safe_text(getattr(channel, "name", "") or ""),
            archive=None if archive_off(archive) else VeiledArchive(archive, self.admission.optouts, guild.id),
            requester_id=schedule.owner_id,
            requester_can_read_history=bool(reads_history),
            offered_toolsets=tool_sets,
            knowledge=self.stores.knowledge,
            before_each_call=self.admission.spending(guild.id, None, ()).stop_line,
        )

    def _count(self, schedule: Reminder, usage: RunUsage | None, model: str) -> None:
        """The run's tokens, under the server and Parley's own id: no member asked for them."""
        user = self.own_user()
        if user is None or usage is None:
            return
        self.usage.record(
            schedule.guild_id, schedule.channel_id, user.id, usage.input_tokens, usage.output_tokens, model=model
        )
