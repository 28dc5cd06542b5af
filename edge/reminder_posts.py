"""Reminders' way to Discord: whether a reminder's owner may still have it posted (may still use Parley there, see
the channel and post in it, manage its messages for a timed post, and manage the server or the channel for a scheduled
prompt), and the post itself.

The post goes through a partial messageable
(https://discordpy.readthedocs.io/en/stable/api.html#discord.Client.get_partial_messageable), so a channel need not be
in this process's cache, and a reminder set in a DM after a restart still reaches it. Its allowed mentions ping the
owner alone for a reminder and no one for a timed post, whatever the text says
(https://discord.com/developers/docs/resources/message#allowed-mentions-object).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import discord

from admission.access import AccessVerdict, Place
from admission.access_gate import AccessGate
from admission.optout import OptOuts
from archive import Reminder, ReminderLimits
from config import Settings
from conversation import utc_now
from discord_io import may_post, split_message
from edge.arrival import access_place
from reminders.book import ReminderBook
from reminders.scheduler import OwnerUnknown, PostRefused, PromptRunner, ReminderScheduler, TimedWork

# A scheduled prompt's answer is cut after this many posts, as an answer is (MAX_ANSWER_POSTS' default).
PROMPT_MAX_POSTS = 4


class ReminderChannels(Protocol):
    """discord.py's client, as a reminder's delivery calls it: its readiness, its cache, and a channel to post to."""

    async def wait_until_ready(self) -> None: ...

    def get_channel(self, id: int, /) -> discord.abc.Snowflake | None: ...

    def get_guild(self, id: int, /) -> discord.Guild | None: ...

    def get_partial_messageable(
        self, id: int, *, guild_id: int | None = None, type: discord.ChannelType | None = None
    ) -> discord.PartialMessageable: ...


class DiscordReminderPosts:
    """`reminders.scheduler.ReminderPoster` over the discord.py client."""

    def __init__(self, client: ReminderChannels, access: AccessGate, optouts: OptOuts) -> None:
        self.client = client
        self.access = access
        self.optouts = optouts

    async def wait_until_ready(self) -> None:
        await self.client.wait_until_ready()

    async def refusal(self, reminder: Reminder) -> str | None:
        if self.optouts.opted_out(reminder.guild_id, reminder.owner_id):
            return "its owner opted out of Parley in the server"
        verdict = await self._verdict(reminder)
        if not verdict.allowed:
            return f"its owner may not use Parley there now ({verdict.value})"
        found = await self._owner_permissions(reminder)
        if found is None:
            return None
        permissions, in_thread = found
        if not may_post(permissions, in_thread=in_thread):
            return "its owner may not see the channel or post in it now (or left the server, or was banned)"
        if reminder.prompt and not (permissions.manage_guild or permissions.manage_channels):
            return "its owner no longer has Manage Server, or Manage Channels in the channel"
        if reminder.post_here and not reminder.prompt and not permissions.manage_messages:
            return "its owner no longer has Manage Messages in the channel"
        return None

    async def _owner_permissions(self, reminder: Reminder) -> tuple[discord.Permissions, bool] | None:
        """The owner's permissions in the reminder's channel now, as Discord would resolve them (a timeout leaves only
        View Channel and Read Message History: discord.py's `permissions_for`), and whether it is a thread; none
        once they left the server or were banned. None for a DM, or a server or channel not known here: Discord
        refuses a post to a channel that is gone.

        Raises:
            OwnerUnknown: Discord could not say whether the owner is still a member.
        """
        guild = self.client.get_guild(reminder.guild_id)
        channel = None if guild is None else guild.get_channel_or_thread(reminder.channel_id)
        if guild is None or channel is None:
            return None
        in_thread = isinstance(channel, discord.Thread)
        member = guild.get_member(reminder.owner_id)
        if member is None:
            try:
                member = await guild.fetch_member(reminder.owner_id)
            except discord.NotFound:
                return discord.Permissions.none(), in_thread  # no longer a member: left, or banned
            except discord.HTTPException as error:
                raise OwnerUnknown(
                    f"Discord did not say whether user {reminder.owner_id} is a member: {error}"
                ) from None
        return channel.permissions_for(member), in_thread

    async def _verdict(self, reminder: Reminder) -> AccessVerdict:
        access = self.access
        if reminder.guild_id == 0:
            return await access.direct_message_verdict(reminder.owner_id)
        channel = self.client.get_channel(reminder.channel_id)
        place = Place(reminder.channel_id) if channel is None else access_place(channel)
        asker = await access.asker(reminder.guild_id, discord.Object(reminder.owner_id))
        if not asker.roles_known:
            # Discord failed: judging them without their roles could drop the reminder, or post a blocked one's.
            raise OwnerUnknown(f"the roles of user {reminder.owner_id} in server {reminder.guild_id} are unknown")
        return access.server_verdict(reminder.guild_id, place, asker)

    async def post(self, reminder: Reminder, text: str) -> None:
        channel = self.client.get_partial_messageable(reminder.channel_id, guild_id=reminder.guild_id or None)
        if reminder.post_here:
            mentions = discord.AllowedMentions.none()
        else:
            owner = discord.Object(reminder.owner_id)
            mentions = discord.AllowedMentions(everyone=False, roles=False, users=[owner])
        try:
            # A reminder's text fits one post (reminders/book.py); a scheduled prompt's answer may take a few.
            for part in split_message(text, max_posts=PROMPT_MAX_POSTS):
                await channel.send(part, allowed_mentions=mentions)
        except (discord.Forbidden, discord.NotFound) as error:
            gone = isinstance(error, discord.NotFound)  # a Forbidden may pass: an admin can give the permission back
            raise PostRefused(f"{type(error).__name__}: {error.text or error.status}", gone=gone) from None


def reminder_scheduler(
    client: ReminderChannels,
    access: AccessGate,
    settings: Settings,
    optouts: OptOuts,
    prompts: PromptRunner | None = None,
    timed_work: Sequence[TimedWork] = (),
) -> ReminderScheduler:
    """The client's reminders: their book (the rules) and the task that posts this process's shards' ones, and the
    answers of their scheduled prompts (`prompts`)."""
    limits = ReminderLimits(settings.reminders_per_member, settings.reminders_per_server)
    book = ReminderBook(limits, settings.zone, optouts, utc_now)
    shards = None if not settings.shard_ids else (settings.shard_count or 1, settings.shard_ids)
    posts = DiscordReminderPosts(client, access, optouts)
    return ReminderScheduler(book, posts, shards, prompts=prompts, timed_work=timed_work)
