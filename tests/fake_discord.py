"""A local fake of Discord's REST API and gateway that the real discord.py client can log in to.

Point discord.py at it by setting two class attributes before starting the client:

    discord.http.Route.BASE = fake.api_base_url
    discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(fake.gateway_url)
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import itertools
import json
import logging
import re
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import discord
from aiohttp import BodyPartReader, WSCloseCode, WSMsgType, web

_log = logging.getLogger(__name__)

API_PREFIX = "/api/v10"
DEFAULT_TOKEN = "fake-token"

# https://discord.com/developers/docs/reference#snowflakes
DISCORD_EPOCH_MS = 1420070400000


def snowflake_at(when: datetime, increment: int = 0) -> int:
    """A snowflake whose timestamp bits encode `when` (worker and process ids zero)."""
    ms = int(when.timestamp() * 1000) - DISCORD_EPOCH_MS
    return (ms << 22) | (increment & 0xFFF)


def snowflake_time(snowflake: int) -> datetime:
    return datetime.fromtimestamp(((snowflake >> 22) + DISCORD_EPOCH_MS) / 1000, tz=UTC)


def iso_timestamp(snowflake: int) -> str:
    return snowflake_time(snowflake).isoformat(timespec="microseconds")


# Fixed ids keep assertions and logs readable across runs; all date from when the fake world was "created".
_WORLD_CREATED = datetime(2021, 1, 1, tzinfo=UTC)
BOT_ID = snowflake_at(_WORLD_CREATED, 1)
APPLICATION_ID = BOT_ID  # Applications created since 2020 share their id with their bot user.
GUILD_ID = snowflake_at(_WORLD_CREATED, 2)
CHANNEL_ID = snowflake_at(_WORLD_CREATED, 3)
OTHER_CHANNEL_ID = snowflake_at(_WORLD_CREATED, 4)
ALICE_ID = snowflake_at(_WORLD_CREATED, 5)
BOB_ID = snowflake_at(_WORLD_CREATED, 6)
CAROL_ID = snowflake_at(_WORLD_CREATED, 7)
OTHER_BOT_ID = snowflake_at(_WORLD_CREATED, 8)
BOT_ROLE_ID = snowflake_at(_WORLD_CREATED, 9)
# The other bot's integration role: a role mention that is not of Parley's.
OTHER_BOT_ROLE_ID = snowflake_at(_WORLD_CREATED, 20)

EVERYONE_PERMISSIONS = discord.Permissions(
    view_channel=True,
    send_messages=True,
    read_message_history=True,
    add_reactions=True,
    embed_links=True,
    attach_files=True,
    use_external_emojis=True,
    use_application_commands=True,
)
BOT_PERMISSIONS = discord.Permissions(
    send_messages_in_threads=True,
    create_public_threads=True,
    manage_messages=True,
    mention_everyone=True,
)

# Gateway opcodes: https://discord.com/developers/docs/topics/opcodes-and-status-codes#gateway-gateway-opcodes
OP_DISPATCH = 0
OP_HEARTBEAT = 1
OP_IDENTIFY = 2
OP_RESUME = 6
OP_RECONNECT = 7
OP_REQUEST_GUILD_MEMBERS = 8
OP_INVALID_SESSION = 9
OP_HELLO = 10
OP_HEARTBEAT_ACK = 11

HEARTBEAT_INTERVAL_MS = 41250
DIRECT_MESSAGES_INTENT = 1 << 12  # https://discord.com/developers/docs/events/gateway#gateway-intents
MAX_CONTENT_LENGTH = 2000  # https://discord.com/developers/docs/resources/message#create-message-jsonform-params
MESSAGE_TYPE_DEFAULT = 0
MESSAGE_TYPE_REPLY = 19
MESSAGE_TYPE_CHAT_INPUT_COMMAND = 20
CALLBACK_TYPES_WITH_MESSAGE = {4, 7}  # CHANNEL_MESSAGE_WITH_SOURCE, UPDATE_MESSAGE
CALLBACK_DEFERRED_CHANNEL_MESSAGE = 5
EPHEMERAL_FLAG = 1 << 6

_USER_MENTION = re.compile(r"<@!?(\d+)>")
_ROLE_MENTION = re.compile(r"<@&(\d+)>")


_Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(frozen=True)
class FakeUser:
    id: int
    username: str
    bot: bool = False
    role_ids: tuple[int, ...] = ()
    nick: str | None = None  # the server nickname, which any member can set to anything, "Parley" included

    def payload(self) -> dict[str, Any]:
        return {
            "id": str(self.id),
            "username": self.username,
            "discriminator": "0",
            "global_name": None if self.bot else self.username.title(),
            "avatar": None,
            "bot": self.bot,
            "public_flags": 0,
        }

    def member_payload(self) -> dict[str, Any]:
        """A guild member object without its `user`, the form messages and mentions carry."""
        return {
            "roles": [str(role_id) for role_id in self.role_ids],
            "joined_at": iso_timestamp(GUILD_ID),
            "premium_since": None,
            "nick": self.nick,
            "pending": False,
            "deaf": False,
            "mute": False,
            "flags": 0,
            "communication_disabled_until": None,
        }


@dataclass
class FakeChannel:
    id: int
    name: str
    position: int
    messages: list[dict[str, Any]] = field(default_factory=list)  # sorted by id, oldest first
    parent_id: int | None = None  # set for a thread: the text channel it lives in
    # A thread's kind and state, and its members (a private thread's are all who may see it).
    private: bool = False
    archived: bool = False
    locked: bool = False
    member_ids: set[int] = field(default_factory=set)
    owner_id: int = ALICE_ID
    # A text channel's permission overwrites, as Discord sends them.
    overwrites: list[dict[str, Any]] = field(default_factory=list)
    recipient_id: int | None = None  # set for a direct message channel: the person on the other side
    guild_id: int = GUILD_ID  # the server of a text channel or thread (a direct message channel has none)

    def payload(self) -> dict[str, Any]:
        if self.parent_id is not None:
            return self._thread_payload(self.parent_id)
        if self.recipient_id is not None:
            return self._dm_payload(self.recipient_id)
        return {
            "id": str(self.id),
            "type": discord.ChannelType.text.value,
            "guild_id": str(self.guild_id),
            "name": self.name,
            "position": self.position,
            "parent_id": None,
            "topic": None,
            "nsfw": False,
            "rate_limit_per_user": 0,
            "permission_overwrites": self.overwrites,
            "last_message_id": self.messages[-1]["id"] if self.messages else None,
        }

    def _dm_payload(self, recipient_id: int) -> dict[str, Any]:
        """A direct message channel. https://discord.com/developers/docs/resources/channel#channel-object"""
        return {
            "id": str(self.id),
            "type": discord.ChannelType.private.value,
            "last_message_id": self.messages[-1]["id"] if self.messages else None,
            "recipients": [{"id": str(recipient_id), "username": "", "discriminator": "0", "avatar": None}],
        }

    def _thread_payload(self, parent_id: int) -> dict[str, Any]:
        """A public or private thread, as THREAD_CREATE, THREAD_UPDATE and GET /channels/{id} give it.

        https://discord.com/developers/docs/resources/channel#thread-metadata-object
        """
        kind = discord.ChannelType.private_thread if self.private else discord.ChannelType.public_thread
        return {
            "id": str(self.id),
            "type": kind.value,
            "guild_id": str(self.guild_id),
            "parent_id": str(parent_id),
            "owner_id": str(self.owner_id),
            "name": self.name,
            "last_message_id": self.messages[-1]["id"] if self.messages else None,
            "rate_limit_per_user": 0,
            "message_count": len(self.messages),
            "member_count": max(1, len(self.member_ids)),
            "total_message_sent": len(self.messages),
            "flags": 0,
            "thread_metadata": {
                "archived": self.archived,
                "auto_archive_duration": 1440,
                "archive_timestamp": iso_timestamp(self.id),
                "locked": self.locked,
                "create_timestamp": iso_timestamp(self.id),
            },
        }

    def store(self, message: dict[str, Any]) -> None:
        message_id = int(message["id"])
        if not self.messages or int(self.messages[-1]["id"]) < message_id:
            self.messages.append(message)  # the usual case, kept cheap for streams of thousands
            return
        ids = [int(m["id"]) for m in self.messages]
        self.messages.insert(bisect.bisect(ids, message_id), message)

    def find(self, message_id: int) -> dict[str, Any] | None:
        return next((m for m in self.messages if int(m["id"]) == message_id), None)


