"""The fake Discord's ids, value types and state, which its parts and the tests share."""

from __future__ import annotations

import asyncio
import bisect
import itertools
import json
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import discord
from aiohttp import web

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
# A members' role no one holds until a test gives it (`FakeDiscord.give_role`), for limits by role.
NEWCOMER_ROLE_ID = snowflake_at(_WORLD_CREATED, 40)

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
CALLBACK_UPDATE_MESSAGE = 7
CALLBACK_MODAL = 9
INTERACTION_MODAL_SUBMIT = 5
EPHEMERAL_FLAG = 1 << 6
# A deferred response "thinking…" until it is edited: https://discord.com/developers/docs/resources/message#message-object-message-flags
LOADING_FLAG = 1 << 7

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
    timed_out_until: str | None = None  # ISO timestamp: a moderator's timeout ("communication disabled") ends then

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
            "communication_disabled_until": self.timed_out_until,
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
    archived_at: datetime | None = None  # when a thread was last archived or unarchived (else: when it was opened)
    locked: bool = False
    member_ids: set[int] = field(default_factory=set)
    owner_id: int = ALICE_ID
    # A text channel's permission overwrites, as Discord sends them.
    overwrites: list[dict[str, Any]] = field(default_factory=list)
    recipient_id: int | None = None  # set for a direct message channel: the person on the other side
    guild_id: int = GUILD_ID  # the server of a text channel or thread (a direct message channel has none)
    category_id: int | None = None  # a text channel's category
    is_category: bool = False  # a category: a server's channel that holds others, where nobody writes
    is_forum: bool = False  # a forum: a server's channel whose every post is a thread, whose first message has its id
    # The channel's pinned messages: message id -> when it was pinned, in pin order.
    pins: dict[int, datetime] = field(default_factory=dict)
    # Slowmode: the seconds each member waits between two messages (0: off).
    rate_limit_per_user: int = 0

    def payload(self) -> dict[str, Any]:
        if self.parent_id is not None:
            return self._thread_payload(self.parent_id)
        if self.recipient_id is not None:
            return self._dm_payload(self.recipient_id)
        if self.is_forum:
            return self._forum_payload()
        if self.is_category:
            # https://discord.com/developers/docs/resources/channel#channel-object-channel-types
            kind = discord.ChannelType.category.value
            return {
                "id": str(self.id),
                "type": kind,
                "guild_id": str(self.guild_id),
                "name": self.name,
                "position": self.position,
                "parent_id": None,
                "nsfw": False,
                "permission_overwrites": [],
            }
        return {
            "id": str(self.id),
            "type": discord.ChannelType.text.value,
            "guild_id": str(self.guild_id),
            "name": self.name,
            "position": self.position,
            "parent_id": None if self.category_id is None else str(self.category_id),
            "topic": None,
            "nsfw": False,
            "rate_limit_per_user": self.rate_limit_per_user,
            "permission_overwrites": self.overwrites,
            "last_message_id": self.messages[-1]["id"] if self.messages else None,
        }

    def _forum_payload(self) -> dict[str, Any]:
        """A forum channel. https://discord.com/developers/docs/resources/channel#channel-object-channel-types"""
        return {
            "id": str(self.id),
            "type": discord.ChannelType.forum.value,
            "guild_id": str(self.guild_id),
            "name": self.name,
            "position": self.position,
            "parent_id": None if self.category_id is None else str(self.category_id),
            "topic": None,
            "nsfw": False,
            "rate_limit_per_user": 0,
            "permission_overwrites": self.overwrites,
            "available_tags": [],
            "flags": 0,
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
                "archive_timestamp": (
                    iso_timestamp(self.id) if self.archived_at is None else self.archived_at.isoformat()
                ),
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
    files: tuple[tuple[str, bytes], ...] = ()  # the files the edit attached


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
    """A request the bot made to an interaction callback or webhook route, with the files it attached."""

    method: str
    path: str
    body: dict[str, Any] | None
    # The files sent with it (multipart), by name.
    files: tuple[tuple[str, bytes], ...] = ()


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


class FakeDiscordState:
    """What the fake Discord holds (servers, users, channels, sessions, scripted failures), and the ids it issues."""

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
        self.left_guilds: list[int] = []  # servers the bot left (DELETE /users/@me/guilds/{id}), in order
        # The application's Public Bot flag (GET /oauth2/applications/@me), off as Parley's docs ask.
        self.bot_public = False
        # The colour of Parley's managed role, as a server may set it (0: none); sent with the guild on connect.
        self.bot_role_colour = 0
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
        # Users who left the servers or were banned (`part`): no longer their members.
        self.departed: set[int] = set()
        # Roles a test added to the first server (`add_role`), by id, with their names.
        self.roles: dict[int, str] = {}
        self.channels: dict[int, FakeChannel] = {
            channel.id: channel
            for channel in (FakeChannel(CHANNEL_ID, "general", 0), FakeChannel(OTHER_CHANNEL_ID, "random", 1))
        }
        self.bot_posts: list[Post] = []
        self.edits: list[Edit] = []
        self.deleted_ids: list[int] = []  # messages the bot deleted, in order
        # The bot's edits of members (Modify Guild Member), in order: (server, member, the JSON it sent).
        self.member_edits: list[tuple[int, int, dict[str, Any]]] = []
        self.typing_events: list[TypingEvent] = []
        self.requests: list[RecordedRequest] = []
        self.held_routes: set[str] = set()  # "GET /users/@me": requests left unanswered, to stop a client mid-call
        self.reached_held_routes: list[str] = []
        self.failing_routes: set[str] = set()  # "GET /guilds/{guild_id}/members/{user_id}": answered with an error
        self.absent_members: set[tuple[int, int]] = set()  # (server, user): not a member there, for GET member
        self.unknown_routes: list[str] = []
        self.handler_errors: list[Exception] = []  # exceptions inside the fake, answered with 400
        self.interaction_calls: list[InteractionCall] = []
        # (channel id, message id, JSON body) of each "start thread from message" request the bot made.
        self.threads_started: list[tuple[int, int, dict[str, Any]]] = []
        # The reason (X-Audit-Log-Reason) each request that gave one went with, by "METHOD path".
        self.audit_reasons: list[tuple[str, str]] = []
        self.identifies: list[dict[str, Any]] = []
        self.resumes: list[dict[str, Any]] = []
        # RESUME is answered with op 9 (the session cannot be resumed), as when Discord has dropped it.
        self.refuse_resumes = False
        # A RESUME replays this many dispatches the client had already received too: the gateway delivers at least
        # once, so a resumed session may hear a MESSAGE_CREATE again.
        self.resume_replays_seen = 0
        # While a deployment reshards, the old shard count's sessions stay live beside the new count's, and a
        # server's events go to its shard in each count (Discord's own behaviour until the old processes stop).
        self.reshard_overlap = False
        self.commands: dict[int | None, list[dict[str, Any]]] = {}  # guild id (None: global) -> commands
        self._interactions: dict[str, dict[str, Any]] = {}  # token -> INTERACTION_CREATE data
        self._original_responses: dict[str, dict[str, Any]] = {}  # token -> message
        # The modal each interaction was answered with (MODAL callback `data`: custom_id, title, components), by token.
        self.modals: dict[str, dict[str, Any]] = {}
        self._failures: list[_Failure] = []
        # Attachment bytes the fake CDN serves, by attachment id; ids in `cdn_failures` answer 500 instead.
        self.cdn: dict[int, bytes] = {}
        self.cdn_failures: set[int] = set()
        self.cdn_requests: list[int] = []
        self._edit_failures: list[_Failure] = []
        # Channels whose pins listing answers with this status (403: no permission to read them) until cleared.
        self.pin_failures: dict[int, int] = {}
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

    def shard_of(self, guild_id: int, shard_count: int) -> int:
        """The shard whose session gets the server's events: `(guild_id >> 22) % shard_count`, unless handed over."""
        return self._handed_over.get(guild_id, (guild_id >> 22) % shard_count)

    def _changed(self) -> None:
        self._change.set()
        self._change = asyncio.Event()

    def dm_channel(self, user_id: int) -> int:
        """The id of the direct message channel between the bot and `user_id`, opened on first use."""
        for channel in self.channels.values():
            if channel.recipient_id == user_id:
                return channel.id
        channel = FakeChannel(self._next_id(), "", 0, recipient_id=user_id)
        self.channels[channel.id] = channel
        return channel.id

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

    def _guilds_of(self, session: _Session) -> list[int]:
        return [
            guild_id for guild_id in self.guilds if self.shard_of(guild_id, session.shard_count) == session.shard_id
        ]
