"""The fake Discord's world as gateway and REST payloads: servers, roles, channels, messages, history."""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping
from typing import Any

from tests.fakes.fake_discord_state import (
    _ROLE_MENTION,
    _USER_MENTION,
    ALICE_ID,
    APPLICATION_ID,
    BOT_ID,
    BOT_PERMISSIONS,
    BOT_ROLE_ID,
    EVERYONE_PERMISSIONS,
    GUILD_ID,
    MESSAGE_TYPE_DEFAULT,
    MESSAGE_TYPE_REPLY,
    NEWCOMER_ROLE_ID,
    OTHER_BOT_ID,
    OTHER_BOT_ROLE_ID,
    FakeChannel,
    FakeDiscordState,
    _Session,
    _snowflakes,
    iso_timestamp,
)


class WorldPayloads(FakeDiscordState):
    """Servers, roles, channels and messages as Discord's payloads."""

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
            "colors": {"primary_color": self.bot_role_colour},
        }
        other_bot_role = {
            **bot_role,
            "colors": {"primary_color": 0},
            "id": str(OTHER_BOT_ROLE_ID),
            "name": "Other Bot",
            "position": 2,
            "tags": {"bot_id": str(OTHER_BOT_ID)},
        }
        newcomers = {
            **base,
            "id": str(NEWCOMER_ROLE_ID),
            "name": "Newcomers",
            "position": 3,
            "managed": False,
            "permissions": "0",
        }
        added = [self.role_payload(role_id) for role_id in self.roles] if guild_id == GUILD_ID else []
        return [everyone, bot_role, other_bot_role, newcomers, *added]

    def role_payload(self, role_id: int) -> dict[str, Any]:
        """A role a test added (`add_role`), as Discord's role object: no permissions of its own."""
        return {
            "id": str(role_id),
            "name": self.roles[role_id],
            "colors": {"primary_color": 0},
            "hoist": False,
            "mentionable": False,
            "flags": 0,
            "position": 4 + list(self.roles).index(role_id),
            "managed": False,
            "permissions": "0",
        }

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
        members = [
            {"user": user.payload(), **user.member_payload()}
            for user in self.users.values()
            if user.id not in self.departed
        ]
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
            "bot_public": self.bot_public,
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