@dataclass
class Post:
    """A message the bot created through `POST /channels/{id}/messages`."""

    channel_id: int
    body: dict[str, Any]  # the JSON body, or the multipart `payload_json`
    message: dict[str, Any]  # the message object the fake answered with
    files: list[tuple[str, bytes]]
    at: float  # event-loop time, comparable with TypingEvent.at

    @property
    def content(self) -> str:
        """The post's text as it stands now, after any edits (the body keeps what was first sent)."""
        return self.message.get("content") or ""

    @property
    def reply_to(self) -> int | None:
        reference = self.body.get("message_reference")
        return int(reference["message_id"]) if reference else None


@dataclass(frozen=True)
class Edit:
    """An edit the bot made through `PATCH /channels/{id}/messages/{id}`."""

    channel_id: int
    message_id: int
    body: dict[str, Any]
    at: float  # event-loop time, comparable with Post.at


@dataclass(frozen=True)
class TypingEvent:
    channel_id: int
    at: float


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str  # including the query string
    status: int


@dataclass(frozen=True)
class InteractionCall:
    """A request the bot made to an interaction callback or webhook route."""

    method: str
    path: str
    body: dict[str, Any] | None


@dataclass(frozen=True)
class _Failure:
    status: int
    channel_id: int | None
    retry_after: float


@dataclass
class _Session:
    id: str
    ws: web.WebSocketResponse
    shard: list[int] | None
    seq: int = 0
    log: list[dict[str, Any]] = field(default_factory=list)  # every dispatch, replayed on RESUME
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    ready: bool = False  # READY and its servers' GUILD_CREATEs sent

    @property
    def shard_id(self) -> int:
        return self.shard[0] if self.shard else 0

    @property
    def shard_count(self) -> int:
        return self.shard[1] if self.shard else 1


