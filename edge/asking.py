"""A question put to Parley, however it was asked, and where its answer goes.

A member asks by a message (an @mention, a reply, a follow-up) or by a command (/ask). The answering path reads
both from here: the `Question` says who asked, where, and what the conversation records; an outlet
(`edge.streaming.Outlet`) says where the answer's posts go. `MessageReply` replies to a message in its channel (or in
the thread opened on it); `InteractionReply` fills a command's deferred response and its follow-ups, in the
channel or for the asker alone (ephemeral). Their posts are `discord.Message`s either way (discord.py's
`InteractionMessage` and `WebhookMessage` edit and delete themselves through the interaction's webhook), so a
streamed answer is edited alike in both.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import discord

from discord_io import author_permissions, may_post, reply_mentions, typing_indicator
from helpdesk.question import SupportAnswer
from records import AskedAbout, FromDocuments, MessageRecord


@dataclass(frozen=True)
class Question:
    """Who asked Parley what, and where.

    `record` is the question as the conversation records it (its author is the asker; a command's question has the
    interaction's id, a snowflake of the moment it was asked). `channel` is where it was asked; `reads_history`:
    the asker may read that channel's history (Read Message History; a DM's history is their own);
    `manages_messages`: they have Manage Messages there (a timed post to the channel needs it); `may_post`: they
    may see it and post in it (`discord_io.may_post`), which anything Parley posts there for them needs. `message`
    is the message that asked, None for a command. `about`: the message it asks about ("Ask Parley" on a message),
    with what of the conversation around it the asker may read.
    """

    record: MessageRecord
    asker: discord.Member | discord.User
    channel: discord.abc.Messageable
    guild: discord.Guild | None
    reads_history: bool
    message: discord.Message | None = None
    manages_messages: bool = False
    about: AskedAbout | None = None
    may_post: bool = False
    # An unaddressed question the support desk answers from the documents: its feedback buttons go under the answer.
    support: SupportAnswer | None = None
    # What the desk answers it from: the documents' sections found for it, and what was said after it.
    documents: FromDocuments | None = None

    @classmethod
    def of_message(cls, message: discord.Message, record: MessageRecord) -> Question:
        permissions = author_permissions(message)  # once: asked of every message that arrives
        reads_history = message.guild is None or permissions.read_message_history
        in_thread = isinstance(message.channel, discord.Thread)
        return cls(
            record,
            message.author,
            message.channel,
            message.guild,
            reads_history,
            message,
            permissions.manage_messages,
            may_post=message.guild is None or may_post(permissions, in_thread=in_thread),
        )

    @property
    def id(self) -> int:
        return self.record.message_id

    @property
    def asker_id(self) -> int:
        return self.asker.id

    @property
    def guild_id(self) -> int:
        """The server's id; 0 in a direct message."""
        return 0 if self.guild is None else self.guild.id

    @property
    def channel_id(self) -> int:
        """The channel (or thread, or DM) it was asked in."""
        channel_id: int = getattr(self.channel, "id", self.record.channel_id)
        return channel_id

    @property
    def named_member_ids(self) -> frozenset[int]:
        """The members the question names: those it @mentions, the author of the message it replies to, and of the
        message it asks about. A fact remembered from it may be about one of them (tools.remember)."""
        record = self.record
        named = {*record.mention_ids, record.reply_to_author_id, self.about and self.about.target.author_id}
        return frozenset(member_id for member_id in named if member_id)


@dataclass(frozen=True)
class MessageReply:
    """A `edge.streaming.Outlet`: posts in `channel`, the first replying to `message` when it is there (in the thread
    opened on it, the message is the thread's start: no reference is needed)."""

    message: discord.Message
    channel: discord.abc.Messageable
    public: bool = field(default=True, init=False)

    @classmethod
    def to(cls, message: discord.Message, where: discord.Thread | None = None) -> MessageReply:
        return cls(message, where or message.channel)

    @property
    def channel_id(self) -> int:
        channel_id: int = getattr(self.channel, "id", self.message.channel.id)
        return channel_id

    @property
    def asker_id(self) -> int:
        return self.message.author.id

    @property
    def replies(self) -> bool:
        return self.channel_id == self.message.channel.id

    @property
    def mentions(self) -> discord.AllowedMentions:
        return reply_mentions(self.message.author)

    def waiting(self) -> contextlib.AbstractAsyncContextManager[None]:
        return typing_indicator(self.channel)

    async def send(
        self,
        content: str,
        *,
        first: bool,
        view: discord.ui.View | None = None,
        files: Sequence[discord.File] = (),
    ) -> discord.Message:
        options: dict[str, Any] = {"files": list(files)} if files else {}
        if not first:
            return await self.channel.send(content, allowed_mentions=discord.AllowedMentions.none(), **options)
        if view is not None:
            options["view"] = view
        if self.replies:
            options["reference"] = self.message.to_reference(fail_if_not_exists=False)
        return await self.channel.send(content, allowed_mentions=self.mentions, **options)


