"""Answering a message: the responder's reply, whole or streamed, posted in the channel; and "Regenerate"."""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, Collection, Iterator
from dataclasses import replace
from datetime import UTC, datetime
from typing import Protocol

import discord
from pydantic_ai.models import Model

from admission.history_access import private_view, regenerated_view
from admission.optout import HasOptOuts, VeiledArchive
from admission.spending import Spending
from agent import AnswerListener, Reply, ReplyFailed, Responder, generate_reply, regenerate_reply
from answering.delivery import Delivery
from answering.images import AnswerImages, ImageAdmission
from answering.models import ProfileModels
from answering.outcome import APOLOGY, AnswerOutcome, AnswerTail
from answering.usage import UsageAccounting
from archive.holder import ArchiveHolder
from archive.knowledge_types import KnowledgeSearch
from archive.null import archive_off
from archive.text import safe_text
from config import Settings
from conversation import ChannelConversation, ConversationManager
from discord_io import is_closed_thread, to_record, upload_limit
from edge.approval import ApprovalPrompts
from edge.asking import MessageReply, Question
from edge.attachment_sources import AttachmentSources
from edge.readable import shown_channel_ids
from edge.server_actions import server_actions_for
from edge.streaming import AnsweredTurn, AnswerStreams, Outlet
from files.links import given_links
from files.providers import is_image_refusal, model_key
from helpdesk.feedback import SupportFeedback
from memory.store import MemoryStore
from profiles.channels import Profiles, persona_instructions
from prompting.context import TRANSCRIPT_MAX_MESSAGES
from reminders.book import ReminderBook
from tools import ChatDeps
from tools.action_switches import ArchivedSwitches
from tools.channel_actions import ServerActionDeps
from upkeep.conversations import ConversationUpkeep

log = logging.getLogger("parley")

# What the model is told a direct message's server and channel are called.
DIRECT_MESSAGES_PLACE = "direct messages"


class AnswerAdmission(HasOptOuts, ImageAdmission, Protocol):
    """The one admission path (admission/gatekeeper.py), as an answer under way asks it before each model request
    and each image."""

    def spending(self, guild_id: int, member_id: int | None, role_ids: Collection[int]) -> Spending: ...


class AnswerStores(ArchiveHolder, Protocol):
    """The archive (the null archive without one) and the memory and knowledge base kept in it (None without an
    archive; bot.py's OpenStores): what an answer's tools read."""

    @property
    def memory(self) -> MemoryStore | None: ...
    @property
    def knowledge(self) -> KnowledgeSearch | None: ...


