"""The fake Discord's gateway: sessions, IDENTIFY and RESUME, each server's events sent to its shard."""

from __future__ import annotations

import contextlib
import json
import logging
import uuid
from typing import Any

from aiohttp import WSMsgType, web

from tests.fakes.fake_discord_state import (
    GUILD_ID,
    HEARTBEAT_INTERVAL_MS,
    OP_DISPATCH,
    OP_HEARTBEAT,
    OP_HEARTBEAT_ACK,
    OP_HELLO,
    OP_IDENTIFY,
    OP_INVALID_SESSION,
    OP_REQUEST_GUILD_MEMBERS,
    OP_RESUME,
    _Session,
    _snowflakes,
)
from tests.fakes.fake_discord_world import WorldPayloads

_log = logging.getLogger("fake_discord")


class GatewaySessions(WorldPayloads):
    """The gateway's websocket sessions."""

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
            self._changed()  # `wait_for` may be waiting for the connection to close
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
        # A new shard count is a reshard: the sessions of the old count are over (unless they overlap a while).
        self._sessions = {
            shard_id: other
            for shard_id, other in self._sessions.items()
            if other.shard_count == session.shard_count or self.reshard_overlap
        }
        self._sessions[session.shard_id] = self._session = session
        await self._dispatch(session, "READY", self._ready(session))
        for guild_id in self._guilds_of(session):
            await self._dispatch(session, "GUILD_CREATE", self._guild_create(guild_id))
        session.ready = True
        self._changed()

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
        guild_id = self._guild_of(event, data)
        if self.reshard_overlap and guild_id is not None:
            # Each shard count's session of the server's shard hears it, as while a reshard overlaps.
            for serving in list(self._sessions.values()):
                if self.shard_of(guild_id, serving.shard_count) == serving.shard_id:
                    await self._dispatch(serving, event, data)
            return
        session = self._session_for(guild_id)
        if session is not None:
            await self._dispatch(session, event, data)

    async def _resume(self, ws: web.WebSocketResponse, data: dict[str, Any]) -> None:
        """Replay the dispatches the client missed, then RESUMED; an unknown session is invalidated.

        https://discord.com/developers/docs/events/gateway#resuming
        """
        session = next((s for s in self._sessions.values() if s.id == data.get("session_id")), None)
        if session is None or data.get("token") != self.token or self.refuse_resumes:
            await ws.send_str(json.dumps({"op": OP_INVALID_SESSION, "d": False}))
            return
        self.resumes.append(data)
        last_seen = (data.get("seq") or 0) - self.resume_replays_seen
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
            if user.id not in self.departed
            and (user.id in wanted if wanted else user.username.lower().startswith(query))
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
