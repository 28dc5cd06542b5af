"""The live answer: an answer posted as soon as its first sentence is written and edited as it grows,
its Stop button, and the "Regenerate" message command.

The model side is agent.py's (`generate_reply(..., listener=...)`): it tells a `LiveAnswer` the text
so far and each tool call, from inside the model's stream. The `LiveAnswer` only notes them; its own
writer task turns the latest text into Discord posts, cut exactly where `discord_io.split_message`
cuts the whole answer, and edits them at most once every STREAM_EDIT_SECONDS per channel. discord.py's
HTTP client waits out a 429 and sends the edit again; the text that arrived meanwhile goes with the
next edit, so none is lost. When the run ends, every post is set to what a non-streamed answer posts.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import re
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import discord
from discord import app_commands
from pydantic_ai import CancellationToken

from agent import AnswerListener, Reply, ReplyFailed
from discord_io import DISCORD_MESSAGE_LIMIT, image_files, split_message
from tools.images import MadeImage
from tools.registry import status_line

log = logging.getLogger("parley.streaming")

# What is posted once the model has written this much with no sentence ended yet (a list, some code).
FIRST_POST_CHARS = 200
# The first post waits this long after the model's first words: an answer written by then is posted
# whole, like a non-streamed one (no edits, no Stop button), and a longer one still shows well within
# the 1.5 s a member should wait for the first text.
FIRST_POST_DELAY_SECONDS = 0.5
_SENTENCE_WRITTEN = re.compile(r"[.!?…][)\"'\]*_~`]*\s|\n")
# A tool round quicker than this shows no status: a line that flashes past is noise.
STATUS_DELAY_SECONDS = 0.5
# The one line an answer that broke off partway leaves: its half is taken down, never left as if whole.
BROKE_OFF = "Sorry, my answer broke off partway, so I took it down. Please try again in a moment."
STOP_LABEL = "Stop"
ANSWER_FINISHED = "This answer is finished; there is nothing to stop."
NOT_YOUR_ANSWER = "Only the person who asked, or someone who can manage messages here, can do that to this answer."
CANNOT_REGENERATE = "I can only regenerate my latest answer in a conversation that is still going on."
REGENERATING = "Writing that answer again…"
BUSY = "I'm answering in this channel right now; try again once I've finished."
# Channels whose next edit time is kept; the oldest passed ones are dropped past this.
PACED_CHANNELS = 1_000
# Channels whose latest answer can be regenerated.
LATEST_ANSWERS_KEPT = 1_000


def tool_status(tool_name: str) -> str:
    """A short status in italics while the model runs a tool: the tool's own, as the registry declares it."""
    return f"*{status_line(tool_name)}*"


class ChannelPacer:
    """At most one write per `interval` seconds per channel, in order of asking, across all answers there."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self._next: OrderedDict[int, float] = OrderedDict()

    async def wait(self, channel_id: int) -> None:
        """Wait for the channel's next slot, and take it."""
        now = asyncio.get_running_loop().time()
        start = max(now, self._next.pop(channel_id, now))
        self._next[channel_id] = start + self.interval
        while len(self._next) > PACED_CHANNELS and next(iter(self._next.values())) <= now:
            self._next.popitem(last=False)
        if start > now:
            await asyncio.sleep(start - now)


T = TypeVar("T")


class Deliverer(Protocol):
    """How a post or edit reaches Discord (answering.delivery.Delivery): tried again on server errors and timeouts
    until Discord takes it or a deadline has passed; None then, or on a refusal (logged)."""

    async def attempt(self, send: Callable[[], Awaitable[T]], what: str, seconds: float | None = None) -> T | None: ...


