"""Parley's Discord wiring and composition root: `python bot.py` runs the bot."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import signal
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

import discord
import logfire
import yarl
from pydantic import ValidationError

from pydantic_ai import Agent

from agent import ChatDeps, LLMJudge, ReplyFailed, build_judge, build_responder, generate_reply
from config import Settings, describe_settings_error
from conversation import ChannelConversation, ConversationManager, MessageRecord, ResponseDecider, utc_now
from history import ArchivedMessage, HistoryArchive, sqlite_path_from_url

log = logging.getLogger("parley")

DISCORD_MESSAGE_LIMIT = 2000  # https://discord.com/developers/docs/resources/message#create-message
APOLOGY = "Sorry, I couldn't come up with an answer just now. Please try again in a moment."
# Ordinary chat messages; joins, pins, boosts and the like are system messages nobody addresses.
CHAT_MESSAGE_TYPES = frozenset({discord.MessageType.default, discord.MessageType.reply})


# --- Turning Discord messages into engine records ----------------------------------------------


def to_record(message: discord.Message) -> MessageRecord:
    """The engine's view of a Discord message."""
    return MessageRecord(
        message_id=message.id,
        channel_id=message.channel.id,
        author_id=message.author.id,
        author=message.author.display_name,
        content=message.clean_content,
        timestamp=message.created_at,
        is_bot=message.author.bot,
        mention_ids=frozenset(user.id for user in message.mentions),
        reply_to_author_id=replied_author_id(message),
        mentions_everyone=message.mention_everyone,
    )


def replied_author_id(message: discord.Message) -> int | None:
    reference = message.reference
    if reference is None or message.type is not discord.MessageType.reply:
        return None
    resolved = reference.resolved
    if isinstance(resolved, discord.Message):
        return resolved.author.id
    return None


def record_from_archive(row: ArchivedMessage) -> MessageRecord:
    """An archived message as conversation context (who it mentioned is not archived)."""
    return MessageRecord(
        message_id=row.message_id,
        channel_id=row.channel_id,
        author_id=row.author_id,
        author=row.author_name,
        content=row.content,
        timestamp=row.created_at,
        is_bot=row.is_bot,
    )


def to_archived(message: discord.Message) -> ArchivedMessage:
    """The archive's row for a Discord message."""
    return ArchivedMessage(
        message_id=message.id,
        guild_id=message.guild.id if message.guild else 0,
        channel_id=message.channel.id,
        author_id=message.author.id,
        author_name=message.author.display_name,
        content=message.clean_content,
        created_at=message.created_at,
        is_bot=message.author.bot,
        reply_to_message_id=message.reference.message_id if message.reference else None,
        edited_at=message.edited_at,
    )


# --- Delivering answers ------------------------------------------------------------------------

_FENCE = re.compile(r"^[ \t]*```(\S*)", re.MULTILINE)
_FENCE_CLOSE = "\n```"
_SENTENCE_END = re.compile(r"[.!?][)\"'\]]*\s")


def split_message(text: str, limit: int = DISCORD_MESSAGE_LIMIT) -> list[str]:
    """Split text into posts of at most `limit` characters, at the most natural boundary.

    Paragraphs first, then lines, sentences, words, and a hard cut only as a last resort. A code
    fence open at a cut is closed at the end of one post and reopened (same language) at the start
    of the next, so every post renders on its own and no text is lost.
    """
    posts: list[str] = []
    reopen = ""
    rest = text.strip("\n")
    while rest:
        whole = reopen + rest
        if _open_fence(whole) is not None:
            whole += _FENCE_CLOSE
        if len(whole) <= limit:
            posts.append(whole)
            break
        cut = _best_cut(rest, limit - len(reopen) - len(_FENCE_CLOSE))
        post = reopen + rest[:cut].rstrip()
        opener = _open_fence(post)
        if opener is not None:
            post += _FENCE_CLOSE
            reopen = opener + "\n"
        else:
            reopen = ""
        posts.append(post)
        rest = rest[cut:].lstrip("\n")
    return posts


def _open_fence(text: str) -> str | None:
    """The opening fence (with its language) if `text` ends inside a code block, else None."""
    opener = None
    for fence in _FENCE.finditer(text):
        opener = None if opener is not None else "```" + fence.group(1)
    return opener


