"""A case card's buttons pressed: the case checked (this server's, this card's, open), the permissions checked, the
action done and recorded, the card updated, and one private line to the presser.

Staff in the loop: Parley deletes, times out and warns only on a moderator's press, never on the model's reading.
A press works only for a member holding the permission its action needs in the reported message's channel
(`NEEDED`), and only if Parley holds it there too (`PARLEY_NEEDS`); otherwise one private line names what is
missing and nothing changes. Every press that does something is kept (`ModerationLog.record_action`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime

import discord

from archive import ArchiveWriteFailed
from moderation.cards import DELETE, DISMISS, TIMEOUT, TIMEOUTS, WARN, jump_url, timeout_of
from moderation.desk import ModerationDesk, ModerationStores
from records import ModerationAction, ModerationCase

log = logging.getLogger("parley.moderation")

# What a moderator pressing a card's button is told, in one private line.
NOT_A_CASE = "This is not a case of this server's; nothing changed."
CLOSED = "This case is closed; nothing changed."
ACTION_FAILED = "Discord refused: {why}; nothing changed."
ARCHIVE_FAILED = "It was done, but the archive could not record it; the details are in Parley's log."

# The permission each action needs of the member who presses its button, in the reported message's channel, and
# of Parley where it does the action itself (a warning is a direct message, a dismissal an edit of its own card).
NEEDED = {DELETE: "manage_messages", TIMEOUT: "moderate_members", WARN: "moderate_members", DISMISS: "manage_messages"}
PARLEY_NEEDS = {DELETE: "manage_messages", TIMEOUT: "moderate_members"}
VERBS = {DELETE: "delete it", TIMEOUT: "time its author out", WARN: "warn its author", DISMISS: "dismiss it"}
DONE_LINES = {
    DELETE: "Deleted the message.",
    TIMEOUT: "Timed {who} out for {detail}.",
    WARN: "Warned {who} in a direct message.",
    DISMISS: "Closed the case.",
}
WARNING = (
    "A warning from the moderators of **{server}**: your message in <#{channel}> ({link}) breaks {rule}."
    " Please keep to the server's rules."
)


class CaseActions:
    """What a card's buttons do (cards.py's `CaseButton` asks the client's `case_actions`)."""

    def __init__(
        self,
        stores: ModerationStores,
        desk: ModerationDesk,
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.stores = stores
        self.desk = desk
        self.clock = clock

    async def pressed(self, interaction: discord.Interaction, case_id: int, action: str) -> None:
        """A card's button pressed: checked (the case, this server's and open; the permissions), then done, recorded,
        and the card updated; one private line to the presser either way."""
        case = await self.stores.archive.moderation_case(case_id)
        guild, member, card = interaction.guild, interaction.user, interaction.message
        if (
            case is None
            or guild is None
            or not isinstance(member, discord.Member)
            or case.guild_id != guild.id
            or card is None
            or case.card_message_id != card.id
        ):
            await interaction.response.send_message(NOT_A_CASE, ephemeral=True)
            return
        if not case.is_open:
            await interaction.response.send_message(CLOSED, ephemeral=True)
            return
        kind = action.partition("-")[0]
        channel = guild.get_channel_or_thread(case.channel_id)
        missing = missing_permission(kind, channel, member, guild.me, case.channel_id)
        if missing is not None:
            await interaction.response.send_message(missing, ephemeral=True)
            return
        await interaction.response.defer(ephemeral=True, thinking=True)
        line = await self._act(kind, action, case, guild, channel, member)
        await interaction.followup.send(line, ephemeral=True)
        await self.desk.refresh_card(case.id)

    async def _act(
        self,
        kind: str,
        action: str,
        case: ModerationCase,
        guild: discord.Guild,
        channel: object,
        moderator: discord.Member,
    ) -> str:
        """Do `action` on the case; the line telling the moderator what was done, or why nothing was."""
        archive = self.stores.archive
        now = self.clock()
        detail = ""
        try:
            if kind == DISMISS:
                if not await archive.close_case(case.id, moderator.id, now):
                    return CLOSED
            elif kind == DELETE:
                assert isinstance(channel, discord.TextChannel | discord.Thread | discord.VoiceChannel)
                await channel.get_partial_message(case.message_id).delete()
                detail = f"message {case.message_id}"
            elif kind == TIMEOUT:
                duration = timeout_of(action)
                assert duration is not None  # the button's template takes only the card's durations
                author = guild.get_member(case.author_id) or await guild.fetch_member(case.author_id)
                await author.timeout(duration, reason=f"Case #{case.id}, by {moderator} ({moderator.id})")
                detail = TIMEOUTS[int(duration.total_seconds())]
            else:
                author = guild.get_member(case.author_id) or await guild.fetch_member(case.author_id)
                await author.send(warning(guild, case), allowed_mentions=discord.AllowedMentions.none())
                detail = case.rule or "the server's rules"
        except discord.NotFound:
            return ACTION_FAILED.format(why="the message or the member is gone")
        except discord.Forbidden:
            return ACTION_FAILED.format(why=FORBIDDEN[kind])
        except discord.HTTPException as error:
            log.warning("case %s: %s failed: %s", case.id, action, error)
            return ACTION_FAILED.format(why=f"{error.status} {error.text or 'error'}")
        done = ModerationAction(
            case.guild_id, case.channel_id, kind, moderator.id, None, case.author_id,
            case.message_id if kind == DELETE else None, detail, case.id, now,
        )  # fmt: skip
        try:
            await archive.record_action(done)
        except ArchiveWriteFailed:
            log.exception("case %s: %s was done but not recorded", case.id, action)
            return ARCHIVE_FAILED
        return DONE_LINES[kind].format(who=f"<@{case.author_id}>", detail=detail)


FORBIDDEN = {
    DELETE: "Parley may not delete that message",
    TIMEOUT: "Parley may not time that member out (they may be an admin, or above Parley's role)",
    WARN: "that member does not take direct messages from Parley",
    DISMISS: "Parley may not edit its card",
}


def missing_permission(
    kind: str, channel: object, member: discord.Member, own: discord.Member, channel_id: int
) -> str | None:
    """The line naming what is missing for `kind` in the reported message's channel (the member's permission, then
    Parley's); None when both hold it. A channel that is gone holds no permission."""
    needed = NEEDED[kind]
    name = needed.replace("_", " ").title()
    if not isinstance(channel, discord.abc.GuildChannel | discord.Thread):
        return f"The reported message's channel is gone, so no one may {VERBS[kind]} here; nothing changed."
    if not getattr(channel.permissions_for(member), needed):
        return f"You need the {name} permission in <#{channel_id}> to {VERBS[kind]}; nothing changed."
    parley_needs = PARLEY_NEEDS.get(kind)
    if parley_needs is not None and not getattr(channel.permissions_for(own), parley_needs):
        return f"Parley needs the {name} permission in <#{channel_id}> to {VERBS[kind]}; nothing changed."
    return None


def warning(guild: discord.Guild, case: ModerationCase) -> str:
    """The direct message a warning sends, in the server's name, quoting the rule the case names."""
    rule = f'the server\'s rule "{case.rule}"' if case.rule else "the server's rules"
    link = jump_url(case.guild_id, case.channel_id, case.message_id)
    return WARNING.format(server=guild.name, channel=case.channel_id, link=link, rule=rule)