class Outlet(Protocol):
    """Where an answer's posts go (edge/asking.py): replies to a message in its channel (or the thread opened on
    it), or a slash command's response and follow-ups, seen by the channel or by the asker alone.

    Its posts are `discord.Message`s whatever the outlet, so they are edited and deleted alike (`post.edit`).
    """

    @property
    def channel(self) -> discord.abc.Messageable:
        """Where the posts appear."""
        ...

    @property
    def channel_id(self) -> int: ...

    @property
    def asker_id(self) -> int: ...

    @property
    def public(self) -> bool:
        """Whether everyone in the channel sees the posts (they are then the conversation's); False: the asker alone."""
        ...

    @property
    def replies(self) -> bool:
        """Whether the first post reaches the asker without naming them (a reply to their message, their command's
        response); False in the thread opened on their message, where a prompt must name them."""
        ...

    @property
    def mentions(self) -> discord.AllowedMentions:
        """Whom the first post may ping: the asker at most, never @everyone, @here or a role."""
        ...

    def waiting(self) -> AbstractAsyncContextManager[None]:
        """What the asker sees while the answer is written ("Parley is typing…")."""
        ...

    async def send(
        self,
        content: str,
        *,
        first: bool,
        view: discord.ui.View | None = None,
        files: Sequence[discord.File] = (),
    ) -> discord.Message:
        """Post `content` (with `files`): the first post of an answer (or a prompt) answers the question, the others
        follow."""
        ...