def _best_cut(text: str, room: int) -> int:
    """Where to end a post of at most `room` characters: just after the best boundary."""
    window = text[:room]
    # A boundary in the first quarter would make a stub post; a later, weaker one reads better.
    floor = room // 4
    for boundary in ("\n\n", "\n"):
        position = window.rfind(boundary)
        if position > floor:
            return position + len(boundary)
    sentence_ends = [match.end() for match in _SENTENCE_END.finditer(window)]
    if sentence_ends and sentence_ends[-1] > floor:
        return sentence_ends[-1]
    position = window.rfind(" ")
    if position > floor:
        return position + 1
    return room


def reply_mentions(person: discord.abc.User) -> discord.AllowedMentions:
    """A reply may ping only the person it answers: never @everyone, @here or a role."""
    return discord.AllowedMentions(everyone=False, roles=False, users=[person], replied_user=True)


TYPING_REFRESH_SECONDS = 8  # Discord shows typing for 10 s after each trigger-typing request


@contextlib.asynccontextmanager
async def typing_indicator(channel: discord.abc.Messageable) -> AsyncIterator[None]:
    """Show "Parley is typing…" while the body runs, without delaying it by a round trip.

    The indicator runs beside the body: a slow or failing typing request never holds up the model call.
    """
    typing = asyncio.create_task(_keep_typing(channel))
    try:
        yield
    finally:
        typing.cancel()


async def _keep_typing(channel: discord.abc.Messageable) -> None:
    while True:
        try:
            await channel.typing()
        except discord.HTTPException as error:
            log.debug("typing indicator failed: %s", error)
            return
        await asyncio.sleep(TYPING_REFRESH_SECONDS)


@dataclass
class _Turn:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    waiting: int = 0


# --- The client -------------------------------------------------------------------------------


