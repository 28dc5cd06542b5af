"""The hand-off: one line in a support forum's post that nobody answered and the documents don't answer, pinging the
staff role an admin named (SUPPORT_STAFF_ROLE).

It is the only role ping Parley ever makes: its `allowed_mentions` names exactly that role, nobody else, never
@everyone or @here, whatever the post or its title says. Nothing is posted in an archived or locked post (posting
would reopen it), nor where Parley may not post.
"""

from __future__ import annotations

import logging
from datetime import timedelta

import discord

from discord_io import is_closed_thread

log = logging.getLogger("parley.helpdesk")

HANDOFF_LINE = "<@&{role}> this post has had no answer for {waited}, and the server's documents don't cover it."


def handoff_mentions(role_id: int) -> discord.AllowedMentions:
    """The hand-off's pings: the staff role alone."""
    return discord.AllowedMentions(everyone=False, users=False, roles=[discord.Object(role_id)], replied_user=False)


def waited_text(waited: timedelta) -> str:
    """How long a post waited, as the line says it: in minutes, or hours past two."""
    minutes = round(waited.total_seconds() / 60)
    return f"{minutes} minutes" if minutes < 120 else f"{round(minutes / 60)} hours"


async def hand_off(post: discord.abc.Messageable, role_id: int, waited: timedelta) -> discord.Message | None:
    """Post the hand-off line in `post` (a forum post's thread); the line, or None if it was not posted."""
    if is_closed_thread(post):
        log.info("not handing off post %s: it was archived or locked meanwhile", getattr(post, "id", "?"))
        return None
    line = HANDOFF_LINE.format(role=role_id, waited=waited_text(waited))
    try:
        return await post.send(line, allowed_mentions=handoff_mentions(role_id))
    except discord.HTTPException as error:
        log.warning("could not hand off post %s: %s", getattr(post, "id", "?"), error)
        return None
