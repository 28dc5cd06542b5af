"""Parley's Discord wiring and composition root: `python bot.py` runs the bot."""

from __future__ import annotations

import sys

from ops import cli

if __name__ == "__main__" and cli.checks_only(sys.argv[1:]):
    # `python bot.py --check` reads the settings and the model's provider, never the client: it exits before the
    # client's imports below, a fifth of its time (--help and --version exit in `checks_only`).
    sys.exit(cli.main(None, cli.no_client))

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import discord
from pydantic_ai.messages import ModelMessage

from admission.gatekeeper import Gatekeeper
from agent import LLMJudge, Responder, build_judge, build_responder
from answering.agents import Agents
from answering.answer import Answering
from answering.asked import CommandQuestions
from answering.decisions import DecisionLog
from answering.gap import GapQuestions
from answering.models import ProfileModels
from answering.pipeline import MessagePipeline
from answering.scheduled import ScheduledPrompts
from answering.usage import UsageAccounting
from archive import Archive
from archive.null import NULL_ARCHIVE, archive_off
from commands.groups import add_slash_commands
from commands.tree import ParleyTree
from config import Settings
from conversation import ConversationManager
from deciding.decider import ResponseDecider
from deciding.followup import load_model, model_path
from deciding.journal import DecisionJournal, LoggedDecision
from discord_io import KnownChannels, guild_id_of, to_archived, to_record
from edge.approval import ApprovalButton
from edge.arrival import CHAT_MESSAGE_TYPES, Arrival
from edge.asked_about import AskedAboutReader
from edge.attachment_sources import AttachmentSources
from edge.command_sync import sync_commands
from edge.context_loading import ContextLoader
from edge.gateway import discord_options, reach_gateway
from edge.member_roles import access_gate
from edge.pins import PinEvents, PinnedKnowledge
from edge.reminder_posts import reminder_scheduler
from edge.servers import leave_unserved, public_bot_warning
from edge.streaming import AnsweredTurn, AnswerStreams, StopButton, regenerate_command
from edge.threads import Threads
from helpdesk.desk import SupportDesk
from helpdesk.feedback import FeedbackButton
from helpdesk.topics import TopicGrouper
from knowledge.local_embedding import WordLlamaEmbeddingModel
from knowledge.opening import KnowledgeBase
from memory.store import MemoryStore
from moderation.actions import CaseActions
from moderation.cards import CaseButton
from moderation.desk import ModerationDesk
from moderation.screening import Screening
from ops.opening import follow
from ops.preflight import startup_summary
from ops.resources import Resources
from ops.shared import SharedSettings
from profiles.channels import Profiles, load_profiles_file
from profiles.member_models import MemberModels
from prompting.context import Summarizer, build_summarizer
from providers.models import build_model
from tools import Toolbox, build_toolbox
from upkeep.background import BackgroundTasks
from upkeep.channel_settings import ChannelSettings
from upkeep.conversations import ConversationUpkeep
from upkeep.coverage import Coverage
from upkeep.digests import DigestScheduler
from upkeep.forgetting import Forgetting
from usage.costs import UsageMetrics

if TYPE_CHECKING:
    from archive.changes import ChangeListener

log = logging.getLogger("parley")


@dataclass
class OpenStores:
    """The archive and the stores kept in it, as the parts read them (never through the client): the resources
    opened before the client (ops.resources) until it closes, then the null archive and no stores, so what still runs
    keeps nothing. Without DATABASE_URL, the null archive and no stores throughout."""

    archive: Archive = NULL_ARCHIVE
    memory: MemoryStore | None = None  # facts and context snapshots
    knowledge: KnowledgeBase | None = None  # the server's documents (knowledge/)