class InteractionReply:
    """A `edge.streaming.Outlet`: a command's response, deferred when it was used (`defer`), filled by the first post;
    follow-ups after it. `ephemeral`: only the asker sees them, and nothing is posted in the channel.

    The response is the interaction's own message, so it answers the asker without a reference or a ping; in public
    it is a real message of the channel, authored by Parley, that members can reply to.
    """

    def __init__(self, interaction: discord.Interaction, *, ephemeral: bool) -> None:
        self.interaction = interaction
        self.ephemeral = ephemeral
        self.sent = False

    @property
    def channel(self) -> discord.abc.Messageable:
        channel = self.interaction.channel
        assert isinstance(channel, discord.abc.Messageable)  # a command is used in a channel, thread or DM
        return channel

    @property
    def channel_id(self) -> int:
        assert self.interaction.channel_id is not None
        return self.interaction.channel_id

    @property
    def asker_id(self) -> int:
        return self.interaction.user.id

    @property
    def public(self) -> bool:
        return not self.ephemeral

    @property
    def expired(self) -> bool:
        """Whether the interaction's token has expired (15 minutes after the command was used): its response can no
        longer be filled, nor anything followed up.
        https://discord.com/developers/docs/interactions/receiving-and-responding#followup-messages"""
        return self.interaction.is_expired()

    @property
    def replies(self) -> bool:
        return True

    @property
    def mentions(self) -> discord.AllowedMentions:
        # The asker reads their own command's response: it needs to ping no one.
        return discord.AllowedMentions.none()

    async def defer(self) -> None:
        """Acknowledge the command at once ("Parley is thinking…", to the asker alone if ephemeral): Discord wants an
        answer within 3 seconds, and the answer may wait for its channel's turn and the model."""
        await self.interaction.response.defer(ephemeral=self.ephemeral, thinking=True)

    @contextlib.asynccontextmanager
    async def waiting(self) -> AsyncIterator[None]:
        # The deferred response already shows "Parley is thinking…" until the first post fills it.
        yield

    async def send(
        self,
        content: str,
        *,
        first: bool,
        view: discord.ui.View | None = None,
        files: Sequence[discord.File] = (),
    ) -> discord.Message:
        # The command was deferred first (`defer`, answering/asked.py): the first post fills its response.
        # discord.py's `followup.send` takes no `view=None`: a view is passed only if there is one.
        options: dict[str, Any] = {"ephemeral": self.ephemeral, "allowed_mentions": self.mentions}
        if view is not None:
            options["view"] = view
        # Files only when there are some: an empty list would be sent as "no attachments".
        attached: dict[str, Any] = {"attachments": list(files)} if files else {}
        post: discord.Message
        if self.sent:
            if files:
                options["files"] = list(files)
            post = await self.interaction.followup.send(content, wait=True, **options)
        else:
            post = await self.interaction.edit_original_response(
                content=content, allowed_mentions=self.mentions, view=view, **attached
            )
        # Set once Discord took it: a first post tried again still fills the response.
        self.sent = True
        return post

    async def tell(self, line: str) -> None:
        """One line for the asker alone (a refusal), in place of the answer: a public "thinking…" response gives way
        to it, since a response cannot turn ephemeral."""
        if not self.interaction.response.is_done():
            await self.interaction.response.send_message(line, ephemeral=True)
        elif self.sent:
            await self.interaction.followup.send(line, ephemeral=True)
        elif self.ephemeral:
            self.sent = True
            await self.interaction.edit_original_response(content=line)
        else:
            self.sent = True
            await self.interaction.delete_original_response()
            await self.interaction.followup.send(line, ephemeral=True)