class Answering:
    """Produces and posts answers for the client, which has admitted them already."""

    def __init__(
        self,
        own_user: Callable[[], discord.ClientUser | None],
        fetch_channel: Callable[[int], Awaitable[object]],
        stores: AnswerStores,
        settings: Settings,
        manager: ConversationManager,
        *,
        admission: AnswerAdmission,
        reminders: ReminderBook,
        responder: Responder,
        streams: AnswerStreams,
        profiles: Profiles,
        models: ProfileModels,
        files: AttachmentSources,
        accounting: UsageAccounting,
        upkeep: ConversationUpkeep,
    ) -> None:
        # Parley's own user (known once logged in), and a channel asked of Discord: discord.py's.
        self.own_user = own_user
        self.fetch_channel = fetch_channel
        self.stores = stores
        # Asked before each model request of an answer; its opt-outs veil what the tools read of the archive.
        self.admission = admission
        # Where the remind tool sets reminders.
        self.reminders = reminders
        self.settings = settings
        self.manager = manager
        self.responder = responder
        self.streams = streams
        self.profiles = profiles
        self.models = models
        self.files = files
        self.accounting = accounting
        # Every post and edit of an answer reaches Discord through this, retried under one deadline.
        self.delivery = Delivery(settings.answer_delivery_seconds)
        # Tool calls that wait for their asker's Approve or Deny (tools/approval.py), asked in the answer's channel.
        self.approvals = ApprovalPrompts(settings.approval_timeout_seconds, self.delivery)
        # The asker's Solved and Not helpful under the support desk's answers (helpdesk/feedback.py).
        self.feedback = SupportFeedback(stores, self.delivery)
        self.tail = AnswerTail(
            manager,
            streams,
            accounting,
            upkeep,
            max_posts=settings.max_answer_posts,
            delivery=self.delivery,
            footer_mode=lambda channel_id: profiles.for_channel(channel_id).footer,
            feedback=self.feedback,
        )

    async def answer(
        self, question: Question, outlet: Outlet, conversation: ChannelConversation, role_ids: Collection[int]
    ) -> None:
        """Run the responder and post its answer through `outlet` (a reply to the question's message, in its
        channel or the thread opened on it; a command's response); on failure apologise and leave the history as it
        was. `role_ids`: the asker's roles, as the admission resolved them (AccessGate.asker)."""
        deps = self.chat_deps(question, outlet, role_ids)
        if self.settings.stream_answers:
            await self._answer_streamed(question, outlet, conversation, deps)
            return
        result: Reply | ReplyFailed
        async with outlet.waiting():
            try:
                result = await self._reply(question, conversation, deps)
            except ReplyFailed as failure:
                result = failure
        outcome = AnswerOutcome.whole(question, outlet, result)
        await self.tail.finish(outcome, conversation)

    def chat_deps(self, question: Question, outlet: Outlet, role_ids: Collection[int]) -> ChatDeps:
        """What the tools of an answer to `question` going into `outlet` may reach: that channel (or thread, or DM)
        alone, as far as the asker may read it.

        A direct message is guild 0: its archive tools read that DM only, and its memory is the DM's and what
        the person told Parley about themselves in DMs, never a server's.
        """
        user = self.own_user()
        assert user is not None
        guild, guild_id = question.guild, question.guild_id
        channel_id = outlet.channel_id
        archive = self.stores.archive
        off = archive_off(archive)  # the archive's tools and the remind tool then say so, in one line the model relays
        return ChatDeps(
            bot_name=safe_text(user.display_name),
            bot_user_id=user.id,
            guild_id=guild_id,
            guild_name=DIRECT_MESSAGES_PLACE if guild is None else safe_text(guild.name),
            channel_id=channel_id,
            channel_name=safe_text(getattr(outlet.channel, "name", None) or DIRECT_MESSAGES_PLACE),
            archive=None if off else VeiledArchive(archive, self.admission.optouts, guild_id),
            requester_id=question.asker_id,
            requester_can_read_history=question.reads_history,
            memory=self.stores.memory if self.settings.memory_tools else None,
            message_id=question.id,
            named_member_ids=question.named_member_ids - {user.id},
            offered_toolsets=self.profiles.for_channel(channel_id).tool_sets,
            approver=self.approvals.for_answer(question.asker, outlet),
            reminders=None if off else self.reminders,
            requester_manages_messages=question.manages_messages,
            requester_may_post=question.may_post,
            knowledge=self.stores.knowledge,
            readable_channels=_readable_channels(guild, question.asker, outlet),
            # Its tool rounds and resumed runs each ask the asker's and the server's daily budgets first.
            before_each_call=self.admission.spending(guild_id, question.asker_id, role_ids).stop_line,
            images=self._images(question, outlet),
            server_actions=None if off else self._server_actions(question),
        )

    def _images(self, question: Question, outlet: Outlet) -> AnswerImages | None:
        """What the answer may do with images, when IMAGE_MODEL is set: claim them for the asker, and attach them
        within the upload limit where it is posted (0: Parley may not attach files there)."""
        if not self.settings.image_model:
            return None
        limit = upload_limit(outlet.channel)
        return AnswerImages(question, outlet.channel_id, limit, self.admission, self.accounting)

    def _server_actions(self, question: Question) -> ServerActionDeps | None:
        """What the answer's server actions reach, with SERVER_ACTIONS on: the archive keeps their switches and their
        audit log."""
        if not self.settings.server_actions_enabled:
            return None
        archive = self.stores.archive
        return server_actions_for(question, ArchivedSwitches(archive), archive, lambda: datetime.now(UTC))

    async def _reply(
        self,
        question: Question,
        conversation: ChannelConversation,
        deps: ChatDeps,
        listener: AnswerListener | None = None,
    ) -> Reply:
        """`generate_reply` with the attachments of the messages the prompt shows; a provider that refuses images
        marks the model as taking none and gets the same answer asked again without them."""
        record = question.record
        if not deps.requester_can_read_history:
            conversation = private_view(conversation, deps.requester_id, deps.bot_user_id)
        deps = replace(deps, links=self._links_given(question, conversation))
        profile = self.profiles.for_channel(deps.channel_id)
        chosen = await self.models.answer_model_for(profile, question.guild_id, deps.requester_id)
        instructions = persona_instructions(profile.persona)
        model = chosen or (self.responder.model if isinstance(self.responder.model, Model) else None)
        unseen = conversation.unseen_before(record.message_id, deps.bot_user_id)
        about = question.about
        # A message asked about (and those around it) is quoted once, in a part of the prompt of its own; its files
        # come right after the question's own, within the request's caps.
        shown = (unseen if about is None else about.others(unseen))[-TRANSCRIPT_MAX_MESSAGES:]
        shown = [*shown, *(() if about is None else about.files_first_last), record]
        files = await self.files.attachments.prepare(shown, vision=self.files.attachments.sees_images(model))
        self.files.archive_extracted(files)
        ask = functools.partial(
            generate_reply,
            self.responder,
            conversation,
            record,
            deps,
            listener=listener,
            model=chosen,
            instructions=instructions,
            about=about,
            documents=question.documents,
        )
        try:
            return await ask(files)
        except ReplyFailed as failure:
            if model is None or not files.images or not is_image_refusal(failure.__cause__):
                raise
            self.accounting.account(question, failure.usage, deps.channel_id)
            self.files.attachments.refuse_images(model)
            log.warning(
                "model %s refused images: answering without them, and sending it none from now on", model_key(model)
            )
            return await ask(files.without_images("image not shown: this model takes no images"))

    def _links_given(self, question: Question, shown: ChannelConversation) -> tuple[str, ...]:
        """The links `read_link` may read for an answer to `question`: those members wrote in the question, the message
        it replies to or asks about (and those around it), and the latest messages of the conversation as the asker
        may see it (`shown`); never Parley's own words, which a page it read could have steered."""
        own_id = getattr(self.own_user(), "id", None)
        recent = list(shown.messages)[-TRANSCRIPT_MAX_MESSAGES:]
        texts = [question.record.content, *self._replied_to(question)]
        about = question.about
        if about is not None:
            texts += [message.content for message in (about.target, *about.before, *about.after)]
        texts += [message.content for message in recent if message.author_id != own_id]
        return tuple(given_links(texts).values())

    def _replied_to(self, question: Question) -> Iterator[str]:
        """The text of the message the question replies to, as Discord resolved it: none if Parley wrote it, or its
        author opted out or erased it."""
        reference = None if question.message is None else question.message.reference
        replied = None if reference is None else reference.resolved
        if not isinstance(replied, discord.Message) or replied.author.id == getattr(self.own_user(), "id", None):
            return
        if not self.admission.optouts.withheld(question.guild_id, replied.author.id, replied.id):
            yield replied.content

    async def _answer_streamed(
        self, question: Question, outlet: Outlet, conversation: ChannelConversation, deps: ChatDeps
    ) -> None:
        """Answer as `answer` does, the answer streaming into the outlet as the model writes it (edge/streaming.py)."""
        if is_closed_thread(outlet.channel):
            log.info("not answering in thread %s: it was archived or locked meanwhile", outlet.channel_id)
            return

        def write(listener: AnswerListener) -> Awaitable[Reply]:
            return self._reply(question, conversation, deps, listener)

        streamed = await self.streams.stream(outlet, write, apology=APOLOGY, delivery=self.delivery)
        outcome = AnswerOutcome.streamed(question, outlet, streamed)
        await self.tail.finish(outcome, conversation)

    async def latest_answer(self, channel: discord.abc.Messageable) -> AnsweredTurn | None:
        """The latest answer of the channel's live conversation, fetched anew after a restart; None if there is none
        or a message of it is gone."""
        channel_id: int = getattr(channel, "id", 0)
        known = self.streams.latest(channel_id)
        conversation = self.manager.get(channel_id)
        if known is not None or conversation is None or conversation.latest_answer is None:
            return known
        question_channel_id, question_id, post_ids = conversation.latest_answer
        try:
            # A thread Parley opened on a message answers it inside the thread: the question is in the parent.
            asked_in = channel if question_channel_id == channel_id else await self.fetch_channel(question_channel_id)
            if not isinstance(asked_in, discord.abc.Messageable) or not isinstance(channel, discord.abc.Messageable):
                return None
            question = await asked_in.fetch_message(question_id)
            posts = [await channel.fetch_message(post_id) for post_id in post_ids]
        except discord.HTTPException as error:
            log.info("the latest answer in channel %s cannot be regenerated: %s", channel_id, error)
            return None
        self.streams.answered(question, posts, channel)
        return self.streams.latest(channel_id)

    async def regenerate(
        self, turn: AnsweredTurn, conversation: ChannelConversation, role_ids: Collection[int]
    ) -> None:
        """ "Regenerate": a new answer to the question of the channel's latest answer, streamed into its posts,
        replacing the answer in the conversation's model history. `role_ids`: its asker's roles, resolved."""
        outlet = MessageReply(turn.question, turn.channel)
        channel_id = outlet.channel_id
        # Resolved here, where the question comes back from Discord: the asker of the answer being rewritten.
        # A DM's whole history is the asker's own; a thread's readability follows its parent channel.
        question = Question.of_message(turn.question, to_record(turn.question))
        deps = self.chat_deps(question, outlet, role_ids)
        reads_history = deps.requester_can_read_history
        shown, earlier = regenerated_view(conversation, deps.requester_id, deps.bot_user_id, reads_history)
        deps = replace(deps, links=self._links_given(question, shown))

        profile = self.profiles.for_channel(channel_id)
        model = await self.models.answer_model_for(profile, question.guild_id, deps.requester_id)

        def write(listener: AnswerListener) -> Awaitable[Reply]:
            return regenerate_reply(
                self.responder,
                shown,
                deps,
                listener=listener,
                model=model,
                instructions=persona_instructions(profile.persona),
            )

        streamed = await self.streams.stream(outlet, write, apology=APOLOGY, delivery=self.delivery, reuse=turn.posts)
        outcome = AnswerOutcome.regenerated_into(question, outlet, streamed, turn.posts, kept_before=earlier)
        await self.tail.finish(outcome, conversation)


def _readable_channels(
    guild: discord.Guild | None, author: discord.User | discord.Member, outlet: Outlet
) -> Callable[[], frozenset[int]] | None:
    """How to find the channels whose documents the answer may quote (edge/readable.py), once the knowledge tool
    needs them: the asker's readable channels, narrowed to what the channel may read when the answer is public."""
    if guild is None or not isinstance(author, discord.Member):
        return None
    return functools.partial(shown_channel_ids, guild, author, outlet.channel if outlet.public else None)