class Parley(PinEvents, discord.AutoShardedClient):
    """Listens to guild channels, keeps their conversations, and answers what is meant for it."""

    def __init__(
        self,
        *,
        settings: Settings,
        manager: ConversationManager,
        decider: ResponseDecider,
        responder: Responder,
        resources: Resources | None = None,
        judge: LLMJudge | None = None,
        summarizer: Summarizer | None = None,
        profiles: Profiles | None = None,
        sync_commands: bool = False,
        toolbox: Toolbox | None = None,
        **options: Any,
    ) -> None:
        # Over 60 lines on purpose: the client's parts are built here once, each after what it takes, so the order
        # of the lines is the order of their dependencies (composition, no logic).
        super().__init__(**discord_options(settings, options))
        resources = resources or Resources()  # DATABASE_URL empty

        def own_user() -> discord.ClientUser | None:
            """Parley's own user, as discord.py knows it once logged in: what the parts are handed for it."""
            return self.user

        self.settings = settings
        self.manager = manager
        self.decider = decider
        self.judge = judge
        self.summarizer = summarizer
        self.toolbox = toolbox or Toolbox()  # web search and the MCP servers, by name, running from setup_hook to close
        # Opened before the client (ops.resources), closed after it; the null archive when DATABASE_URL is empty.
        self.stores = OpenStores(resources.archive, resources.memory, resources.knowledge)
        self.known_channels = KnownChannels(self.get_channel)
        # Each channel's persona, models, tools and mode; the decider reads the modes from it (build_client shares it).
        self.profiles = profiles or Profiles(settings)
        self.profiles.place = self.known_channels.profile_place
        # The models profiles name, built once each; the defaults are the agents' own.
        self.member_models = MemberModels(self.stores, settings.member_models)
        self.models = ProfileModels(settings, self.profiles, self.member_models)
        self.agents = Agents(responder, judge, summarizer, self.models)
        self.channels = ChannelSettings()
        # With a Postgres archive: other processes' changes to the settings above, as they are committed.
        self._other_processes: ChangeListener | None = None
        self.decisions = DecisionJournal()
        # Today's tokens per server, channel and member; taken up from the archive when it is on.
        self.usage = resources.usage
        if settings.logfire_token is not None:
            self.usage.on_record = UsageMetrics()
        self.accounting = UsageAccounting(
            self.usage, responder.model, self.get_channel, judge=judge, summarizer=summarizer
        )
        # Every model call is admitted by it: the bot gate, member rates, channel turns, server budgets.
        self.admission = Gatekeeper(settings, self.usage)
        self.admission.count_in(resources.archive)  # members' answers and tokens: in a Postgres archive, shared
        self.decision_log = DecisionLog(
            self.decisions, self.stores, self.admission.optouts, self.known_channels.server_of
        )
        self.access = access_gate(self, settings)
        # The channels' digests, ticked by the one scheduler below.
        self.digests = DigestScheduler(
            settings,
            self.stores,
            self.agents,
            self.admission,
            self.usage,
            own_user=own_user,
            get_guild=self.get_guild,
            wake_scheduler=lambda: self.reminders.wake_timed_work(),
        )
        # Reminders and timed posts: their rules, and the one scheduler of timed posts (started in setup_hook), which
        # also answers the scheduled prompts (/parley-admin schedule) on the same claims and ticks the digests.
        prompts = ScheduledPrompts(
            responder,
            self.stores,
            self.profiles,
            self.models,
            self.admission,
            self.usage,
            own_user=own_user,
            get_guild=self.get_guild,
        )
        self.reminders = reminder_scheduler(
            self, self.access, settings, self.admission.optouts, prompts, timed_work=(self.digests,)
        )
        # `python bot.py --sync`: register the slash commands even if they did not change.
        self.force_command_sync = sync_commands
        self.tree = ParleyTree(self, serves=self.access.serves)
        add_slash_commands(self.tree)
        self.tree.add_command(regenerate_command())
        self.streams = AnswerStreams(settings.stream_edit_seconds, settings.max_answer_posts)
        # The support report's questions grouped by topic with the local embedding model (no provider, no cost).
        self.topics = TopicGrouper(WordLlamaEmbeddingModel())
        # Work that follows an answer or a conversation's end (summaries), which no member waits for.
        self.background = BackgroundTasks()
        self.upkeep = ConversationUpkeep(
            settings,
            manager,
            self.stores,
            self.background,
            summarizer=summarizer,
            forget_markers=self.channels.forget_markers,
            admission=self.admission,
            guild_of=self.known_channels.server_of,
        )
        self.forgetting = Forgetting(
            manager, self.stores, self.upkeep, self.decisions, self.profiles, self.channels, self.admission.optouts
        )
        self.threads = Threads(
            own_user,
            self.get_guild,
            self.stores,
            manager,
            self.upkeep,
            self.admission.within_rate,
            self.channels,
        )
        self.coverage = Coverage(settings, self.background, self.forgetting.forget_messages, self.admission.optouts)
        self.context = ContextLoader(settings, self.stores, self.coverage, self.channels.forget_markers)
        self.files = AttachmentSources(self.get_channel, self.fetch_channel, self.stores, settings)
        self.pins = PinnedKnowledge(
            self.stores,
            self.get_channel,
            lambda: self.guilds,
            settings,
            self.background,
            self.admission,
            self.files,
            self.forgetting,
        )
        self.answering = Answering(
            own_user,
            self.fetch_channel,
            self.stores,
            settings,
            manager,
            admission=self.admission,
            reminders=self.reminders.book,
            responder=responder,
            streams=self.streams,
            profiles=self.profiles,
            models=self.models,
            files=self.files,
            accounting=self.accounting,
            upkeep=self.upkeep,
        )
        # The questions nobody addressed in support channels: taken from the message's way, answered through it.
        self.desk = SupportDesk(settings, self.stores, self.get_channel)
        self.pipeline = MessagePipeline(
            own_user,
            manager,
            decider,
            self.admission,
            access=self.access,
            threads=self.threads,
            context=self.context,
            upkeep=self.upkeep,
            answering=self.answering,
            decision_log=self.decision_log,
            desk=self.desk,
        )
        self.desk.path = self.pipeline
        # What catch-up finds Parley missed is decided on the message's way too, as if it had just arrived.
        self.gap = GapQuestions(
            settings,
            manager,
            self.background,
            self.pipeline,
            admission=self.admission,
            threads=self.threads,
            access=self.access,
        )
        # Questions asked by command (/ask) are admitted there, then answered on the message's way too.
        self.commanded = CommandQuestions(
            self.pipeline,
            self.admission,
            self.access,
            self.threads,
            self.decisions,
            direct_messages=settings.direct_messages,
        )

        # Members' reports to the moderators, and what the case cards' buttons do.
        self.moderation = ModerationDesk(
            settings,
            self.stores,
            self.admission,
            AskedAboutReader(self.context, self.admission.optouts, self.files, manager),
            self.usage,
            cases=lambda: self.agents.cases,
            get_channel=self.get_channel,
            own_id=lambda: self.user.id if self.user is not None else 0,
        )
        self.case_actions = CaseActions(self.stores, self.moderation)
        # The watch lists: new messages in watched channels screened against the rules.
        self.screening = Screening(
            settings, self.stores, self.admission, self.moderation, self.background, cases=lambda: self.agents.cases
        )

    # The stores as the commands and the command line read them off the client; the parts are handed `stores`.

    @property
    def archive(self) -> Archive:
        return self.stores.archive

    @property
    def memory(self) -> MemoryStore | None:
        return self.stores.memory

    @property
    def knowledge(self) -> KnowledgeBase | None:
        return self.stores.knowledge

    async def setup_hook(self) -> None:
        assert self.user is not None  # setup_hook runs after login
        await self.take_up_archive()
        warning = public_bot_warning(self.application, self.settings.allowed_servers)
        if warning is not None:
            log.warning("%s", warning)
        await self.agents.start(self.user, self.accounting)
        self.toolbox.start()
        # Stop buttons, the Approve and Deny buttons of a tool call, a support answer's Solved and Not helpful and a
        # case card's buttons answer after a restart too: their custom id says what they are for (a press of an
        # approval's is then told the request is over).
        self.add_dynamic_items(StopButton, ApprovalButton, FeedbackButton, CaseButton)
        self.background.start(self.upkeep.end_timed_out(), "conversation-timeouts")
        self.background.start(self.desk.run(), "support-desk")
        self.background.start(self.reminders.run(self.archive), "reminders")
        await sync_commands(
            self.tree,
            guild_id=self.settings.guild_id,
            application_id=self.application_id,
            archive=self.archive,
            force=self.force_command_sync,
        )

    async def launch_shards(self) -> None:
        """Connect this process's shards; through DISCORD_GATEWAY_URL when it is set.

        Without SHARD_COUNT, Discord says how many shards to run; the gateway stays the one the deployer named
        (Discord's own otherwise). The gateway is tried once first: discord.py retries a shard's failed connection
        every 5 seconds for ever, and before any shard has connected, a gateway that cannot be reached is the
        deployment's fault (a wrong DISCORD_GATEWAY_URL, no network), which `main` reports in one line.
        """
        if self.settings.shard_count is None:
            self.shard_count, _, _ = await self.http.get_bot_gateway()
        await reach_gateway(discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY)
        await super().launch_shards()

    async def take_up_archive(self) -> None:
        """Read what the archive keeps into the client's parts (modes, lists, settings, opt-outs, live conversations),
        and follow other processes' changes to them; setup_hook's first step. Read only once the changes are followed
        (ops.shared.follow_other_processes), so these are not among the resources opened before the client."""
        archive = self.archive
        if archive_off(archive):
            return
        channels = self.channels
        maps = (channels.forget_markers, channels.thread_channels, channels.own_threads)
        shared = SharedSettings(
            archive,
            self.profiles,
            *maps,
            self.forgetting.forgotten,
            self.admission.optouts,
            self.access.lists,
            self.stores.knowledge,
        )
        self._other_processes = await follow(self.settings, archive, shared)
        await self.profiles.attach(archive)
        await self.access.lists.attach(archive)
        await channels.load(archive)
        await self.admission.attach(archive)
        await self.screening.attach()
        await self.desk.load()
        self.manager.on_change = self.upkeep.keep
        self.manager.on_end = self.upkeep.ended
        await self.upkeep.resume(archive)

    async def close(self) -> None:
        # First, so catch-up and the recheck stop before the HTTP session they read Discord's history through closes.
        await self.background.close()
        if self.user is None:
            # discord.py's sharded close() ends by posting to a queue it makes at login; before login (a bench, a
            # start stopped early) no shard has run, so the plain client's close is all there is to do.
            await discord.Client.close(self)
        else:
            await super().close()
        # Whoever opened the archive closes it once the client is closed; what still runs from here on keeps nothing.
        stores = self.stores
        stores.archive, stores.memory, stores.knowledge = NULL_ARCHIVE, None, None
        if self._other_processes is not None:
            await self._other_processes.close()
            self._other_processes = None
        await self.toolbox.stop()
        await self.agents.close()

    async def on_ready(self) -> None:
        self.coverage.restart()
        log.info("%s", self.startup_summary())
        self.threads.end_closed_threads()
        served = await leave_unserved(self.guilds, self.access.serves)
        await self.coverage.start_catch_up(self.archive, served, self.gap)

    async def on_guild_join(self, guild: discord.Guild) -> None:
        await leave_unserved([guild], self.access.serves)

    def startup_summary(self) -> str:
        """One line: who, where, which model, judge and archive, the modes, and an invite link when in no server."""
        return startup_summary(
            self.settings,
            user=self.user,
            servers=len(self.guilds),
            judged=self.judge is not None,
            channels_set_otherwise=len(self.profiles.modes),
            application_id=self.application_id,
        )

    # -- Messages --

    async def on_message(self, message: discord.Message) -> None:
        if self.user is None or (message.guild is None and not self.settings.direct_messages):
            return  # direct messages are answered only with DIRECT_MESSAGES on
        record = to_record(message, self.settings.wake_words)
        self.files.note(message.attachments)
        if not archive_off(self.archive) and not self.admission.optouts.withheld(
            guild_id_of(message), record.author_id, message.id
        ):
            self.archive.add(to_archived(message, record))
            if record.attachments:
                self.background.start(self.files.archive_text(record), f"attachment-text-{message.id}")
        if message.author.id == self.user.id:
            return  # our own posts are recorded when we send them
        if message.type not in CHAT_MESSAGE_TYPES:
            return
        self.screening.heard(message)
        kind = self.threads.kind_of(message)
        arrival = await Arrival.resolve(message, record, kind=kind, bot_user_id=self.user.id, askers=self.access)
        await self.pipeline.arrived(arrival)

    # -- Answering (answering.answer) --

    async def latest_answer(self, channel: discord.abc.Messageable) -> AnsweredTurn | None:
        return await self.answering.latest_answer(channel)

    async def regenerate_refusal(self, turn: AnsweredTurn, member: discord.Member | discord.User) -> str | None:
        return await self.pipeline.regenerate_refusal(turn, member)

    async def regenerate(self, turn: AnsweredTurn, member: discord.Member | discord.User) -> None:
        await self.pipeline.regenerate(turn, member)

    def guild_of(self, channel_id: int) -> int:
        return self.known_channels.server_of(channel_id)

    # -- Operator commands' state: decisions, modes, forgetting --

    async def recent_decisions(self, channel_id: int, count: int) -> list[LoggedDecision]:
        return await self.decision_log.recent(channel_id, count)

    async def forget(self, channel_id: int, guild_id: int) -> bool:
        return await self.forgetting.forget(channel_id, guild_id)

    def restore_conversation(self, channel_id: int, messages: list[ModelMessage]) -> None:
        self.forgetting.restore_conversation(channel_id, messages)

    def mode_of(self, channel_id: int) -> str:
        return self.profiles.for_channel(channel_id).mode

    def profile_place(self, channel_id: int) -> tuple[int | None, int]:
        return self.known_channels.profile_place(channel_id)

    async def set_threads(self, channel_id: int, guild_id: int, on: bool) -> None:
        await self.threads.set_threads(channel_id, guild_id, on)

    async def on_raw_thread_update(self, payload: discord.RawThreadUpdateEvent) -> None:
        """An archived or locked thread ends its conversation; Parley never reopens it."""
        self.threads.thread_updated(payload)

    # -- Edits and deletions (upkeep.forgetting) --

    async def on_raw_message_edit(self, payload: discord.RawMessageUpdateEvent) -> None:
        self.forgetting.message_edited(payload)

    async def on_raw_message_delete(self, payload: discord.RawMessageDeleteEvent) -> None:
        self.forgetting.message_deleted(payload)

    async def on_raw_bulk_message_delete(self, payload: discord.RawBulkMessageDeleteEvent) -> None:
        self.forgetting.messages_deleted(payload)

    async def on_guild_channel_delete(self, channel: discord.abc.GuildChannel) -> None:
        self.forgetting.channel_deleted(channel)

    async def on_raw_thread_delete(self, payload: discord.RawThreadDeleteEvent) -> None:
        self.forgetting.thread_deleted(payload)

    async def on_guild_remove(self, guild: discord.Guild) -> None:
        self.forgetting.guild_removed(guild)
        self.access.lists.forget(guild.id)