def _json_response(data: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> web.Response:
    # discord.py parses a body only if Content-Type is exactly 'application/json' (http.json_or_text);
    # aiohttp's json_response and text= bodies would append '; charset=utf-8'.
    return web.Response(
        body=json.dumps(data).encode(),
        status=status,
        headers={"Content-Type": "application/json", **(headers or {})},
    )


def _error(status: int, message: str, code: int = 0) -> web.Response:
    # https://discord.com/developers/docs/topics/opcodes-and-status-codes#json
    return _json_response({"message": message, "code": code}, status=status)


def _invalid_form_body(field_name: str, problem: str) -> web.Response:
    errors = {field_name: {"_errors": [{"code": "BASE_TYPE_MAX_LENGTH", "message": problem}]}}
    return _json_response({"message": "Invalid Form Body", "code": 50035, "errors": errors}, status=400)


def _snowflakes(values: Iterable[Any]) -> set[int]:
    return {int(v) for v in values}


class FakeDiscord:
    """A fake Discord: one guild, two text channels and any threads a test opens, the bot, three humans, another bot.

    Tests may add servers (`add_guild`). Each IDENTIFY's `shard: [id, count]` opens a session for that shard; a
    server's events go only to the session of its shard, `(guild_id >> 22) % count`, and direct messages to shard 0's,
    as on Discord: https://discord.com/developers/docs/events/gateway#sharding. `shard_count` is what
    GET /gateway/bot recommends.
    """

    bot_id = BOT_ID
    application_id = APPLICATION_ID
    guild_id = GUILD_ID
    channel_id = CHANNEL_ID
    other_channel_id = OTHER_CHANNEL_ID
    alice_id = ALICE_ID
    bob_id = BOB_ID
    carol_id = CAROL_ID
    other_bot_id = OTHER_BOT_ID
    bot_role_id = BOT_ROLE_ID

    def __init__(self, token: str = DEFAULT_TOKEN, *, shard_count: int = 1) -> None:
        self.token = token
        self.shard_count = shard_count
        self.guilds: dict[int, str] = {GUILD_ID: "Fake Guild"}  # id -> name
        # Servers handed to another shard than their id gives (`hand_over`), as after a reshard.
        self._handed_over: dict[int, int] = {}
        self.users: dict[int, FakeUser] = {
            user.id: user
            for user in (
                FakeUser(BOT_ID, "Parley", bot=True, role_ids=(BOT_ROLE_ID,)),
                FakeUser(ALICE_ID, "alice"),
                FakeUser(BOB_ID, "bob"),
                FakeUser(CAROL_ID, "carol"),
                FakeUser(OTHER_BOT_ID, "helperbot", bot=True),
            )
        }
        self.channels: dict[int, FakeChannel] = {
            channel.id: channel
            for channel in (FakeChannel(CHANNEL_ID, "general", 0), FakeChannel(OTHER_CHANNEL_ID, "random", 1))
        }
        self.bot_posts: list[Post] = []
        self.edits: list[Edit] = []
        self.deleted_ids: list[int] = []  # messages the bot deleted, in order
        self.typing_events: list[TypingEvent] = []
        self.requests: list[RecordedRequest] = []
        self.unknown_routes: list[str] = []
        self.handler_errors: list[Exception] = []  # exceptions inside the fake, answered with 400
        self.interaction_calls: list[InteractionCall] = []
        # (channel id, message id, JSON body) of each "start thread from message" request the bot made.
        self.threads_started: list[tuple[int, int, dict[str, Any]]] = []
        self.identifies: list[dict[str, Any]] = []
        self.resumes: list[dict[str, Any]] = []
        self.commands: dict[int | None, list[dict[str, Any]]] = {}  # guild id (None: global) -> commands
        self._interactions: dict[str, dict[str, Any]] = {}  # token -> INTERACTION_CREATE data
        self._original_responses: dict[str, dict[str, Any]] = {}  # token -> message
        self._failures: list[_Failure] = []
        # Attachment bytes the fake CDN serves, by attachment id; ids in `cdn_failures` answer 500 instead.
        self.cdn: dict[int, bytes] = {}
        self.cdn_failures: set[int] = set()
        self.cdn_requests: list[int] = []
        self._edit_failures: list[_Failure] = []
        # The session of each shard, and the one that identified last (the only one, for a single client).
        self._sessions: dict[int, _Session] = {}
        self._session: _Session | None = None
        self._sockets: set[web.WebSocketResponse] = set()
        self._increment = itertools.count()
        self._issued: set[int] = set()
        self._latest_id = 0
        self._change = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self._port: int | None = None

    # Lifecycle

    async def start(self) -> None:
        app = web.Application(middlewares=[self._record, self._authorize])
        self._add_routes(app.router)
        # A short shutdown timeout: the gateway handler is long-lived and close() ends it explicitly anyway.
        self._runner = web.AppRunner(app, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self._port = self._runner.addresses[0][1]

    async def close(self) -> None:
        for ws in list(self._sockets):
            await ws.close(code=WSCloseCode.GOING_AWAY)
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeDiscord:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    @property
    def api_base_url(self) -> str:
        return f"http://127.0.0.1:{self._require_port()}{API_PREFIX}"

    @property
    def gateway_url(self) -> str:
        return f"ws://127.0.0.1:{self._require_port()}/gateway"

    def _require_port(self) -> int:
        if self._port is None:
            raise RuntimeError("FakeDiscord is not started")
        return self._port

    # Test API: driving the world

    async def send_user_message(
        self,
        channel_id: int,
        author_id: int,
        content: str,
        *,
        mentions: Iterable[int] = (),
        reply_to: int | None = None,
        ping_reply: bool = True,
        message_id: int | None = None,
        attachments: Iterable[dict[str, Any]] = (),
    ) -> dict[str, Any]:
        """Store a message from `author_id` in the channel and dispatch its MESSAGE_CREATE.

        `mentions` adds user ids to those written as `<@id>` in `content`. A reply pings the replied-to author
        unless `ping_reply` is False, as in the Discord client. `attachments` are `served_attachment`s.
        """
        if message_id is None:
            message_id = self._next_id()
        self._issued.add(message_id)
        message = self._create_message(
            channel_id,
            author_id,
            content,
            message_id=message_id,
            extra_mentions=mentions,
            reply_to=reply_to,
            # What the Discord client sends; its reply toggle sets replied_user.
            allowed_mentions={"parse": ["users", "roles", "everyone"], "replied_user": ping_reply},
            attachments=list(attachments),
        )
        await self.dispatch("MESSAGE_CREATE", self._gateway_message(message))
        return message

    def served_attachment(
        self, filename: str, data: bytes, content_type: str | None = None, *, fail: bool = False
    ) -> dict[str, Any]:
        """An attachment object whose bytes this fake's CDN serves on loopback (or, with `fail`, answers 500 for)."""
        attachment_id = self._next_id()
        self.cdn[attachment_id] = data
        if fail:
            self.cdn_failures.add(attachment_id)
        url = f"http://127.0.0.1:{self._require_port()}/cdn/attachments/{attachment_id}/{filename}"
        attachment = {"id": str(attachment_id), "filename": filename, "size": len(data), "url": url, "proxy_url": url}
        if content_type is not None:
            attachment["content_type"] = content_type
        return attachment

    def add_history(
        self,
        channel_id: int,
        author_id: int,
        content: str,
        timestamp: datetime | None = None,
        *,
        reply_to: int | None = None,
    ) -> dict[str, Any]:
        """Store a message (dated `timestamp`, default now) that GET messages returns; nothing is dispatched."""
        return self._create_message(
            channel_id, author_id, content, message_id=self._next_id(timestamp), reply_to=reply_to
        )

    async def create_thread(
        self, parent_id: int, name: str, *, private: bool = False, members: Iterable[int] = ()
    ) -> int:
        """Open a thread named `name` in the text channel `parent_id` and dispatch THREAD_CREATE; its id.

        A private thread is visible to its `members` (and moderators) only.
        """
        parent = self._channel(parent_id)
        thread = FakeChannel(
            self._next_id(),
            name,
            0,
            parent_id=parent_id,
            private=private,
            member_ids=set(members),
            guild_id=parent.guild_id,
        )
        self.channels[thread.id] = thread
        await self.dispatch("THREAD_CREATE", {**thread.payload(), "newly_created": True})
        return thread.id

    async def update_thread(self, thread_id: int, *, archived: bool | None = None, locked: bool | None = None) -> None:
        """Archive or lock a thread (or undo it) and dispatch THREAD_UPDATE, as when a member or moderator does."""
        thread = self._channel(thread_id)
        if archived is not None:
            thread.archived = archived
        if locked is not None:
            thread.locked = locked
        await self.dispatch("THREAD_UPDATE", thread.payload())

    def deny(self, channel_id: int, user_id: int, permissions: discord.Permissions) -> None:
        """Deny a member `permissions` in a text channel (a member overwrite); the next GUILD_CREATE carries it."""
        # https://discord.com/developers/docs/resources/channel#overwrite-object
        overwrite = {"id": str(user_id), "type": 1, "allow": "0", "deny": str(permissions.value)}
        self._channel(channel_id).overwrites.append(overwrite)

    def permissions_in(self, channel_id: int, user_id: int, granted: discord.Permissions) -> discord.Permissions:
        """`granted` as Discord resolves it for `user_id` in a channel (a thread: its parent): with what the member's
        overwrites there deny taken off and what they allow added, as an interaction's member permissions carry."""
        # https://discord.com/developers/docs/topics/permissions#permission-overwrites
        channel = self._channel(channel_id)
        if channel.parent_id is not None:
            channel = self._channel(channel.parent_id)
        value = granted.value
        for overwrite in channel.overwrites:
            if overwrite["type"] == 1 and int(overwrite["id"]) == user_id:
                value = (value & ~int(overwrite["deny"])) | int(overwrite["allow"])
        return discord.Permissions(value)

    def dm_channel(self, user_id: int) -> int:
        """The id of the direct message channel between the bot and `user_id`, opened on first use."""
        for channel in self.channels.values():
            if channel.recipient_id == user_id:
                return channel.id
        channel = FakeChannel(self._next_id(), "", 0, recipient_id=user_id)
        self.channels[channel.id] = channel
        return channel.id

    async def send_dm(self, author_id: int, content: str) -> dict[str, Any]:
        """A direct message from `author_id` to the bot, stored in their DM channel.

        Its MESSAGE_CREATE reaches the client only if it identified with the DIRECT_MESSAGES intent, as on Discord.
        """
        message = self._create_message(self.dm_channel(author_id), author_id, content, message_id=self._next_id())
        if self.identifies and self.identifies[-1].get("intents", 0) & DIRECT_MESSAGES_INTENT:
            await self.dispatch("MESSAGE_CREATE", self._gateway_message(message))
        return message

    async def add_guild(self, name: str, *, shard: tuple[int, int] | None = None) -> tuple[int, int]:
        """Add a server with one text channel, #general; its id and the channel's.

        With `shard` (id, count), the server's id puts it on that shard. A session already serving that shard
        gets its GUILD_CREATE, as when the bot is added to a server.
        """
        when = _WORLD_CREATED + timedelta(seconds=len(self.guilds))
        guild_id = self._next_id(when)
        while shard is not None and (guild_id >> 22) % shard[1] != shard[0]:
            when += timedelta(milliseconds=1)
            guild_id = self._next_id(when)
        self.guilds[guild_id] = name
        channel = FakeChannel(self._next_id(when), "general", 0, guild_id=guild_id)
        self.channels[channel.id] = channel
        session = self._session_for(guild_id)
        if session is not None and session.ready:
            await self._dispatch(session, "GUILD_CREATE", self._guild_create(guild_id))
        return guild_id, channel.id

    def shard_of(self, guild_id: int, shard_count: int) -> int:
        """The shard whose session gets the server's events: `(guild_id >> 22) % shard_count`, unless handed over."""
        return self._handed_over.get(guild_id, (guild_id >> 22) % shard_count)

    async def hand_over(self, guild_id: int, shard_id: int) -> None:
        """Send the server's events to shard `shard_id`'s session from now on, starting with its GUILD_CREATE.

        Discord serves a server on shard `(guild_id >> 22) % shard_count`, which changes only when the deployment
        reshards: every session identifies again with the new count, and the server may then be another process's.
        This hands it over between live sessions instead, so a test can watch the process that takes it over
        without restarting either: the old session hears nothing more from the server, as a process whose shard
        range no longer holds it; the new one gets GUILD_CREATE as after its READY.
        """
        session = self._sessions.get(shard_id)
        if session is None:
            raise RuntimeError(f"no client has identified for shard {shard_id}")
        self._handed_over[guild_id] = shard_id
        await self._dispatch(session, "GUILD_CREATE", self._guild_create(guild_id))

    def events_of(self, shard_id: int) -> list[tuple[str, dict[str, Any]]]:
        """Every dispatch (event name, data) that shard `shard_id`'s current session was sent, in order."""
        session = self._sessions.get(shard_id)
        return [] if session is None else [(payload["t"], payload["d"]) for payload in session.log]

    async def dispatch(self, event: str, data: dict[str, Any]) -> None:
        """Send a gateway DISPATCH (op 0), e.g. MESSAGE_DELETE or INTERACTION_CREATE, to the session of the
        shard its server is on (direct messages: shard 0); with no session for that shard, nobody gets it."""
        if not self._sessions:
            raise RuntimeError(f"cannot dispatch {event}: no client has identified")
        if event == "INTERACTION_CREATE":
            self._interactions[data["token"]] = data
        await self._route(event, data)

    async def edit_user_message(
        self, channel_id: int, message_id: int, content: str, *, attachments: list[dict[str, Any]] | None = None
    ) -> dict[str, Any]:
        """Change a stored message's text (and, given `attachments`, the files it keeps) and dispatch MESSAGE_UPDATE
        with the whole message, as Discord does."""
        message = self._stored(channel_id, message_id)
        message["content"] = content
        if attachments is not None:
            message["attachments"] = attachments
        message["edited_timestamp"] = datetime.now(UTC).isoformat()
        await self.dispatch("MESSAGE_UPDATE", self._gateway_message(message))
        return message

    async def delete_messages(self, channel_id: int, *message_ids: int) -> None:
        """Remove stored messages and dispatch MESSAGE_DELETE (one id) or MESSAGE_DELETE_BULK (several)."""
        channel = self.channels[channel_id]
        channel.messages = [m for m in channel.messages if int(m["id"]) not in message_ids]
        ids = [str(message_id) for message_id in message_ids]
        where = {"channel_id": str(channel_id), "guild_id": str(channel.guild_id)}
        if len(ids) == 1:
            await self.dispatch("MESSAGE_DELETE", {"id": ids[0], **where})
        else:
            await self.dispatch("MESSAGE_DELETE_BULK", {"ids": ids, **where})

    def _stored(self, channel_id: int, message_id: int) -> dict[str, Any]:
        return next(m for m in self.channels[channel_id].messages if int(m["id"]) == message_id)

    async def force_reconnect(self) -> None:
        """Ask the client to reconnect (op 7), as Discord does before moving a session; it then RESUMEs."""
        if self._session is None:
            raise RuntimeError("no client has identified")
        await self._session.ws.send_str(json.dumps({"op": OP_RECONNECT, "d": None}))

    def forget_messages(self, channel_id: int, *message_ids: int) -> None:
        """Remove stored messages without any event, as Discord does for a bot that is not connected."""
        channel = self.channels[channel_id]
        channel.messages = [m for m in channel.messages if int(m["id"]) not in message_ids]

    async def drop_gateway(self, code: int = 1006) -> None:
        """End the client's gateway connection: 1006 cuts it without a close frame (a network drop),
        any other code closes it with that code (4000: Discord's "unknown error, reconnect")."""
        if self._session is None:
            raise RuntimeError("no client has identified")
        ws = self._session.ws
        if code != 1006:
            await ws.close(code=code)
            return
        transport = ws._req.transport if ws._req is not None else None
        if transport is None:
            raise RuntimeError("the gateway connection is already gone")
        transport.abort()

    def fail_next_posts(
        self, count: int, *, status: int = 500, channel_id: int | None = None, retry_after: float = 0.05
    ) -> None:
        """Answer the next `count` message POSTs (to `channel_id`, or any channel) with `status` (500 or 429).

        discord.py retries both: a 429 after `retry_after` seconds, a 5xx after 1 + 2 * attempt seconds,
        five attempts in all (http.HTTPClient.request).
        """
        self._failures.extend(_Failure(status, channel_id, retry_after) for _ in range(count))

    def fail_next_edits(
        self, count: int, *, status: int = 429, channel_id: int | None = None, retry_after: float = 0.05
    ) -> None:
        """Answer the next `count` message PATCHes (to `channel_id`, or any) with `status`, as `fail_next_posts`."""
        self._edit_failures.extend(_Failure(status, channel_id, retry_after) for _ in range(count))

    # Test API: observing the bot

    def posts_in(self, channel_id: int) -> list[Post]:
        return [post for post in self.bot_posts if post.channel_id == channel_id]

    def edits_in(self, channel_id: int) -> list[Edit]:
        return [edit for edit in self.edits if edit.channel_id == channel_id]

    def bot_messages(self, channel_id: int) -> list[dict[str, Any]]:
        """The bot's messages in the channel as they stand now (edited, deleted ones gone), oldest first."""
        return [m for m in self.channels[channel_id].messages if int(m["author"]["id"]) == BOT_ID]

    def messages(self, channel_id: int) -> list[dict[str, Any]]:
        """Every message stored in the channel, oldest first."""
        return list(self.channels[channel_id].messages)

    async def wait_for(self, predicate: Callable[[], bool], timeout: float = 5.0, what: str = "condition") -> None:
        """Wait until `predicate()` holds; it is re-checked whenever the fake records something."""
        try:
            async with asyncio.timeout(timeout):
                while True:
                    change = self._change
                    if predicate():
                        return
                    await change.wait()
        except TimeoutError:
            raise TimeoutError(f"FakeDiscord: timed out after {timeout}s waiting for {what}") from None

    async def wait_for_posts(self, n: int, channel_id: int | None = None, timeout: float = 5.0) -> list[Post]:
        """Wait until the bot has made at least `n` posts (in `channel_id` if given); return all of them."""

        def matching() -> list[Post]:
            return self.bot_posts if channel_id is None else self.posts_in(channel_id)

        await self.wait_for(lambda: len(matching()) >= n, timeout, f"{n} bot post(s)")
        return list(matching())

    async def wait_until_identified(self, timeout: float = 5.0) -> dict[str, Any]:
        """Wait for the client's first IDENTIFY and return its payload (token, intents, ...)."""
        await self.wait_for(lambda: bool(self.identifies), timeout, "IDENTIFY")
        return self.identifies[0]

    async def wait_for_ready(self, timeout: float = 5.0, *, sessions: int = 1) -> None:
        """Wait until the fake has sent READY and its servers' GUILD_CREATEs (in the `sessions`-th session a
        client identified for), so dispatched events reach a populated cache."""

        def ready() -> bool:
            return len(self.identifies) >= sessions and self._session is not None and self._session.ready

        await self.wait_for(ready, timeout, "READY")

    async def wait_for_shard(self, shard_id: int, timeout: float = 5.0) -> None:
        """Wait until a session of shard `shard_id` has had READY and its servers' GUILD_CREATEs."""

        def ready() -> bool:
            session = self._sessions.get(shard_id)
            return session is not None and session.ready

        await self.wait_for(ready, timeout, f"READY of shard {shard_id}")

    def _changed(self) -> None:
        self._change.set()
        self._change = asyncio.Event()

    # World payloads

    def _next_id(self, when: datetime | None = None) -> int:
        """A unique snowflake dated `when`; ids issued for "now" also strictly increase."""
        snowflake = snowflake_at(when or datetime.now(UTC), next(self._increment))
        if when is None:
            snowflake = max(snowflake, self._latest_id + 1)
        while snowflake in self._issued:
            snowflake += 1
        self._issued.add(snowflake)
        self._latest_id = max(self._latest_id, snowflake)
        return snowflake

    def _roles(self, guild_id: int = GUILD_ID) -> list[dict[str, Any]]:
        # The @everyone role's id is the guild's: https://discord.com/developers/docs/topics/permissions#role-object
        base = {"colors": {"primary_color": 0}, "hoist": False, "mentionable": False, "flags": 0}
        everyone = {
            **base,
            "id": str(guild_id),
            "name": "@everyone",
            "position": 0,
            "managed": False,
            "permissions": str(EVERYONE_PERMISSIONS.value),
        }
        bot_role = {
            **base,
            "id": str(BOT_ROLE_ID),
            "name": "Parley",
            "position": 1,
            "managed": True,
            "permissions": str(BOT_PERMISSIONS.value),
            "tags": {"bot_id": str(BOT_ID)},
        }
        other_bot_role = {
            **bot_role,
            "id": str(OTHER_BOT_ROLE_ID),
            "name": "Other Bot",
            "position": 2,
            "tags": {"bot_id": str(OTHER_BOT_ID)},
        }
        return [everyone, bot_role, other_bot_role]

    def _guild(self, guild_id: int = GUILD_ID) -> dict[str, Any]:
        """The guild object as GET /guilds/{id} returns it (no channels or members)."""
        first_channel = next(
            channel.id
            for channel in self.channels.values()
            if channel.guild_id == guild_id and channel.recipient_id is None
        )
        return {
            "id": str(guild_id),
            "name": self.guilds[guild_id],
            "icon": None,
            "owner_id": str(ALICE_ID),
            "roles": self._roles(guild_id),
            "emojis": [],
            "stickers": [],
            "features": [],
            "verification_level": 0,
            "default_message_notifications": 1,
            "explicit_content_filter": 0,
            "mfa_level": 0,
            "nsfw_level": 0,
            "premium_tier": 0,
            "preferred_locale": "en-US",
            "system_channel_id": str(first_channel),
            "system_channel_flags": 0,
        }

    def _guild_create(self, guild_id: int = GUILD_ID) -> dict[str, Any]:
        members = [{"user": user.payload(), **user.member_payload()} for user in self.users.values()]
        return {
            **self._guild(guild_id),
            "unavailable": False,
            "joined_at": iso_timestamp(GUILD_ID),
            "large": False,
            # member_count equal to the members sent marks the guild as chunked, so the client requests no chunks.
            "member_count": len(members),
            "members": members,
            "channels": [
                channel.payload()
                for channel in self.channels.values()
                if channel.parent_id is None and channel.recipient_id is None and channel.guild_id == guild_id
            ],
            # Discord sends a server's active threads only.
            "threads": [
                channel.payload()
                for channel in self.channels.values()
                if channel.parent_id is not None and not channel.archived and channel.guild_id == guild_id
            ],
            "presences": [],
            "voice_states": [],
            "stage_instances": [],
            "guild_scheduled_events": [],
            "soundboard_sounds": [],
        }

    def _ready(self, session: _Session) -> dict[str, Any]:
        # https://discord.com/developers/docs/events/gateway-events#ready
        ready: dict[str, Any] = {
            "v": 10,
            "user": self._bot_user(),
            "guilds": [{"id": str(guild_id), "unavailable": True} for guild_id in self._guilds_of(session)],
            "session_id": session.id,
            "resume_gateway_url": self.gateway_url,
            "application": {"id": str(APPLICATION_ID), "flags": 0},
        }
        if session.shard is not None:
            ready["shard"] = session.shard
        return ready

    def _bot_user(self) -> dict[str, Any]:
        return {**self.users[BOT_ID].payload(), "verified": True, "mfa_enabled": False, "flags": 0}

    def _application(self) -> dict[str, Any]:
        return {
            "id": str(APPLICATION_ID),
            "name": "Parley",
            "description": "",
            "icon": None,
            "bot_public": False,
            "bot_require_code_grant": False,
            "owner": self.users[ALICE_ID].payload(),
            "verify_key": "0" * 64,
            "flags": 0,
        }

    # Messages

    def _channel(self, channel_id: int) -> FakeChannel:
        try:
            return self.channels[channel_id]
        except KeyError:
            raise KeyError(f"FakeDiscord has no channel {channel_id}") from None

    def _create_message(
        self,
        channel_id: int,
        author_id: int,
        content: str,
        *,
        message_id: int,
        extra_mentions: Iterable[int] = (),
        reply_to: int | None = None,
        allowed_mentions: dict[str, Any] | None = None,
        attachments: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """Build a message object as REST returns it and store it in the channel."""
        channel = self._channel(channel_id)
        referenced = None
        if reply_to is not None:
            referenced = channel.find(reply_to)
            if referenced is None:
                raise KeyError(f"no message {reply_to} in channel {channel_id} to reply to")
        mentioned = self._pinged_users(content, extra_mentions, allowed_mentions, referenced)
        message: dict[str, Any] = {
            "id": str(message_id),
            "channel_id": str(channel_id),
            "author": self.users[author_id].payload(),
            "content": content,
            "timestamp": iso_timestamp(message_id),
            "edited_timestamp": None,
            "tts": False,
            "mention_everyone": False,
            "mentions": [self.users[user_id].payload() for user_id in mentioned],
            "mention_roles": _ROLE_MENTION.findall(content),
            "attachments": attachments or [],
            "embeds": [],
            "reactions": [],
            "pinned": False,
            "type": MESSAGE_TYPE_DEFAULT,
            "flags": 0,
            "components": [],
        }
        if referenced is not None:
            message["type"] = MESSAGE_TYPE_REPLY
            message["message_reference"] = {
                "type": 0,
                "message_id": referenced["id"],
                "channel_id": str(channel_id),
                "guild_id": str(channel.guild_id),
            }
            message["referenced_message"] = {k: v for k, v in referenced.items() if k != "referenced_message"}
        channel.store(message)
        self._changed()
        return message

    def _pinged_users(
        self,
        content: str,
        extra: Iterable[int],
        allowed_mentions: dict[str, Any] | None,
        referenced: dict[str, Any] | None,
    ) -> list[int]:
        """Users listed in `mentions`: Discord lists only those actually pinged, which allowed_mentions limits.

        https://discord.com/developers/docs/resources/message#allowed-mentions-object
        """
        written = list(dict.fromkeys([*map(int, _USER_MENTION.findall(content)), *extra]))
        written = [user_id for user_id in written if user_id in self.users]
        if allowed_mentions is None:
            pinged, ping_reply = written, True
        else:
            allowed_users = _snowflakes(allowed_mentions.get("users", []))
            parse_all = "users" in allowed_mentions.get("parse", [])
            pinged = [user_id for user_id in written if parse_all or user_id in allowed_users]
            ping_reply = allowed_mentions.get("replied_user", False)
        if referenced is not None and ping_reply:
            replied_author = int(referenced["author"]["id"])
            if replied_author not in pinged:
                pinged.append(replied_author)
        return pinged

    def _gateway_message(self, message: dict[str, Any]) -> dict[str, Any]:
        """The MESSAGE_CREATE form: REST's message plus guild_id, the author's member and mentioned members
        (a direct message has none of these)."""
        channel = self.channels[int(message["channel_id"])]
        if channel.recipient_id is not None:
            return message
        author = self.users[int(message["author"]["id"])]
        mentions = [
            {**mention, "member": self.users[int(mention["id"])].member_payload()} for mention in message["mentions"]
        ]
        return {**message, "guild_id": str(channel.guild_id), "member": author.member_payload(), "mentions": mentions}

    def _history_page(self, channel: FakeChannel, query: Mapping[str, str]) -> list[dict[str, Any]]:
        """A page of GET /channels/{id}/messages: always newest first, like Discord.

        `after` pages start right after the given id; `before` (and no cursor) pages end right before it.
        https://discord.com/developers/docs/resources/message#get-channel-messages
        """
        limit = max(1, min(int(query.get("limit", 50)), 100))
        messages = channel.messages
        if "around" in query:
            ids = [int(m["id"]) for m in messages]
            centre = bisect.bisect_left(ids, int(query["around"]))
            start = max(0, centre - limit // 2)
            page = messages[start : start + limit]
        elif "after" in query:
            after = int(query["after"])
            page = [m for m in messages if int(m["id"]) > after][:limit]
        else:
            before = int(query["before"]) if "before" in query else None
            older = [m for m in messages if before is None or int(m["id"]) < before]
            page = older[-limit:]
        return list(reversed(page))

    # Gateway

    async def _gateway(self, request: web.Request) -> web.WebSocketResponse:
        # Frames go out as plain JSON text: discord.py inflates only binary frames (gateway.received_message),
        # so the `compress=zlib-stream` it puts in the URL query can be ignored.
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        self._sockets.add(ws)
        try:
            await ws.send_str(json.dumps({"op": OP_HELLO, "d": {"heartbeat_interval": HEARTBEAT_INTERVAL_MS}}))
            async for frame in ws:
                if frame.type is WSMsgType.TEXT:
                    await self._on_gateway_payload(ws, json.loads(frame.data))
        finally:
            self._sockets.discard(ws)
        return ws

    async def _on_gateway_payload(self, ws: web.WebSocketResponse, payload: dict[str, Any]) -> None:
        op, data = payload.get("op"), payload.get("d") or {}
        if op == OP_HEARTBEAT:
            await ws.send_str(json.dumps({"op": OP_HEARTBEAT_ACK}))
        elif op == OP_IDENTIFY:
            await self._identify(ws, data)
        elif op == OP_RESUME:
            await self._resume(ws, data)
        elif op == OP_REQUEST_GUILD_MEMBERS:
            await self._send_member_chunk(data)
        else:
            _log.debug("FakeDiscord ignores gateway op %s", op)

    async def _identify(self, ws: web.WebSocketResponse, data: dict[str, Any]) -> None:
        if data.get("token") != self.token:
            # https://discord.com/developers/docs/topics/opcodes-and-status-codes#gateway-gateway-close-event-codes
            await ws.close(code=4004, message=b"Authentication failed.")
            return
        self.identifies.append(data)
        session = _Session(id=uuid.uuid4().hex, ws=ws, shard=data.get("shard"))
        # A new shard count is a reshard: the sessions of the old count are over.
        self._sessions = {
            shard_id: other for shard_id, other in self._sessions.items() if other.shard_count == session.shard_count
        }
        self._sessions[session.shard_id] = self._session = session
        await self._dispatch(session, "READY", self._ready(session))
        for guild_id in self._guilds_of(session):
            await self._dispatch(session, "GUILD_CREATE", self._guild_create(guild_id))
        session.ready = True
        self._changed()

    def _guilds_of(self, session: _Session) -> list[int]:
        return [
            guild_id for guild_id in self.guilds if self.shard_of(guild_id, session.shard_count) == session.shard_id
        ]

    def _session_for(self, guild_id: int | None) -> _Session | None:
        """The session a server's events go to (None: a direct message, shard 0's); None when none serves it."""
        if not self._sessions:
            return None
        count = next(iter(self._sessions.values())).shard_count
        return self._sessions.get(0 if guild_id is None else self.shard_of(guild_id, count))

    def _guild_of(self, event: str, data: dict[str, Any]) -> int | None:
        """The server an event is about (None: a direct message's, or no server's)."""
        if "guild_id" in data:
            return int(data["guild_id"])
        if event.startswith("GUILD_"):
            return int(data["id"])
        channel = self.channels.get(int(data.get("channel_id") or 0))
        return channel.guild_id if channel is not None and channel.recipient_id is None else None

    async def _route(self, event: str, data: dict[str, Any]) -> None:
        session = self._session_for(self._guild_of(event, data))
        if session is not None:
            await self._dispatch(session, event, data)

    async def _resume(self, ws: web.WebSocketResponse, data: dict[str, Any]) -> None:
        """Replay the dispatches the client missed, then RESUMED; an unknown session is invalidated.

        https://discord.com/developers/docs/events/gateway#resuming
        """
        session = next((s for s in self._sessions.values() if s.id == data.get("session_id")), None)
        if session is None or data.get("token") != self.token:
            await ws.send_str(json.dumps({"op": OP_INVALID_SESSION, "d": False}))
            return
        self.resumes.append(data)
        last_seen = data.get("seq") or 0
        async with session.lock:
            session.ws = ws
            for payload in session.log:
                if payload["s"] > last_seen:
                    await ws.send_str(json.dumps(payload))
        await self._dispatch(session, "RESUMED", {})

    async def _send_member_chunk(self, data: dict[str, Any]) -> None:
        """Answer REQUEST_GUILD_MEMBERS in one chunk, filtered by `user_ids` or the username prefix `query`."""
        wanted = _snowflakes(data.get("user_ids") or [])
        query = (data.get("query") or "").lower()
        users = [
            user
            for user in self.users.values()
            if (user.id in wanted if wanted else user.username.lower().startswith(query))
        ]
        chunk = {
            "guild_id": str(data.get("guild_id") or GUILD_ID),
            "members": [{"user": user.payload(), **user.member_payload()} for user in users],
            "chunk_index": 0,
            "chunk_count": 1,
            "not_found": [str(user_id) for user_id in wanted - {user.id for user in users}],
            "nonce": data.get("nonce"),
        }
        await self._route("GUILD_MEMBERS_CHUNK", chunk)

    async def _dispatch(self, session: _Session, event: str, data: dict[str, Any]) -> None:
        async with session.lock:  # keeps frames in sequence order
            session.seq += 1
            payload = {"op": OP_DISPATCH, "t": event, "s": session.seq, "d": data}
            session.log.append(payload)
            if not session.ws.closed:
                # A client that vanished (kill -9) misses it; a RESUME would replay it, as Discord does.
                with contextlib.suppress(ConnectionResetError):
                    await session.ws.send_str(json.dumps(payload))
        self._changed()

    # REST

    def _add_routes(self, router: web.UrlDispatcher) -> None:
        api: list[tuple[str, str, _Handler]] = [
            ("GET", "/users/@me", self._get_me),
            ("GET", "/oauth2/applications/@me", self._get_application),
            ("GET", "/channels/{channel_id}", self._get_channel),
            ("GET", "/channels/{channel_id}/messages", self._get_messages),
            ("GET", "/channels/{channel_id}/messages/{message_id}", self._get_message),
            ("POST", "/channels/{channel_id}/messages", self._post_message),
            ("PATCH", "/channels/{channel_id}/messages/{message_id}", self._patch_message),
            ("DELETE", "/channels/{channel_id}/messages/{message_id}", self._delete_message),
            ("POST", "/channels/{channel_id}/typing", self._post_typing),
            ("POST", "/channels/{channel_id}/messages/{message_id}/threads", self._start_thread_from_message),
            ("GET", "/guilds/{guild_id}", self._get_guild),
            ("POST", "/interactions/{interaction_id}/{token}/callback", self._interaction_callback),
            ("POST", "/webhooks/{application_id}/{token}", self._webhook_message),
            ("GET", "/webhooks/{application_id}/{token}/messages/{message_id}", self._webhook_message),
            ("PATCH", "/webhooks/{application_id}/{token}/messages/{message_id}", self._webhook_message),
            ("DELETE", "/webhooks/{application_id}/{token}/messages/{message_id}", self._webhook_delete),
            ("GET", "/applications/{application_id}/commands", self._get_commands),
            ("PUT", "/applications/{application_id}/commands", self._put_commands),
            ("GET", "/applications/{application_id}/guilds/{guild_id}/commands", self._get_commands),
            ("PUT", "/applications/{application_id}/guilds/{guild_id}/commands", self._put_commands),
            ("GET", "/gateway/bot", self._get_gateway_bot),
        ]
        for method, path, handler in api:
            router.add_route(method, API_PREFIX + path, handler)
        router.add_get("/gateway", self._gateway)
        router.add_get("/cdn/attachments/{attachment_id}/{filename}", self._get_cdn_file)
        router.add_route("*", "/{tail:.*}", self._unknown)

    @web.middleware
    async def _record(self, request: web.Request, handler: _Handler) -> web.StreamResponse:
        try:
            response = await handler(request)
        except web.HTTPException:
            raise
        except Exception as exc:  # noqa: BLE001 - any handler bug becomes a 400 the test sees
            # A 400 makes discord.py raise at once; a 500 would be retried for ~25 s.
            _log.exception("FakeDiscord failed handling %s %s", request.method, request.path_qs)
            self.handler_errors.append(exc)
            response = _error(400, f"FakeDiscord: {exc!r}", 50035)
        self.requests.append(RecordedRequest(request.method, request.path_qs, response.status))
        self._changed()
        return response

    @web.middleware
    async def _authorize(self, request: web.Request, handler: _Handler) -> web.StreamResponse:
        # Interaction callbacks and webhooks authenticate by the token in their path, not a header.
        unauthenticated = ("/gateway", "/cdn/", f"{API_PREFIX}/interactions/", f"{API_PREFIX}/webhooks/")
        authorized = request.headers.get("Authorization") == f"Bot {self.token}"
        if not (authorized or request.path.startswith(unauthenticated)):
            return _error(401, "401: Unauthorized")
        return await handler(request)

    async def _unknown(self, request: web.Request) -> web.Response:
        route = f"{request.method} {request.path_qs}"
        _log.warning("FakeDiscord: unknown route %s", route)
        self.unknown_routes.append(route)
        return _error(404, "404: Not Found")

    async def _get_cdn_file(self, request: web.Request) -> web.Response:
        attachment_id = int(request.match_info["attachment_id"])
        self.cdn_requests.append(attachment_id)
        if attachment_id in self.cdn_failures:
            return web.Response(status=500, text="CDN failure")
        data = self.cdn.get(attachment_id)
        if data is None:
            return web.Response(status=404, text="Not Found")
        return web.Response(body=data, content_type="application/octet-stream")

    async def _get_me(self, request: web.Request) -> web.Response:
        return _json_response(self._bot_user())

    async def _get_gateway_bot(self, request: web.Request) -> web.Response:
        # https://discord.com/developers/docs/events/gateway#get-gateway-bot: where to connect, and how many shards.
        limit = {"total": 1000, "remaining": 1000, "reset_after": 0, "max_concurrency": 1}
        return _json_response({"url": self.gateway_url, "shards": self.shard_count, "session_start_limit": limit})

    async def _get_application(self, request: web.Request) -> web.Response:
        return _json_response(self._application())

    async def _get_guild(self, request: web.Request) -> web.Response:
        guild_id = int(request.match_info["guild_id"])
        if guild_id not in self.guilds:
            return _error(404, "Unknown Guild", 10004)
        return _json_response(self._guild(guild_id))

    def _channel_or_none(self, request: web.Request) -> FakeChannel | None:
        return self.channels.get(int(request.match_info["channel_id"]))

    async def _get_channel(self, request: web.Request) -> web.Response:
        channel = self._channel_or_none(request)
        if channel is None:
            return _error(404, "Unknown Channel", 10003)
        return _json_response(channel.payload())

    async def _get_messages(self, request: web.Request) -> web.Response:
        channel = self._channel_or_none(request)
        if channel is None:
            return _error(404, "Unknown Channel", 10003)
        return _json_response(self._history_page(channel, request.query))

    async def _get_message(self, request: web.Request) -> web.Response:
        channel = self._channel_or_none(request)
        message = channel.find(int(request.match_info["message_id"])) if channel else None
        if message is None:
            return _error(404, "Unknown Message", 10008)
        return _json_response(message)

    async def _post_typing(self, request: web.Request) -> web.Response:
        channel = self._channel_or_none(request)
        if channel is None:
            return _error(404, "Unknown Channel", 10003)
        self.typing_events.append(TypingEvent(channel.id, asyncio.get_running_loop().time()))
        return web.Response(status=204)

    async def _post_message(self, request: web.Request) -> web.Response:
        channel = self._channel_or_none(request)
        if channel is None:
            return _error(404, "Unknown Channel", 10003)
        failure = self._take_failure(channel.id)
        if failure is not None:
            return self._failure_response(failure)
        body, files = await _read_message_body(request)
        content = body.get("content") or ""
        if not (content or body.get("embeds") or files or body.get("sticker_ids")):
            return _error(400, "Cannot send an empty message", 50006)
        if len(content) > MAX_CONTENT_LENGTH:
            return _invalid_form_body("content", f"Must be {MAX_CONTENT_LENGTH} or fewer in length.")
        reference = body.get("message_reference")
        reply_to = int(reference["message_id"]) if reference else None
        if reference and reply_to is not None and channel.find(reply_to) is None:
            # https://discord.com/developers/docs/resources/message#message-reference-structure
            if reference.get("fail_if_not_exists", True):
                return _invalid_form_body("message_reference", "Unknown message")
            reply_to = None  # posted as a plain message
        message = self._create_message(
            channel.id,
            BOT_ID,
            content,
            message_id=self._next_id(),
            reply_to=reply_to,
            allowed_mentions=body.get("allowed_mentions"),
            attachments=[self._attachment(name, data) for name, data in files],
        )
        if body.get("components"):
            message["components"] = body["components"]
        self.bot_posts.append(Post(channel.id, body, message, files, asyncio.get_running_loop().time()))
        # Discord echoes the bot's own message back over the gateway.
        await self._route("MESSAGE_CREATE", self._gateway_message(message))
        return _json_response(message)

    async def _patch_message(self, request: web.Request) -> web.Response:
        """Edit one of the bot's messages; MESSAGE_UPDATE follows, as Discord sends it.

        https://discord.com/developers/docs/resources/message#edit-message
        """
        channel = self._channel_or_none(request)
        message = channel.find(int(request.match_info["message_id"])) if channel else None
        if channel is None or message is None:
            return _error(404, "Unknown Message", 10008)
        failure = _take(self._edit_failures, channel.id)
        if failure is not None:
            return self._failure_response(failure)
        if int(message["author"]["id"]) != BOT_ID:
            return _error(403, "Cannot edit a message authored by another user", 50005)
        body, _ = await _read_message_body(request)
        content = body.get("content", message["content"]) or ""
        if len(content) > MAX_CONTENT_LENGTH:
            return _invalid_form_body("content", f"Must be {MAX_CONTENT_LENGTH} or fewer in length.")
        message["content"] = content
        message["edited_timestamp"] = datetime.now(UTC).isoformat()
        if "components" in body:
            message["components"] = body["components"] or []
        # Who is listed as mentioned follows the new text, within the edit's allowed_mentions.
        mentioned = self._pinged_users(content, (), body.get("allowed_mentions") or {"parse": []}, None)
        message["mentions"] = [self.users[user_id].payload() for user_id in mentioned]
        message["mention_roles"] = _ROLE_MENTION.findall(content)
        self.edits.append(Edit(channel.id, int(message["id"]), body, asyncio.get_running_loop().time()))
        await self._route("MESSAGE_UPDATE", self._gateway_message(message))
        return _json_response(message)

    async def _delete_message(self, request: web.Request) -> web.Response:
        channel = self._channel_or_none(request)
        message_id = int(request.match_info["message_id"])
        if channel is None or channel.find(message_id) is None:
            return _error(404, "Unknown Message", 10008)
        channel.messages = [m for m in channel.messages if int(m["id"]) != message_id]
        self.deleted_ids.append(message_id)
        where = {"id": str(message_id), "channel_id": str(channel.id)}
        if channel.recipient_id is None:
            where["guild_id"] = str(channel.guild_id)
        await self._route("MESSAGE_DELETE", where)
        return web.Response(status=204)

    async def _start_thread_from_message(self, request: web.Request) -> web.Response:
        """Start a public thread on a message: the thread takes the message's id; THREAD_CREATE follows.

        https://discord.com/developers/docs/resources/channel#start-thread-from-message
        """
        channel = self._channel_or_none(request)
        if channel is None or channel.parent_id is not None or channel.recipient_id is not None:
            return _error(404, "Unknown Channel", 10003)
        message_id = int(request.match_info["message_id"])
        message = channel.find(message_id)
        if message is None:
            return _error(404, "Unknown Message", 10008)
        if message_id in self.channels:
            return _error(400, "A thread has already been created for this message", 160004)
        body = await request.json()
        name = body.get("name") or ""
        if not 1 <= len(name) <= 100:
            return _invalid_form_body("name", "Must be between 1 and 100 in length.")
        thread = FakeChannel(message_id, name, 0, parent_id=channel.id, owner_id=BOT_ID, guild_id=channel.guild_id)
        thread.member_ids = {BOT_ID, int(message["author"]["id"])}
        self.channels[thread.id] = thread
        self.threads_started.append((channel.id, message_id, body))
        await self._route("THREAD_CREATE", {**thread.payload(), "newly_created": True})
        return _json_response(thread.payload())

    def _attachment(self, filename: str, data: bytes) -> dict[str, Any]:
        attachment_id = self._next_id()
        url = f"https://cdn.discordapp.com/attachments/{attachment_id}/{filename}"
        return {"id": str(attachment_id), "filename": filename, "size": len(data), "url": url, "proxy_url": url}

    def _take_failure(self, channel_id: int) -> _Failure | None:
        return _take(self._failures, channel_id)

    def _failure_response(self, failure: _Failure) -> web.Response:
        if failure.status != 429:
            return _error(failure.status, f"{failure.status}: Internal Server Error")
        # discord.py treats a 429 without a `Via` header as a Cloudflare ban and raises instead of retrying.
        # https://discord.com/developers/docs/topics/rate-limits#header-format
        headers = {
            "Via": "1.1 google",
            "Retry-After": str(max(1, round(failure.retry_after))),
            "X-RateLimit-Limit": "5",
            "X-RateLimit-Remaining": "0",
            "X-RateLimit-Reset-After": str(failure.retry_after),
            "X-RateLimit-Scope": "user",
        }
        body = {"message": "You are being rate limited.", "retry_after": failure.retry_after, "global": False}
        return _json_response(body, status=429, headers=headers)

    # Interactions and application commands

    async def _interaction_callback(self, request: web.Request) -> web.Response:
        body, _ = await _read_message_body(request)
        token = request.match_info["token"]
        self.interaction_calls.append(InteractionCall(request.method, request.path_qs, body))
        self._changed()
        interaction = self._interactions.get(token, {})
        callback_type = body.get("type")
        data = body.get("data") or {}
        # https://discord.com/developers/docs/interactions/receiving-and-responding#interaction-callback-interaction-callback-response-object
        response: dict[str, Any] = {
            "interaction": {
                "id": request.match_info["interaction_id"],
                "type": interaction.get("type", 2),
                "response_message_loading": callback_type == CALLBACK_DEFERRED_CHANNEL_MESSAGE,
                "response_message_ephemeral": bool(data.get("flags", 0) & EPHEMERAL_FLAG),
            },
            "resource": {"type": callback_type},
        }
        if callback_type in CALLBACK_TYPES_WITH_MESSAGE:
            message = self._interaction_message(token, data)
            self._original_responses[token] = message
            response["interaction"]["response_message_id"] = message["id"]
            response["resource"]["message"] = message
        return _json_response(response)

    def _interaction_message(self, token: str, data: dict[str, Any]) -> dict[str, Any]:
        """A message object for an interaction response or follow-up; these stay out of channel history."""
        channel_id = int(self._interactions.get(token, {}).get("channel_id", CHANNEL_ID))
        message_id = self._next_id()
        return {
            "id": str(message_id),
            "channel_id": str(channel_id),
            "author": self.users[BOT_ID].payload(),
            "content": data.get("content") or "",
            "timestamp": iso_timestamp(message_id),
            "edited_timestamp": None,
            "tts": False,
            "mention_everyone": False,
            "mentions": [],
            "mention_roles": [],
            "attachments": [],
            "embeds": data.get("embeds") or [],
            "pinned": False,
            "type": MESSAGE_TYPE_CHAT_INPUT_COMMAND,
            "flags": data.get("flags", 0),
            "components": [],
            "application_id": str(APPLICATION_ID),
            "webhook_id": str(APPLICATION_ID),
        }

    async def _webhook_message(self, request: web.Request) -> web.Response:
        """Follow-ups (POST) and the @original response (GET, PATCH) of an interaction."""
        body = None if request.method == "GET" else (await _read_message_body(request))[0]
        token = request.match_info["token"]
        self.interaction_calls.append(InteractionCall(request.method, request.path_qs, body))
        self._changed()
        if request.method == "POST":
            return _json_response(self._interaction_message(token, body or {}))
        if request.method == "PATCH":
            original = self._original_responses.get(token) or self._interaction_message(token, {})
            self._original_responses[token] = {**original, **(body or {})}
        if token not in self._original_responses:
            return _error(404, "Unknown Message", 10008)
        return _json_response(self._original_responses[token])

    async def _webhook_delete(self, request: web.Request) -> web.Response:
        self.interaction_calls.append(InteractionCall(request.method, request.path_qs, None))
        self._original_responses.pop(request.match_info["token"], None)
        self._changed()
        return web.Response(status=204)

    async def _get_commands(self, request: web.Request) -> web.Response:
        return _json_response(self.commands.get(_command_scope(request), []))

    async def _put_commands(self, request: web.Request) -> web.Response:
        scope = _command_scope(request)
        commands = [
            {
                "type": 1,
                "description": "",
                "options": [],
                **command,
                "id": str(self._next_id()),
                "application_id": str(APPLICATION_ID),
                "version": str(self._next_id()),
                **({"guild_id": str(scope)} if scope is not None else {}),
            }
            for command in await request.json()
        ]
        self.commands[scope] = commands
        self._changed()
        return _json_response(commands)


def _take(failures: list[_Failure], channel_id: int) -> _Failure | None:
    """The first scripted failure for `channel_id` (or any channel), removed from `failures`."""
    for index, failure in enumerate(failures):
        if failure.channel_id in (None, channel_id):
            return failures.pop(index)
    return None


def _command_scope(request: web.Request) -> int | None:
    guild_id = request.match_info.get("guild_id")
    return int(guild_id) if guild_id is not None else None


async def _read_message_body(request: web.Request) -> tuple[dict[str, Any], list[tuple[str, bytes]]]:
    """The JSON payload and files of a message request, sent as JSON or as multipart with `payload_json`.

    https://discord.com/developers/docs/reference#uploading-files
    """
    if request.content_type != "multipart/form-data":
        return (await request.json() if request.can_read_body else {}), []
    payload: dict[str, Any] = {}
    files: list[tuple[str, bytes]] = []
    reader = await request.multipart()
    async for part in reader:
        assert isinstance(part, BodyPartReader)  # Discord never nests multipart bodies
        if part.name == "payload_json":
            payload = json.loads(await part.text())
        else:
            files.append((part.filename or part.name or "file", await part.read()))
    return payload, files