class Parley(discord.Client):
    """Listens to guild channels, keeps their conversations, and answers what is meant for it."""

    def __init__(
        self,
        *,
        settings: Settings,
        manager: ConversationManager,
        decider: ResponseDecider,
        responder: Agent[ChatDeps, str],
        judge: LLMJudge | None = None,
        **options: Any,
    ) -> None:
        intents = discord.Intents.none()
        intents.guilds = True
        intents.guild_messages = True
        intents.message_content = True
        super().__init__(intents=intents, allowed_mentions=discord.AllowedMentions.none(), **options)
        self.settings = settings
        self.manager = manager
        self.decider = decider
        self.responder = responder
        self.judge = judge
        self.archive: HistoryArchive | None = None
        # The archive holds every message only from the moment this process started watching.
        self.watching_since = utc_now()
        self._turns: dict[int, _Turn] = {}
        # The model provider's HTTP client is closed only by leaving the agent's context.
        self._resources = contextlib.AsyncExitStack()

    async def setup_hook(self) -> None:
        assert self.user is not None  # setup_hook runs after login
        await self._resources.enter_async_context(self.responder)
        if self.judge is not None:
            await self._resources.enter_async_context(self.judge.agent)
            # The judge tells the model whom the bot last answered, so it must know who the bot is.
            self.judge.bot_user_id = self.user.id
            self.judge.bot_name = self.user.display_name
        if self.settings.archive_enabled:
            self.archive = await HistoryArchive.open(
                sqlite_path_from_url(self.settings.database_url),
                retention_days=self.settings.history_retention_days,
            )

    async def close(self) -> None:
        await super().close()
        # close() runs more than once on shutdown (the signal path and `async with`); close the archive once.
        archive, self.archive = self.archive, None
        if archive is not None:
            await archive.close()
        await self._resources.aclose()

    async def on_ready(self) -> None:
        # A new gateway session (not a resume) may have missed messages: the archive's unbroken
        # record of the channels starts again now.
        self.watching_since = utc_now()
        log.info("connected as %s to %d guild(s)", self.user, len(self.guilds))

    # -- Messages --

    async def on_message(self, message: discord.Message) -> None:
        if message.guild is None or self.user is None:
            return  # direct messages are out of scope
        if self.archive is not None:
            self.archive.add(to_archived(message))
        if message.author.id == self.user.id:
            return  # our own posts are recorded when we send them
        if message.author.bot and self.settings.ignore_other_bots:
            return
        if message.type not in CHAT_MESSAGE_TYPES:
            return
        await self.handle(message)

    async def handle(self, message: discord.Message) -> None:
        """Record, decide and answer one message; a channel's messages are decided in arrival order."""
        assert self.user is not None
        channel_id = message.channel.id
        record = to_record(message)
        live = self.manager.record_message(channel_id, record)
        trigger: bool | None = None
        if live is None and channel_id not in self._turns:
            # Nothing is starting a conversation here, so this message can be decided at once.
            trigger, _ = self.decider.should_start_conversation(record, self.user.id)
            if not trigger:
                return
        async with self._channel_turn(channel_id):
            conversation = await self._conversation_for(message, record, live, trigger)
            if conversation is None:
                return
            respond, _ = await self.decider.should_respond(record, conversation, self.user.id)
            if respond:
                await self.answer(message, record, conversation)

    @contextlib.asynccontextmanager
    async def _channel_turn(self, channel_id: int) -> AsyncIterator[None]:
        """One message of a channel at a time, first come first served; idle channels hold no lock."""
        turn = self._turns.setdefault(channel_id, _Turn())
        turn.waiting += 1
        try:
            async with turn.lock:
                yield
        finally:
            turn.waiting -= 1
            if turn.waiting == 0:
                del self._turns[channel_id]

    async def _conversation_for(
        self,
        message: discord.Message,
        record: MessageRecord,
        live: ChannelConversation | None,
        trigger: bool | None,
    ) -> ChannelConversation | None:
        """The conversation `record` belongs to, starting one if the message is a trigger."""
        assert self.user is not None
        channel_id = message.channel.id
        conversation = self.manager.get(channel_id)
        if conversation is None:
            if trigger is None:
                trigger, _ = self.decider.should_start_conversation(record, self.user.id)
            if not trigger:
                return None
            conversation = self.manager.start(channel_id, await self.load_context(message))
            self.manager.record_message(channel_id, record)
        elif conversation is not live:
            self.manager.record_message(channel_id, record)
        return conversation

    async def load_context(self, message: discord.Message) -> list[MessageRecord]:
        """The channel's recent messages before `message`, oldest first, as a new conversation's context.

        From the archive when it has watched the channel for the whole period (no Discord round
        trip), otherwise from Discord's message history.
        """
        count = self.settings.context_message_count
        if count == 0:
            return []
        since = message.created_at - timedelta(minutes=self.settings.context_max_age_minutes)
        if self.archive is not None and since >= self.watching_since:
            return await self._context_from_archive(self.archive, message, count, since)
        return await self._context_from_discord(message, count, since)

    async def _context_from_archive(
        self, archive: HistoryArchive, message: discord.Message, count: int, since: datetime
    ) -> list[MessageRecord]:
        await archive.flush()  # the messages just before the trigger may still be queued
        hours = (message.created_at - since).total_seconds() / 3600
        earlier = await archive.recent(
            message.channel.id, limit=count, hours=hours, now=message.created_at, before=message.created_at
        )
        return [record_from_archive(row) for row in earlier]

    async def _context_from_discord(self, message: discord.Message, count: int, since: datetime) -> list[MessageRecord]:
        try:
            history = [
                to_record(earlier)
                async for earlier in message.channel.history(limit=count, before=message, after=since)
            ]
        except discord.HTTPException as error:
            log.warning("could not load context for channel %s: %s", message.channel.id, error)
            return []
        history.sort(key=lambda record: record.message_id)
        return history

    # -- Answering --

    async def answer(self, message: discord.Message, record: MessageRecord, conversation: ChannelConversation) -> None:
        """Run the responder and post its answer; on failure apologise and leave the history as it was."""
        assert self.user is not None and message.guild is not None
        deps = ChatDeps(
            bot_name=self.user.display_name,
            guild_id=message.guild.id,
            guild_name=message.guild.name,
            channel_id=message.channel.id,
            channel_name=getattr(message.channel, "name", str(message.channel.id)),
            archive=self.archive,
            requester_id=message.author.id,
        )
        async with typing_indicator(message.channel):
            try:
                reply = await generate_reply(
                    self.responder, conversation, record, deps, self.settings, bot_user_id=self.user.id
                )
            except ReplyFailed:
                log.exception("answer to message %s in channel %s failed", message.id, message.channel.id)
                await self.deliver(message, APOLOGY)
                return
        posts = await self.deliver(message, reply.text)
        if posts:
            self.manager.record_bot_response(message.channel.id, reply.messages)

    async def deliver(self, message: discord.Message, text: str) -> list[discord.Message]:
        """Post `text` as a reply to `message`, split to Discord's limit; records what was posted."""
        posts: list[discord.Message] = []
        reference = message.to_reference(fail_if_not_exists=False)
        try:
            for index, part in enumerate(split_message(text)):
                if index == 0:
                    post = await message.channel.send(
                        part, reference=reference, allowed_mentions=reply_mentions(message.author)
                    )
                else:
                    post = await message.channel.send(part)
                posts.append(post)
                # Whom the post answers drives follow-up decisions; don't depend on Discord echoing it.
                self.manager.record_message(
                    message.channel.id, replace(to_record(post), reply_to_author_id=message.author.id)
                )
        except discord.HTTPException as error:
            log.error("could not post to channel %s: %s", message.channel.id, error)
        return posts

    # -- Archive upkeep: Discord's developer terms require honouring edits and deletions --

    async def on_raw_message_edit(self, payload: discord.RawMessageUpdateEvent) -> None:
        if self.archive is None or "content" not in payload.data:
            return
        edited = payload.message.edited_at or utc_now()
        self.archive.edit(payload.message_id, payload.message.clean_content, edited)

    async def on_raw_message_delete(self, payload: discord.RawMessageDeleteEvent) -> None:
        if self.archive is not None:
            self.archive.delete([payload.message_id])

    async def on_raw_bulk_message_delete(self, payload: discord.RawBulkMessageDeleteEvent) -> None:
        if self.archive is not None:
            self.archive.delete(payload.message_ids)

    async def on_guild_channel_delete(self, channel: discord.abc.GuildChannel) -> None:
        self.manager.end(channel.id)
        if self.archive is not None:
            self.archive.delete_channel(channel.id)

    async def on_raw_thread_delete(self, payload: discord.RawThreadDeleteEvent) -> None:
        self.manager.end(payload.thread_id)
        if self.archive is not None:
            self.archive.delete_channel(payload.thread_id)

    async def on_guild_remove(self, guild: discord.Guild) -> None:
        for channel in guild.channels:
            self.manager.end(channel.id)
        if self.archive is not None:
            self.archive.delete_guild(guild.id)