class LiveAnswer:
    """One answer as it streams into a channel: an `agent.AnswerListener` and the posts it writes."""

    def __init__(
        self,
        outlet: Outlet,
        pacer: ChannelPacer,
        *,
        max_posts: int,
        delivery: Deliverer,
        reuse: Sequence[discord.Message] = (),
        on_first_post: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.delivery = delivery
        # Where the answer goes: replies in the question's channel, the thread opened on it, a command's response.
        self.outlet = outlet
        self.on_first_post = on_first_post
        self.pacer = pacer
        self.max_posts = max_posts
        self.cancellation = CancellationToken()
        self.outgrown = False
        # Posts written so far, oldest first, and the text each shows; a regenerated answer starts with the old ones.
        self.posts: list[discord.Message] = list(reuse)
        self._shown = [post.content for post in reuse]
        self._has_button = bool(reuse)
        self._text = ""
        self._status: str | None = None
        self._status_due = 0.0
        self._first_post_due: float | None = None
        self._changed = asyncio.Event()
        self._stopped = asyncio.Event()
        self._done = False
        self._broken = False
        self._writer: asyncio.Task[None] | None = None

    @property
    def channel_id(self) -> int:
        return self.outlet.channel_id

    @property
    def asker_id(self) -> int:
        return self.outlet.asker_id

    # -- agent.AnswerListener: called from inside the model's stream, so they only take note.

    def text_so_far(self, text: str) -> None:
        self._text = text.strip()
        self._status = None
        # Each post takes at most DISCORD_MESSAGE_LIMIT characters of the text: past this, the posts the answer
        # may take are all written, and what the model writes on would be paid for and never shown.
        if len(self._text) > self.max_posts * DISCORD_MESSAGE_LIMIT and not self.outgrown:
            self.outgrown = True
            self.cancellation.cancel()
        if self._first_post_due is None:
            loop = asyncio.get_running_loop()
            self._first_post_due = loop.time() + FIRST_POST_DELAY_SECONDS
            loop.call_later(FIRST_POST_DELAY_SECONDS, self._changed.set)
        self._changed.set()

    def tool_called(self, tool_name: str) -> None:
        # A response that calls tools is no answer: its text gives way to the status until the next one.
        self._text = ""
        self._status = tool_status(tool_name)
        loop = asyncio.get_running_loop()
        self._status_due = loop.time() + STATUS_DELAY_SECONDS
        loop.call_later(STATUS_DELAY_SECONDS, self._changed.set)
        self._changed.set()

    # -- Writing

    def start(self) -> None:
        self._writer = asyncio.create_task(self._write_as_it_grows(), name=f"stream-{self.channel_id}")

    def stop(self) -> None:
        """End the answer where it is; what was written stays, marked as stopped (`agent.STOPPED_NOTE`)."""
        self.cancellation.cancel()
        self._stopped.set()

    async def stopped(self) -> None:
        await self._stopped.wait()

    async def finish(self, text: str, images: Sequence[MadeImage] = ()) -> list[discord.Message]:
        """Show `text` as the final posts, exactly `split_message(text, max_posts=...)`, without the button, the
        last of them with the `images` the answer made attached."""
        await self._end_writer()
        await self._show(split_message(text, max_posts=self.max_posts), final=True)
        await self._attach(images)
        return list(self.posts)

    async def _attach(self, images: Sequence[MadeImage]) -> None:
        """Attach `images` to the last post, by an edit, as the text was streamed into it; a regenerated answer's
        posts lose the images the answer they held had made."""
        for index, post in enumerate(self.posts):
            files = image_files(images) if index == len(self.posts) - 1 else []
            if self._broken or not (files or post.attachments):
                continue
            edited = await self._deliver(functools.partial(post.edit, attachments=files))
            if edited is not None:
                self.posts[index] = edited

    async def fail(self, apology: str) -> list[discord.Message]:
        """End an answer whose model failed: `apology` if nothing was shown yet, else BROKE_OFF in place of it."""
        await self._end_writer()
        await self._show([BROKE_OFF if self.posts else apology], final=True)
        return list(self.posts)

    async def abandon(self) -> None:
        """Stop writing at once (the bot is shutting down); the posts stay as they are."""
        if self._writer is not None:
            self._writer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._writer

    async def _end_writer(self) -> None:
        self._done = True
        self._changed.set()
        if self._writer is not None:
            await self._writer

    async def _write_as_it_grows(self) -> None:
        while not self._done:
            await self._changed.wait()
            self._changed.clear()
            if not self._done:
                await self._show(self._streamed(), final=False)

    def _streamed(self) -> list[str]:
        """The posts the answer should show now: the status of a running tool, or the text so far once a sentence
        of it is written, split as the whole answer will be (every post but the last is already final)."""
        if not self._text:
            due = self._status is not None and asyncio.get_running_loop().time() >= self._status_due
            return [self._status] if self._status is not None and due else []
        if not self.posts and not self._first_post_due_now():
            return []
        # The posts shown can hold no more than this of the text; splitting the rest would be wasted.
        return split_message(self._text[: self.max_posts * DISCORD_MESSAGE_LIMIT])[: self.max_posts]

    def _first_post_due_now(self) -> bool:
        due = self._first_post_due is not None and asyncio.get_running_loop().time() >= self._first_post_due
        return due and (len(self._text) >= FIRST_POST_CHARS or _SENTENCE_WRITTEN.search(self._text) is not None)

    async def _show(self, target: list[str], *, final: bool) -> None:
        """Bring the posts to `target`: new posts are sent at once, changed ones edited at the channel's pace.

        While streaming, the target is read again after each wait, so every edit carries the newest text.
        """
        index = 0
        while index < len(target) and not self._broken:
            if index >= len(self.posts):
                await self._send(target[index], final=final)
            elif self._shown[index] != target[index] or (final and index == 0 and self._has_button):
                await self.pacer.wait(self.channel_id)
                if not final:
                    target = self._streamed()
                    if index >= len(target):
                        break
                await self._edit(index, target[index], final=final)
            index += 1
        if final and not self._broken:
            await self._delete(self.posts[len(target) :])
            del self.posts[len(target) :]

    async def _send(self, content: str, *, final: bool) -> None:
        first = not self.posts
        view = stop_view(self.asker_id) if first and not final else None
        post = await self._deliver(lambda: self.outlet.send(content, first=first, view=view))
        if post is None:
            return
        if not self.posts and not final:
            self._has_button = True
        self.posts.append(post)
        self._shown.append(content)
        if len(self.posts) == 1 and self.on_first_post is not None:
            await self.on_first_post()

    async def _deliver(self, send: Callable[[], Awaitable[discord.Message]]) -> discord.Message | None:
        """`send()` through the delivery (retried under its deadline); None, and no more posts, if it failed."""
        try:
            result = await self.delivery.attempt(send, f"to channel {self.channel_id}")
        except RuntimeError as error:  # the client closed under it
            log.error("could not post to channel %s: %s", self.channel_id, error)
            result = None
        if result is None:
            # The delivery has retried what Discord may yet take: this channel takes no posts now.
            self._broken = True
        return result

    async def _edit(self, index: int, content: str, *, final: bool) -> None:
        first = index == 0
        # Edits never ping: the first post may name only the asker, as when it was sent, and the rest no one.
        mentions = self.outlet.mentions if first else discord.AllowedMentions.none()
        options: dict[str, Any] = {"view": None} if first and final else {}
        post = self.posts[index]
        edited = await self._deliver(lambda: post.edit(content=content, allowed_mentions=mentions, **options))
        if edited is None:
            return
        self.posts[index] = edited
        self._shown[index] = content
        if first and final:
            self._has_button = False

    async def _delete(self, posts: Sequence[discord.Message]) -> None:
        for post in posts:
            try:
                await post.delete()
            except discord.HTTPException as error:
                log.warning("could not delete an outgrown post in channel %s: %s", self.channel_id, error)

    @property
    def broken(self) -> bool:
        """Discord did not take a post or edit of this answer in time: what it shows is not the answer."""
        return self._broken


def stop_view(asker_id: int) -> discord.ui.View:
    """The Stop button of a streaming answer; persistent, so a click after a restart gets a clear answer."""
    view = discord.ui.View(timeout=None)
    view.add_item(StopButton(asker_id))
    return view


class StopButton(discord.ui.DynamicItem[discord.ui.Button[discord.ui.View]], template=r"parley:stop:(?P<asker>\d+)"):
    """Stop: the asker's, or a message manager's. Its custom id carries the asker, so it works after a restart."""

    def __init__(self, asker_id: int) -> None:
        super().__init__(
            discord.ui.Button(
                label=STOP_LABEL, style=discord.ButtonStyle.secondary, custom_id=f"parley:stop:{asker_id}"
            )
        )
        self.asker_id = asker_id

    @classmethod
    async def from_custom_id(
        cls, interaction: discord.Interaction, item: discord.ui.Item[Any], match: re.Match[str]
    ) -> StopButton:
        return cls(int(match["asker"]))

    async def callback(self, interaction: discord.Interaction) -> None:
        streams = getattr(interaction.client, "streams", None)
        message = interaction.message
        live = streams.live_on(message.id) if isinstance(streams, AnswerStreams) and message is not None else None
        if live is None:
            await interaction.response.send_message(ANSWER_FINISHED, ephemeral=True)
        elif not may_change(interaction, self.asker_id):
            await interaction.response.send_message(NOT_YOUR_ANSWER, ephemeral=True)
        else:
            log.info("answer in channel %s stopped by %s", live.channel_id, interaction.user.id)
            live.stop()
            await interaction.response.defer()


def may_change(interaction: discord.Interaction, asker_id: int) -> bool:
    """Whether the interaction's user may stop or regenerate an answer to `asker_id`: theirs, or Manage Messages."""
    return interaction.user.id == asker_id or interaction.permissions.manage_messages


# --- The answers of a client ------------------------------------------------------------------


@dataclass(frozen=True)
class Streamed:
    """How a streamed answer ended: its posts, and the reply (None when the model failed, with `failure`)."""

    posts: list[discord.Message]
    reply: Reply | None
    failure: ReplyFailed | None = None
    # Discord did not take a post or edit in time, so the posts do not show the whole answer.
    broken: bool = False


@dataclass(frozen=True)
class AnsweredTurn:
    """A channel's latest answer, which "Regenerate" may replace: the question and the posts that answered it."""

    question: discord.Message
    posts: list[discord.Message]
    # Where the answer is: the question's channel, or the thread opened on it.
    channel: discord.abc.Messageable


class AnswerStreams:
    """The client's streaming answers: the channels' pace, the answers streaming now, the latest answer per channel."""

    def __init__(self, edit_seconds: float, max_posts: int) -> None:
        self.pacer = ChannelPacer(edit_seconds)
        self.max_posts = max_posts
        self._live: list[LiveAnswer] = []
        self._latest: OrderedDict[int, AnsweredTurn] = OrderedDict()

    async def stream(
        self,
        outlet: Outlet,
        write: Callable[[AnswerListener], Awaitable[Reply]],
        *,
        apology: str,
        delivery: Deliverer,
        reuse: Sequence[discord.Message] = (),
    ) -> Streamed:
        """Stream the answer `write` produces into `outlet` (into `reuse`'s posts first)."""
        async with contextlib.AsyncExitStack() as typing:
            # "Parley is typing…" until the answer shows: after that, the answer itself shows it is being written.
            await typing.enter_async_context(outlet.waiting())
            live = LiveAnswer(
                outlet,
                self.pacer,
                max_posts=self.max_posts,
                delivery=delivery,
                reuse=reuse,
                on_first_post=typing.aclose,
            )
            self._live.append(live)
            live.start()
            try:
                reply = await write(live)
            except ReplyFailed as failure:
                return Streamed(await live.fail(apology), None, failure, live.broken)
            except BaseException:
                await live.abandon()
                raise
            finally:
                self._live.remove(live)
            return Streamed(await live.finish(reply.text, reply.images), reply, broken=live.broken)

    def live_on(self, message_id: int) -> LiveAnswer | None:
        """The answer streaming into the post `message_id`, if one is."""
        return next((live for live in self._live if live.posts and live.posts[0].id == message_id), None)

    def busy(self, channel_id: int) -> bool:
        return any(live.channel_id == channel_id for live in self._live)

    def answered(
        self, question: discord.Message, posts: list[discord.Message], channel: discord.abc.Messageable
    ) -> None:
        """Note the latest answer in `channel`, for "Regenerate"."""
        channel_id: int = getattr(channel, "id", question.channel.id)
        self._latest.pop(channel_id, None)
        self._latest[channel_id] = AnsweredTurn(question, posts, channel)
        if len(self._latest) > LATEST_ANSWERS_KEPT:
            self._latest.popitem(last=False)

    def latest(self, channel_id: int) -> AnsweredTurn | None:
        return self._latest.get(channel_id)

    def forget_latest(self, channel_id: int) -> None:
        """The channel's latest answer can no longer be regenerated (a command's answer followed it)."""
        self._latest.pop(channel_id, None)


# --- Regenerate -------------------------------------------------------------------------------


class Regenerator(Protocol):
    """The client, as "Regenerate" needs it."""

    streams: AnswerStreams

    async def latest_answer(self, channel: discord.abc.Messageable) -> AnsweredTurn | None: ...

    async def regenerate_refusal(self, turn: AnsweredTurn, member: discord.Member | discord.User) -> str | None: ...

    async def regenerate(self, turn: AnsweredTurn, member: discord.Member | discord.User) -> None: ...


def regenerate_command() -> app_commands.ContextMenu:
    """The "Regenerate" message command: a new answer in place of Parley's latest one in a live conversation."""
    command = app_commands.ContextMenu(name="Regenerate", callback=_regenerate)
    command.guild_only = True
    return command


async def _regenerate(interaction: discord.Interaction, message: discord.Message) -> None:
    client: Any = interaction.client
    regenerator: Regenerator = client
    turn = await regenerator.latest_answer(message.channel)
    if turn is None or message.id not in {post.id for post in turn.posts}:
        await interaction.response.send_message(CANNOT_REGENERATE, ephemeral=True)
        return
    if not may_change(interaction, turn.question.author.id):
        await interaction.response.send_message(NOT_YOUR_ANSWER, ephemeral=True)
        return
    if regenerator.streams.busy(message.channel.id):
        await interaction.response.send_message(BUSY, ephemeral=True)
        return
    # Admitted like any answer: the member's rate and the server's budget, before a word is said.
    refusal = await regenerator.regenerate_refusal(turn, interaction.user)
    if refusal is not None:
        await interaction.response.send_message(refusal, ephemeral=True)
        return
    await interaction.response.send_message(REGENERATING, ephemeral=True)
    await regenerator.regenerate(turn, interaction.user)
