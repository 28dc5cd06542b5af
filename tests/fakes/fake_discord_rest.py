"""The fake Discord's REST routes: messages, threads, interactions, commands and files."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote

from aiohttp import BodyPartReader, web

from tests.fakes.fake_discord_gateway import GatewaySessions
from tests.fakes.fake_discord_state import (
    _ROLE_MENTION,
    API_PREFIX,
    APPLICATION_ID,
    BOT_ID,
    BOT_PERMISSIONS,
    CALLBACK_DEFERRED_CHANNEL_MESSAGE,
    CALLBACK_MODAL,
    CALLBACK_TYPES_WITH_MESSAGE,
    CALLBACK_UPDATE_MESSAGE,
    CHANNEL_ID,
    EPHEMERAL_FLAG,
    INTERACTION_MODAL_SUBMIT,
    LOADING_FLAG,
    MAX_CONTENT_LENGTH,
    MESSAGE_TYPE_CHAT_INPUT_COMMAND,
    Edit,
    FakeChannel,
    InteractionCall,
    Post,
    RecordedRequest,
    TypingEvent,
    _error,
    _Failure,
    _Handler,
    _invalid_form_body,
    _json_response,
    iso_timestamp,
)

_log = logging.getLogger("fake_discord")


class RestRoutes(GatewaySessions):
    """The REST API's routes."""

    def _add_routes(self, router: web.UrlDispatcher) -> None:
        api: list[tuple[str, str, _Handler]] = [
            ("GET", "/users/@me", self._get_me),
            ("GET", "/users/@me/guilds", self._get_my_guilds),
            ("DELETE", "/users/@me/guilds/{guild_id}", self._leave_guild),
            ("GET", "/oauth2/applications/@me", self._get_application),
            ("GET", "/channels/{channel_id}", self._get_channel),
            ("GET", "/channels/{channel_id}/messages", self._get_messages),
            ("GET", "/channels/{channel_id}/threads/archived/public", self._get_public_archived_threads),
            (
                "GET",
                "/channels/{channel_id}/users/@me/threads/archived/private",
                self._get_joined_private_archived_threads,
            ),
            # Before /messages/{message_id}, which would take "pins" for a message id.
            ("GET", "/channels/{channel_id}/messages/pins", self._get_pins),
            ("PUT", "/channels/{channel_id}/messages/pins/{message_id}", self._pin),
            ("DELETE", "/channels/{channel_id}/messages/pins/{message_id}", self._pin),
            ("PATCH", "/channels/{channel_id}", self._patch_channel),
            ("POST", "/channels/{channel_id}/threads", self._start_thread),
            ("GET", "/channels/{channel_id}/messages/{message_id}", self._get_message),
            ("POST", "/channels/{channel_id}/messages", self._post_message),
            ("PATCH", "/channels/{channel_id}/messages/{message_id}", self._patch_message),
            ("DELETE", "/channels/{channel_id}/messages/{message_id}", self._delete_message),
            ("POST", "/channels/{channel_id}/typing", self._post_typing),
            ("POST", "/channels/{channel_id}/messages/{message_id}/threads", self._start_thread_from_message),
            ("GET", "/guilds/{guild_id}", self._get_guild),
            ("GET", "/guilds/{guild_id}/members/{user_id}", self._get_member),
            ("PATCH", "/guilds/{guild_id}/members/{user_id}", self._patch_member),
            ("POST", "/users/@me/channels", self._create_dm),
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
            router.add_route(method, API_PREFIX + path, self._unless_held(f"{method} {path}", handler))
        router.add_get("/gateway", self._gateway)
        router.add_get("/cdn/attachments/{attachment_id}/{filename}", self._get_cdn_file)
        router.add_route("*", "/{tail:.*}", self._unknown)

    def _unless_held(self, route: str, handler: _Handler) -> _Handler:
        """`handler`, unless the test holds `route` ("GET /users/@me"): then no answer until the test releases it
        (`release`) or the fake closes; or unless it fails it (`failing_routes`): then a 403, which discord.py
        raises at once (a 5xx it would try again for ~25 s)."""

        async def answer(request: web.Request) -> web.StreamResponse:
            if route in self.failing_routes:
                return _error(403, "Missing Access", 50001)
            if route in self.held_routes:
                self.reached_held_routes.append(route)
                self._changed()
                # A Discord that does not answer (until `release`); the runner's cleanup cancels the wait.
                while route in self.held_routes:
                    await self._change.wait()
            return await handler(request)

        return answer

    @web.middleware
    async def _record(self, request: web.Request, handler: _Handler) -> web.StreamResponse:
        reason = request.headers.get("X-Audit-Log-Reason")
        if reason is not None:
            self.audit_reasons.append((f"{request.method} {request.path}", unquote(reason)))
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

    async def _get_my_guilds(self, request: web.Request) -> web.Response:
        """The bot's servers, by id, after `after`, at most `limit` (partial guild objects).
        https://discord.com/developers/docs/resources/user#get-current-user-guilds"""
        after, limit = int(request.query.get("after") or 0), int(request.query.get("limit") or 200)
        found = sorted(guild_id for guild_id in self.guilds if guild_id > after)[:limit]
        return _json_response([self._partial_guild(guild_id) for guild_id in found])

    async def _leave_guild(self, request: web.Request) -> web.Response:
        """The bot leaves a server: no longer one of its servers, and the server's session gets GUILD_DELETE.
        https://discord.com/developers/docs/resources/user#leave-guild"""
        guild_id = int(request.match_info["guild_id"])
        if guild_id not in self.guilds:
            return _error(404, "Unknown Guild", 10004)
        session = self._session_for(guild_id)
        del self.guilds[guild_id]
        self.left_guilds.append(guild_id)
        if session is not None:
            await self._dispatch(session, "GUILD_DELETE", {"id": str(guild_id)})
        return web.Response(status=204)

    def _partial_guild(self, guild_id: int) -> dict[str, Any]:
        permissions = str(BOT_PERMISSIONS.value)
        return {"id": str(guild_id), "name": self.guilds[guild_id], "icon": None, "banner": None, "owner": False,
                "permissions": permissions, "features": []}  # fmt: skip

    async def _get_member(self, request: web.Request) -> web.Response:
        """A server's member: every user of the fake is in every server, until they part, but those a test took
        out (`absent_members`). https://discord.com/developers/docs/resources/guild#get-guild-member"""
        guild_id, user_id = int(request.match_info["guild_id"]), int(request.match_info["user_id"])
        user = self.users.get(user_id)
        departed = user_id in self.departed or (guild_id, user_id) in self.absent_members
        if guild_id not in self.guilds or user is None or departed:
            return _error(404, "Unknown Member", 10007)
        return _json_response({"user": user.payload(), **user.member_payload()})

    async def _patch_member(self, request: web.Request) -> web.Response:
        """Modify a member: a timeout sets (or, null, ends) `communication_disabled_until`; the edit is kept in
        `member_edits`. https://discord.com/developers/docs/resources/guild#modify-guild-member"""
        guild_id, user_id = int(request.match_info["guild_id"]), int(request.match_info["user_id"])
        user = self.users.get(user_id)
        if guild_id not in self.guilds or user is None or user_id in self.departed:
            return _error(404, "Unknown Member", 10007)
        body = await request.json()
        self.member_edits.append((guild_id, user_id, body))
        if "communication_disabled_until" in body:
            user = dataclasses.replace(user, timed_out_until=body["communication_disabled_until"])
            self.users[user_id] = user
        member = {"user": user.payload(), **user.member_payload(), "guild_id": str(guild_id)}
        await self._route("GUILD_MEMBER_UPDATE", member)
        return _json_response(member)

    async def _create_dm(self, request: web.Request) -> web.Response:
        """Open (or find) the direct message channel with a user. https://discord.com/developers/docs/resources/user#create-dm"""
        recipient = int((await request.json())["recipient_id"])
        if recipient not in self.users:
            return _error(404, "Unknown User", 10013)
        return _json_response(self.channels[self.dm_channel(recipient)].payload())

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

    async def _get_public_archived_threads(self, request: web.Request) -> web.Response:
        """A channel's archived public threads, newest archived first, archived before `before` (ISO 8601).

        https://discord.com/developers/docs/resources/channel#list-public-archived-threads
        """
        limit = int(request.query.get("limit", 50))
        before = datetime.fromisoformat(request.query["before"]) if "before" in request.query else None
        threads = sorted(
            (
                thread.payload()
                for thread in self.channels.values()
                if thread.parent_id == int(request.match_info["channel_id"]) and thread.archived and not thread.private
            ),
            key=_archived_at,
            reverse=True,
        )
        if before is not None:
            threads = [thread for thread in threads if _archived_at(thread) < before]
        return _json_response({"threads": threads[:limit], "members": [], "has_more": len(threads) > limit})

    async def _get_joined_private_archived_threads(self, request: web.Request) -> web.Response:
        """A channel's archived private threads the bot is a member of, newest first, older than the thread `before`.

        https://discord.com/developers/docs/resources/channel#list-joined-private-archived-threads
        """
        limit = int(request.query.get("limit", 50))
        before = int(request.query.get("before", 2**63))
        threads = [
            thread.payload()
            for thread in sorted(self.channels.values(), key=lambda channel: channel.id, reverse=True)
            if thread.parent_id == int(request.match_info["channel_id"])
            and thread.archived
            and thread.private
            and BOT_ID in thread.member_ids
            and thread.id < before
        ]
        return _json_response({"threads": threads[:limit], "members": [], "has_more": len(threads) > limit})

    async def _get_pins(self, request: web.Request) -> web.Response:
        """A page of a channel's pinned messages, newest pin first, pinned before `before` (ISO 8601).

        https://discord.com/developers/docs/resources/message#get-channel-pins
        """
        channel = self._channel_or_none(request)
        if channel is None:
            return _error(404, "Unknown Channel", 10003)
        status = self.pin_failures.get(channel.id)
        if status == 403:
            return _error(403, "Missing Access", 50001)
        if status is not None:
            return _error(status, f"{status}: Internal Server Error")
        limit = max(1, min(int(request.query.get("limit", 50)), 50))
        before = datetime.fromisoformat(request.query["before"]) if "before" in request.query else None
        pins = sorted(channel.pins.items(), key=lambda pin: pin[1], reverse=True)
        if before is not None:
            pins = [(message_id, at) for message_id, at in pins if at < before]
        items = [{"pinned_at": at.isoformat(), "message": channel.find(message_id)} for message_id, at in pins[:limit]]
        return _json_response({"items": items, "has_more": len(pins) > limit})

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
        if body.get("embeds"):
            message["embeds"] = body["embeds"]
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
        body, files = await _read_message_body(request)
        content = body.get("content", message["content"]) or ""
        if len(content) > MAX_CONTENT_LENGTH:
            return _invalid_form_body("content", f"Must be {MAX_CONTENT_LENGTH} or fewer in length.")
        message["content"] = content
        message["edited_timestamp"] = datetime.now(UTC).isoformat()
        if "components" in body:
            message["components"] = body["components"] or []
        if "attachments" in body:
            # The attachments the edit lists by id stay; its files are added.
            # https://discord.com/developers/docs/resources/message#edit-message-jsonform-params
            kept = {str(attachment.get("id")) for attachment in body["attachments"]}
            message["attachments"] = [
                *(attachment for attachment in message.get("attachments", []) if attachment["id"] in kept),
                *(self._attachment(name, data) for name, data in files),
            ]
        if "embeds" in body:
            message["embeds"] = body["embeds"] or []
        # Who is listed as mentioned follows the new text, within the edit's allowed_mentions.
        mentioned = self._pinged_users(content, (), body.get("allowed_mentions") or {"parse": []}, None)
        message["mentions"] = [self.users[user_id].payload() for user_id in mentioned]
        message["mention_roles"] = _ROLE_MENTION.findall(content)
        self.edits.append(Edit(channel.id, int(message["id"]), body, asyncio.get_running_loop().time(), tuple(files)))
        await self._route("MESSAGE_UPDATE", self._gateway_message(message))
        return _json_response(message)

    async def _delete_message(self, request: web.Request) -> web.Response:
        channel = self._channel_or_none(request)
        message_id = int(request.match_info["message_id"])
        if channel is None or channel.find(message_id) is None:
            return _error(404, "Unknown Message", 10008)
        channel.messages = [m for m in channel.messages if int(m["id"]) != message_id]
        channel.pins.pop(message_id, None)
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

    async def _pin(self, request: web.Request) -> web.Response:
        """Pin (PUT) or unpin (DELETE) a message of the channel; CHANNEL_PINS_UPDATE follows.
        https://discord.com/developers/docs/resources/message#pin-message"""
        channel = self._channel_or_none(request)
        message_id = int(request.match_info["message_id"])
        if channel is None or channel.find(message_id) is None:
            return _error(404, "Unknown Message", 10008)
        if request.method == "PUT":
            channel.pins[message_id] = datetime.now(UTC)
        else:
            channel.pins.pop(message_id, None)
        await self._pins_changed(channel)
        return web.Response(status=204)

    async def _pins_changed(self, channel: FakeChannel) -> None:
        latest = max(channel.pins.values(), default=None)
        await self._route(
            "CHANNEL_PINS_UPDATE",
            {
                "guild_id": str(channel.guild_id),
                "channel_id": str(channel.id),
                "last_pin_timestamp": None if latest is None else latest.isoformat(),
            },
        )

    async def _patch_channel(self, request: web.Request) -> web.Response:
        """Modify a channel: its slowmode (`rate_limit_per_user`, 0 to 21600); CHANNEL_UPDATE follows.
        https://discord.com/developers/docs/resources/channel#modify-channel"""
        channel = self._channel_or_none(request)
        if channel is None:
            return _error(404, "Unknown Channel", 10003)
        body = await request.json()
        if "rate_limit_per_user" in body:
            seconds = int(body["rate_limit_per_user"])
            if not 0 <= seconds <= 21600:
                return _invalid_form_body("rate_limit_per_user", "Must be between 0 and 21600.")
            channel.rate_limit_per_user = seconds
        await self._route("THREAD_UPDATE" if channel.parent_id is not None else "CHANNEL_UPDATE", channel.payload())
        return _json_response(channel.payload())

    async def _start_thread(self, request: web.Request) -> web.Response:
        """Start a thread on no message, in a text channel; THREAD_CREATE follows.
        https://discord.com/developers/docs/resources/channel#start-thread-without-message"""
        channel = self._channel_or_none(request)
        if channel is None or channel.parent_id is not None or channel.recipient_id is not None:
            return _error(404, "Unknown Channel", 10003)
        body = await request.json()
        name = body.get("name") or ""
        if not 1 <= len(name) <= 100:
            return _invalid_form_body("name", "Must be between 1 and 100 in length.")
        thread = FakeChannel(
            self._next_id(), name, 0, parent_id=channel.id, owner_id=BOT_ID, guild_id=channel.guild_id,
            private=body.get("type") == 12,
        )  # fmt: skip
        thread.member_ids = {BOT_ID}
        self.channels[thread.id] = thread
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
        body, files = await _read_message_body(request)
        token = request.match_info["token"]
        self.interaction_calls.append(InteractionCall(request.method, request.path_qs, body, tuple(files)))
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
        invalid = _invalid_embeds(data)
        if invalid is not None:
            return invalid
        if callback_type == CALLBACK_MODAL:
            problem = _invalid_modal(data, interaction)
            if problem is not None:
                return problem
            self.modals[token] = data
        elif callback_type == CALLBACK_UPDATE_MESSAGE and "message" in interaction:
            # A component's UPDATE_MESSAGE edits the message the component is on, as an edit by the bot would.
            response["resource"]["message"] = await self._update_component_message(interaction, data)
        elif callback_type in CALLBACK_TYPES_WITH_MESSAGE:
            message = self._interaction_message(token, data, files)
            self._original_responses[token] = message
            response["interaction"]["response_message_id"] = message["id"]
            response["resource"]["message"] = message
            await self._publish(message)
        elif callback_type == CALLBACK_DEFERRED_CHANNEL_MESSAGE:
            # The response exists from now on, "thinking…" (LOADING) until it is edited; the callback's answer does
            # not carry it.
            message = self._interaction_message(token, {"flags": data.get("flags", 0) | LOADING_FLAG})
            self._original_responses[token] = message
            await self._publish(message)
        return _json_response(response)

    async def _publish(self, message: dict[str, Any]) -> None:
        """An interaction's response or follow-up that is not ephemeral is a message of its channel, as on Discord:
        stored there, and its MESSAGE_CREATE sent. An ephemeral one is never in the channel."""
        if message["flags"] & EPHEMERAL_FLAG:
            return
        channel = self._channel(int(message["channel_id"]))
        channel.messages.append(message)
        await self._route("MESSAGE_CREATE", self._gateway_message(message))

    async def _update_component_message(self, interaction: dict[str, Any], data: dict[str, Any]) -> dict[str, Any]:
        """The message a pressed component is on, changed as UPDATE_MESSAGE's `data` says.

        https://discord.com/developers/docs/interactions/receiving-and-responding#interaction-response-object-interaction-callback-type
        """
        channel = self._channel(int(interaction["channel_id"]))
        message = channel.find(int(interaction["message"]["id"]))
        if message is None:
            return dict(interaction["message"])
        if "content" in data:
            message["content"] = data["content"] or ""
        if "components" in data:
            message["components"] = data["components"] or []
        message["edited_timestamp"] = datetime.now(UTC).isoformat()
        self.edits.append(Edit(channel.id, int(message["id"]), data, asyncio.get_running_loop().time()))
        await self._route("MESSAGE_UPDATE", self._gateway_message(message))
        return message

    def _interaction_message(
        self, token: str, data: dict[str, Any], files: list[tuple[str, bytes]] | None = None
    ) -> dict[str, Any]:
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
            "attachments": [self._attachment(name, content) for name, content in files or []],
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
        body, files = (None, []) if request.method == "GET" else await _read_message_body(request)
        token = request.match_info["token"]
        self.interaction_calls.append(InteractionCall(request.method, request.path_qs, body, tuple(files)))
        self._changed()
        invalid = _invalid_embeds(body or {})
        if invalid is not None:
            return invalid
        if request.method == "POST":
            message = self._interaction_message(token, body or {}, files)
            await self._publish(message)
            return _json_response(message)
        if request.method == "PATCH":
            original = self._original_responses.get(token)
            failure = _take(self._edit_failures, int(original["channel_id"])) if original is not None else None
            if failure is not None:
                return self._failure_response(failure)
            await self._edit_original(token, body or {})
        if token not in self._original_responses:
            return _error(404, "Unknown Message", 10008)
        return _json_response(self._original_responses[token])

    async def _edit_original(self, token: str, body: dict[str, Any]) -> None:
        """Edit the @original response (made now if the interaction had none): in place, so the channel's copy of a
        public one changes too, which MESSAGE_UPDATE then says; an edit ends its "thinking…"."""
        original = self._original_responses.get(token)
        if original is None:
            original = self._original_responses[token] = self._interaction_message(token, {})
        original.update(body)
        original["flags"] = original.get("flags", 0) & ~LOADING_FLAG
        channel = self._channel(int(original["channel_id"]))
        if channel.find(int(original["id"])) is not None:
            original["edited_timestamp"] = datetime.now(UTC).isoformat()
            await self._route("MESSAGE_UPDATE", self._gateway_message(original))

    async def _webhook_delete(self, request: web.Request) -> web.Response:
        self.interaction_calls.append(InteractionCall(request.method, request.path_qs, None))
        original = self._original_responses.pop(request.match_info["token"], None)
        self._changed()
        if original is not None:
            await self._unpublish(original)
        return web.Response(status=204)

    async def _unpublish(self, message: dict[str, Any]) -> None:
        """A public response deleted leaves its channel, which MESSAGE_DELETE says."""
        channel = self._channel(int(message["channel_id"]))
        if channel.find(int(message["id"])) is None:
            return
        channel.messages = [kept for kept in channel.messages if kept["id"] != message["id"]]
        where = {"id": message["id"], "channel_id": str(channel.id)}
        if channel.recipient_id is None:
            where["guild_id"] = str(channel.guild_id)
        await self._route("MESSAGE_DELETE", where)

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


def _archived_at(thread: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(thread["thread_metadata"]["archive_timestamp"])


def _take(failures: list[_Failure], channel_id: int) -> _Failure | None:
    """The first scripted failure for `channel_id` (or any channel), removed from `failures`."""
    for index, failure in enumerate(failures):
        if failure.channel_id in (None, channel_id):
            return failures.pop(index)
    return None


# https://discord.com/developers/docs/resources/message#embed-object-embed-limits
_EMBED_LIMITS = {"title": 256, "description": 4096, "fields": 25, "field name": 256, "field value": 1024}
_EMBED_TOTAL_MAX = 6000
_EMBEDS_PER_MESSAGE = 10


def _invalid_embeds(data: dict[str, Any]) -> web.Response | None:
    """Discord's refusal of a message whose embeds break its limits, or None when they keep them."""
    embeds: list[dict[str, Any]] = data.get("embeds") or []
    problems = [f"{len(embeds)} embeds"] if len(embeds) > _EMBEDS_PER_MESSAGE else []
    total = 0
    for embed in embeds:
        fields = embed.get("fields") or []
        sizes = {
            "title": len(embed.get("title") or ""),
            "description": len(embed.get("description") or ""),
            "fields": len(fields),
            "field name": max((len(field["name"]) for field in fields), default=0),
            "field value": max((len(field["value"]) for field in fields), default=0),
        }
        problems += [f"{part} {size}" for part, size in sizes.items() if size > _EMBED_LIMITS[part]]
        problems += ["an empty field" for field in fields if not field["name"] or not field["value"]]
        total += sizes["title"] + sizes["description"] + len((embed.get("footer") or {}).get("text") or "")
        total += sum(len(field["name"]) + len(field["value"]) for field in fields)
    if total > _EMBED_TOTAL_MAX:
        problems.append(f"{total} characters in all")
    return _invalid_form_body("embeds", ", ".join(problems)) if problems else None


# https://discord.com/developers/docs/interactions/receiving-and-responding#interaction-response-object-modal and
# https://discord.com/developers/docs/components/reference#label
_MODAL_TITLE_MAX = 45
_CUSTOM_ID_MAX = 100
_MODAL_COMPONENTS_MAX = 5
_LABEL_TEXT_MAX = 45
_LABEL_DESCRIPTION_MAX = 100
_TEXT_INPUT_MAX = 4000
_SELECT_OPTIONS_MAX = 25
COMPONENT_ACTION_ROW, COMPONENT_STRING_SELECT, COMPONENT_TEXT_INPUT, COMPONENT_LABEL = 1, 3, 4, 18


def _invalid_modal(data: dict[str, Any], interaction: dict[str, Any]) -> web.Response | None:
    """Discord's refusal of a MODAL response that breaks its rules, or None when it keeps them.

    A modal answers an application command or a component, never another modal's submission; it holds 1 to 5
    top-level components, each a Label around one input (a text input or a string select) here.
    """
    if interaction.get("type") == INTERACTION_MODAL_SUBMIT:
        return _error(400, "Interaction callback type 9 is not valid for a modal submission", 50035)
    components: list[dict[str, Any]] = data.get("components") or []
    problems = []
    if not 1 <= len(data.get("title") or "") <= _MODAL_TITLE_MAX:
        problems.append("title length")
    if not 1 <= len(data.get("custom_id") or "") <= _CUSTOM_ID_MAX:
        problems.append("custom_id length")
    if not 1 <= len(components) <= _MODAL_COMPONENTS_MAX:
        problems.append(f"{len(components)} components")
    for component in components:
        problems += _label_problems(component)
    return _invalid_form_body("data", ", ".join(problems)) if problems else None


def _label_problems(label: dict[str, Any]) -> list[str]:
    if label.get("type") != COMPONENT_LABEL:
        return [f"top-level component type {label.get('type')} (this fake takes Labels)"]
    problems = []
    if not 1 <= len(label.get("label") or "") <= _LABEL_TEXT_MAX:
        problems.append("label length")
    if len(label.get("description") or "") > _LABEL_DESCRIPTION_MAX:
        problems.append("label description length")
    inner = label.get("component") or {}
    if not 1 <= len(inner.get("custom_id") or "") <= _CUSTOM_ID_MAX:
        problems.append("input custom_id length")
    if inner.get("type") == COMPONENT_TEXT_INPUT:
        if inner.get("label"):  # discord.py sends null, which Discord takes as none
            problems.append("a text input in a Label has no label of its own")
        if not 1 <= inner.get("max_length", _TEXT_INPUT_MAX) <= _TEXT_INPUT_MAX:
            problems.append("text input max_length")
    elif inner.get("type") == COMPONENT_STRING_SELECT:
        if not 1 <= len(inner.get("options") or []) <= _SELECT_OPTIONS_MAX:
            problems.append("select options")
    else:
        problems.append(f"input type {inner.get('type')}")
    return problems


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
