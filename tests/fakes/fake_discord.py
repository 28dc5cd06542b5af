"""A local fake of Discord's REST API and gateway that the real discord.py client can log in to.

Point discord.py at it by setting two class attributes before starting the client:

    discord.http.Route.BASE = fake.api_base_url
    discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(fake.gateway_url)
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Callable, Iterable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import discord
from aiohttp import WSCloseCode, web

from tests.fakes.fake_discord_rest import RestRoutes
from tests.fakes.fake_discord_state import (
    _WORLD_CREATED,
    ALICE_ID,
    API_PREFIX,
    APPLICATION_ID,
    BOB_ID,
    BOT_ID,
    BOT_PERMISSIONS,
    BOT_ROLE_ID,
    CALLBACK_DEFERRED_CHANNEL_MESSAGE,
    CALLBACK_TYPES_WITH_MESSAGE,
    CAROL_ID,
    CHANNEL_ID,
    DEFAULT_TOKEN,
    DIRECT_MESSAGES_INTENT,
    DISCORD_EPOCH_MS,
    EPHEMERAL_FLAG,
    EVERYONE_PERMISSIONS,
    GUILD_ID,
    HEARTBEAT_INTERVAL_MS,
    MAX_CONTENT_LENGTH,
    MESSAGE_TYPE_CHAT_INPUT_COMMAND,
    MESSAGE_TYPE_DEFAULT,
    MESSAGE_TYPE_REPLY,
    NEWCOMER_ROLE_ID,
    OP_DISPATCH,
    OP_HEARTBEAT,
    OP_HEARTBEAT_ACK,
    OP_HELLO,
    OP_IDENTIFY,
    OP_INVALID_SESSION,
    OP_RECONNECT,
    OP_REQUEST_GUILD_MEMBERS,
    OP_RESUME,
    OTHER_BOT_ID,
    OTHER_BOT_ROLE_ID,
    OTHER_CHANNEL_ID,
    Edit,
    FakeChannel,
    FakeUser,
    InteractionCall,
    Post,
    RecordedRequest,
    TypingEvent,
    _Failure,
    iso_timestamp,
    snowflake_at,
    snowflake_time,
)

# The ids and value types live in fake_discord_state; the tests import them from here, beside FakeDiscord.
__all__ = [
    "ALICE_ID",
    "API_PREFIX",
    "APPLICATION_ID",
    "BOB_ID",
    "BOT_ID",
    "BOT_PERMISSIONS",
    "BOT_ROLE_ID",
    "CALLBACK_DEFERRED_CHANNEL_MESSAGE",
    "CALLBACK_TYPES_WITH_MESSAGE",
    "CAROL_ID",
    "CHANNEL_ID",
    "DEFAULT_TOKEN",
    "DIRECT_MESSAGES_INTENT",
    "DISCORD_EPOCH_MS",
    "EPHEMERAL_FLAG",
    "EVERYONE_PERMISSIONS",
    "GUILD_ID",
    "HEARTBEAT_INTERVAL_MS",
    "MAX_CONTENT_LENGTH",
    "MESSAGE_TYPE_CHAT_INPUT_COMMAND",
    "MESSAGE_TYPE_DEFAULT",
    "MESSAGE_TYPE_REPLY",
    "NEWCOMER_ROLE_ID",
    "OP_DISPATCH",
    "OP_HEARTBEAT",
    "OP_HEARTBEAT_ACK",
    "OP_HELLO",
    "OP_IDENTIFY",
    "OP_INVALID_SESSION",
    "OP_RECONNECT",
    "OP_REQUEST_GUILD_MEMBERS",
    "OP_RESUME",
    "OTHER_BOT_ID",
    "OTHER_BOT_ROLE_ID",
    "OTHER_CHANNEL_ID",
    "Edit",
    "FakeChannel",
    "FakeDiscord",
    "FakeUser",
    "InteractionCall",
    "Post",
    "RecordedRequest",
    "TypingEvent",
    "iso_timestamp",
    "snowflake_at",
    "snowflake_time",
]


class FakeDiscord(RestRoutes):
    """A fake Discord: one guild, two text channels and any threads a test opens, the bot, three humans, another bot.

    Tests may add servers (`add_guild`). Each IDENTIFY's `shard: [id, count]` opens a session for that shard; a
    server's events go only to the session of its shard, `(guild_id >> 22) % count`, and direct messages to shard 0's,
    as on Discord: https://discord.com/developers/docs/events/gateway#sharding. `shard_count` is what
    GET /gateway/bot recommends.
    """

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

    def add_role(self, name: str, members: Iterable[int] = ()) -> int:
        """Add a role to the first server and give it to `members`; its id. Call it before the bot connects: the
        server's GUILD_CREATE carries its roles and members."""
        role_id = self._next_id(_WORLD_CREATED)
        self.roles[role_id] = name
        for user_id in members:
            user = self.users[user_id]
            self.users[user_id] = replace(user, role_ids=(*user.role_ids, role_id))
        return role_id

    def add_category(self, name: str, channels: Iterable[int] = ()) -> int:
        """Add a category to the first server holding the text `channels`; its id. Call it before the bot connects:
        the server's GUILD_CREATE carries its channels."""
        category = FakeChannel(self._next_id(_WORLD_CREATED), name, len(self.channels), is_category=True)
        self.channels[category.id] = category
        for channel_id in channels:
            self.channels[channel_id].category_id = category.id
        return category.id

    def add_forum(self, name: str) -> int:
        """Add a forum channel to the first server; its id. Call it before the bot connects: the server's
        GUILD_CREATE carries its channels."""
        forum = FakeChannel(self._next_id(_WORLD_CREATED), name, len(self.channels), is_forum=True)
        self.channels[forum.id] = forum
        return forum.id

    async def post_in_forum(self, forum_id: int, author_id: int, title: str, content: str) -> dict[str, Any]:
        """A member's new post in a forum, as Discord makes it: a thread named `title` (THREAD_CREATE), whose first
        message (MESSAGE_CREATE) has the thread's id and says `content`; that message."""
        forum = self._channel(forum_id)
        post_id = self._next_id()
        post = FakeChannel(post_id, title, 0, parent_id=forum_id, owner_id=author_id, guild_id=forum.guild_id)
        post.member_ids.add(author_id)
        self.channels[post_id] = post
        await self.dispatch("THREAD_CREATE", {**post.payload(), "newly_created": True})
        return await self.send_user_message(post_id, author_id, content, message_id=post_id)

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
            thread.archived_at = datetime.now(UTC)
        if locked is not None:
            thread.locked = locked
        await self.dispatch("THREAD_UPDATE", thread.payload())

    def give_role(self, user_id: int, role_id: int) -> None:
        """Give a member a role; their messages from now on carry it (as Discord's `member` object does)."""
        user = self.users[user_id]
        self.users[user_id] = dataclasses.replace(user, role_ids=(*user.role_ids, role_id))

    def time_out(self, user_id: int, until: datetime) -> None:
        """Time a member out until `until` (Discord's "communication disabled"); the next GUILD_CREATE carries it."""
        user = self.users[user_id]
        self.users[user_id] = dataclasses.replace(user, timed_out_until=until.isoformat())

    def part(self, user_id: int) -> None:
        """The member leaves the servers, or is banned: the next GUILD_CREATE leaves them out, and Get Guild Member
        answers 404 Unknown Member for them (Discord's answer in either case)."""
        self.departed.add(user_id)

    def deny(self, channel_id: int, user_id: int, permissions: discord.Permissions) -> None:
        """Deny a member `permissions` in a text channel (a member overwrite); the next GUILD_CREATE carries it."""
        # https://discord.com/developers/docs/resources/channel#overwrite-object
        overwrite = {"id": str(user_id), "type": 1, "allow": "0", "deny": str(permissions.value)}
        self._channel(channel_id).overwrites.append(overwrite)

    def allow(
        self,
        channel_id: int,
        user_id: int,
        permissions: discord.Permissions,
        denied: discord.Permissions | None = None,
    ) -> None:
        """Allow a member `permissions` in a text channel (and deny them `denied`), replacing their member overwrite
        there (none: take back what an earlier one allowed); the next GUILD_CREATE carries it."""
        channel = self._channel(channel_id)
        channel.overwrites = [o for o in channel.overwrites if not (o["type"] == 1 and int(o["id"]) == user_id)]
        deny = 0 if denied is None else denied.value
        overwrite = {"id": str(user_id), "type": 1, "allow": str(permissions.value), "deny": str(deny)}
        channel.overwrites.append(overwrite)

    def keep_private(self, channel_id: int, readers: Iterable[int]) -> None:
        """Deny @everyone View Channel in a text channel, allowing it to `readers` alone (a role overwrite for the
        server's default role, whose id is the server's, and member overwrites); the next GUILD_CREATE carries it."""
        # https://discord.com/developers/docs/topics/permissions#permission-overwrites
        channel = self._channel(channel_id)
        view = str(discord.Permissions(view_channel=True).value)
        channel.overwrites.append({"id": str(channel.guild_id), "type": 0, "allow": "0", "deny": view})
        channel.overwrites.extend({"id": str(reader), "type": 1, "allow": view, "deny": "0"} for reader in readers)

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
        gets its GUILD_CREATE, as when the bot is added to a server: without `unavailable`, since READY did not name
        it (discord.py's `guild_join`).
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
            joined = {key: value for key, value in self._guild_create(guild_id).items() if key != "unavailable"}
            await self._dispatch(session, "GUILD_CREATE", joined)
        return guild_id, channel.id

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

    def session_of(self, shard_id: int) -> Any:
        """Shard `shard_id`'s session now, for `dispatch_on` (it stays open after a session of another shard count
        identifies, as across a reshard, though events no longer go to it by themselves)."""
        return self._sessions[shard_id]

    async def dispatch_on(self, session: Any, event: str, data: dict[str, Any]) -> None:
        """Send a gateway DISPATCH on `session` (`session_of`), whatever server it is of: two processes that both
        serve a server for a while (across a reshard) each get some of its events."""
        if event == "INTERACTION_CREATE":
            self._interactions[data["token"]] = data
        await self._dispatch(session, event, data)

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
        # A deleted message leaves the pins without CHANNEL_PINS_UPDATE, as on Discord.
        channel.pins = {pinned: at for pinned, at in channel.pins.items() if pinned not in message_ids}
        ids = [str(message_id) for message_id in message_ids]
        where = {"channel_id": str(channel_id), "guild_id": str(channel.guild_id)}
        if len(ids) == 1:
            await self.dispatch("MESSAGE_DELETE", {"id": ids[0], **where})
        else:
            await self.dispatch("MESSAGE_DELETE_BULK", {"ids": ids, **where})

    async def pin(self, channel_id: int, message_id: int, *, quietly: bool = False) -> None:
        """Pin a stored message and dispatch CHANNEL_PINS_UPDATE, which says only where pins changed, as Discord's
        (`quietly`: no event, as for a bot that is not connected).

        https://discord.com/developers/docs/events/gateway-events#channel-pins-update
        """
        channel = self._channel(channel_id)
        pinned_at = datetime.now(UTC)
        if channel.pins:
            # Distinct times: the listing pages by them.
            pinned_at = max(pinned_at, max(channel.pins.values()) + timedelta(milliseconds=1))
        channel.pins[message_id] = pinned_at
        self._stored(channel_id, message_id)["pinned"] = True
        if not quietly:
            await self._pins_changed(channel)

    async def unpin(self, channel_id: int, message_id: int, *, quietly: bool = False) -> None:
        """Unpin a message and dispatch CHANNEL_PINS_UPDATE (`quietly`: none)."""
        channel = self._channel(channel_id)
        del channel.pins[message_id]
        self._stored(channel_id, message_id)["pinned"] = False
        if not quietly:
            await self._pins_changed(channel)

    async def _pins_changed(self, channel: FakeChannel) -> None:
        latest = max(channel.pins.values(), default=None)
        await self.dispatch(
            "CHANNEL_PINS_UPDATE",
            {
                "guild_id": str(channel.guild_id),
                "channel_id": str(channel.id),
                "last_pin_timestamp": None if latest is None else latest.isoformat(),
            },
        )

    def _stored(self, channel_id: int, message_id: int) -> dict[str, Any]:
        return next(m for m in self.channels[channel_id].messages if int(m["id"]) == message_id)

    async def force_reconnect(self) -> None:
        """Ask the client to reconnect (op 7), as Discord does before moving a session; it then RESUMEs."""
        if self._session is None:
            raise RuntimeError("no client has identified")
        await self._session.ws.send_str(json.dumps({"op": OP_RECONNECT, "d": None}))

    async def redeliver(self, channel_id: int, message_id: int) -> None:
        """Dispatch a stored message's MESSAGE_CREATE again, as a gateway that delivers at least once may (a resumed
        session replaying what the client had, or a message caught up and then replayed)."""
        await self.dispatch("MESSAGE_CREATE", self._gateway_message(self._stored(channel_id, message_id)))

    async def invalidate_session(self) -> None:
        """Invalidate the client's session (op 9, not resumable), as Discord does when it drops one, and wait until the
        client has closed the connection: what is dispatched from then until it identifies again is lost to it.

        discord.py waits 5 seconds before identifying again (`Client.before_identify_hook`).
        https://discord.com/developers/docs/events/gateway-events#invalid-session
        """
        if self._session is None:
            raise RuntimeError("no client has identified")
        ws = self._session.ws
        await ws.send_str(json.dumps({"op": OP_INVALID_SESSION, "d": False}))
        await self.wait_for(lambda: ws.closed, what="the client to close its invalidated session")

    def release(self, route: str) -> None:
        """Answer the requests of a held route (`held_routes`) from now on, those waiting included."""
        self.held_routes.discard(route)
        self._changed()

    def forget_messages(self, channel_id: int, *message_ids: int) -> None:
        """Remove stored messages without any event, as Discord does for a bot that is not connected."""
        channel = self.channels[channel_id]
        channel.messages = [m for m in channel.messages if int(m["id"]) not in message_ids]
        channel.pins = {pinned: at for pinned, at in channel.pins.items() if pinned not in message_ids}

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
        """Answer the next `count` message POSTs (to `channel_id`, or any channel) with `status` (a 5xx or 429).

        discord.py retries a 429 after `retry_after` seconds, a 500, 502, 504 or 524 after 1 + 2 * attempt seconds,
        five attempts in all (http.HTTPClient.request); any other 5xx (503) it raises at once.
        """
        self._failures.extend(_Failure(status, channel_id, retry_after) for _ in range(count))

    def fail_next_edits(
        self, count: int, *, status: int = 429, channel_id: int | None = None, retry_after: float = 0.05
    ) -> None:
        """Answer the next `count` message PATCHes (to `channel_id`, or any; an interaction's response too) with
        `status`, as `fail_next_posts`."""
        self._edit_failures.extend(_Failure(status, channel_id, retry_after) for _ in range(count))

    def stop_failing(self) -> None:
        """Drop the failures `fail_next_posts` and `fail_next_edits` still have in store: Discord has recovered."""
        self._failures.clear()
        self._edit_failures.clear()

    def new_id(self) -> int:
        """A snowflake for now, after every id issued so far: an interaction made after a message has a later id."""
        return self._next_id()

    # Test API: observing the bot

    def original_response(self, token: str) -> dict[str, Any]:
        """The message an interaction's first response made (as later follow-ups and edits left it)."""
        return self._original_responses[token]

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

    # World payloads