# --- Composition root --------------------------------------------------------------------------


def configure_logging(settings: Settings) -> None:
    """Console logging at LOG_LEVEL; with LOGFIRE_TOKEN set, logs and model runs also go to Logfire."""
    logfire.configure(send_to_logfire="if-token-present", service_name="parley", console=False)
    if os.environ.get("LOGFIRE_TOKEN"):
        # Without a token the spans would go nowhere, yet building them costs ~2 ms a model call.
        logfire.instrument_pydantic_ai()
    logging.basicConfig(
        level=settings.log_level,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        handlers=[logging.StreamHandler(), logfire.LogfireLoggingHandler()],
        force=True,
    )


def point_at_discord(settings: Settings) -> None:
    """Aim discord.py at REST and gateway proxies (local fakes in tests) when configured."""
    if settings.discord_api_base_url:
        discord.http.Route.BASE = settings.discord_api_base_url.rstrip("/")
    if settings.discord_gateway_url:
        discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(settings.discord_gateway_url)


def build_client(settings: Settings, **options) -> Parley:
    """Everything Parley needs, wired together: the engine, the agents and the client."""
    manager = ConversationManager(
        settings.conversation_timeout_seconds, max_messages=settings.max_conversation_messages
    )
    judge = build_judge(settings) if settings.use_llm_judge else None
    decider = ResponseDecider(
        settings.followup_window_seconds, judge, judge_timeout_seconds=settings.judge_timeout_seconds
    )
    return Parley(
        settings=settings,
        manager=manager,
        decider=decider,
        responder=build_responder(settings),
        judge=judge,
        **options,
    )


async def run(client: Parley, token: str) -> None:
    """Run until Discord disconnects for good or SIGTERM/SIGINT asks for a graceful stop."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    try:
        async with client:
            serving = asyncio.create_task(client.start(token))
            stopping = asyncio.create_task(stop.wait())
            await asyncio.wait({serving, stopping}, return_when=asyncio.FIRST_COMPLETED)
            stopping.cancel()
            if serving.done():
                serving.result()
            log.info("shutting down")
            await client.close()
            await serving
    finally:
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)


def main() -> int:
    try:
        settings = Settings()
    except ValidationError as error:
        print(describe_settings_error(error), file=sys.stderr)
        return 2
    configure_logging(settings)
    point_at_discord(settings)
    client = build_client(settings)
    try:
        asyncio.run(run(client, settings.discord_token.get_secret_value()))
    except discord.LoginFailure:
        print("Configuration error: DISCORD_TOKEN was rejected by Discord", file=sys.stderr)
        return 2
    except discord.PrivilegedIntentsRequired:
        print(
            "Configuration error: enable the Message Content intent for this bot in the Discord developer portal",
            file=sys.stderr,
        )
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