# --- Composition root --------------------------------------------------------------------------


def build_client(
    settings: Settings, resources: Resources | None = None, *, sync_commands: bool = False, **options: Any
) -> Parley:
    """Everything Parley needs, wired together over the opened `resources`: the engine, the agents and the client."""
    resources = resources or Resources()  # DATABASE_URL empty
    if settings.archive_enabled and archive_off(resources.archive):
        raise ValueError("DATABASE_URL is set: open the archive first (ops.resources.open_resources)")
    manager = ConversationManager(
        settings.conversation_timeout_seconds, max_messages=settings.max_conversation_messages
    )
    judge = build_judge(settings) if settings.use_llm_judge else None
    learned = load_model(model_path(settings.decider_model))
    model = build_model(settings)
    toolbox = build_toolbox(settings)
    # Shared: the profile commands change it, the decider reads each channel's mode from it for every message.
    profiles = Profiles(settings, load_profiles_file(settings))
    decider = ResponseDecider(
        settings.followup_window_seconds,
        judge,
        judge_timeout_seconds=settings.judge_timeout_seconds,
        modes=profiles.modes,
        judge_calls_per_minute=settings.judge_calls_per_minute,
        learned=learned,
    )
    client = Parley(
        settings=settings,
        manager=manager,
        decider=decider,
        responder=build_responder(settings, model=model, toolbox=toolbox),
        resources=resources,
        judge=judge,
        summarizer=build_summarizer(settings) if settings.summarize_history else None,
        profiles=profiles,
        sync_commands=sync_commands,
        toolbox=toolbox,
        **options,
    )
    decider.on_decision = client.decision_log.note
    return client


def main(argv: Sequence[str] | None = None) -> int:
    """`python bot.py`: the command line (ops.cli), which opens the resources and builds the client over them here."""
    return cli.main(argv, build_client)


if __name__ == "__main__":
    sys.exit(main())
