"""The answer agent's `remind` tool: a reminder or timed post set for the member asking, in the channel asked in.

Guild, channel and member come from `ChatDeps`, never from the model's arguments; the model gives only the time,
the recurrence and the words (reminders/book.py's rules). A refusal is the one line the model relays.
"""

# No `from __future__ import annotations`: pydantic-ai reads the tool function's annotations on every request.
import logging

from pydantic_ai import RunContext

from reminders.book import ReminderRefused
from tools import ChatDeps, log_tool_call
from tools.registry import REMIND

log = logging.getLogger("parley.reminders")

# A reminder set in a DM could never be listed or cancelled (`/remind` is for servers) and would count against
# every DM's shared limit, so the tool sets none there.
NOT_IN_DMS = "Not set: reminders are set in a server channel (ask there, or use `/remind set`), not in direct messages."
POST_HERE_NEEDS = (
    "Not set: a timed post to the channel needs the Manage Messages permission here, which the person asking"
    " lacks. A reminder for themselves (post_here false) needs none."
)


async def remind(ctx: RunContext[ChatDeps], when: str, text: str, every: str = "", post_here: bool = False) -> str:
    """Set a reminder for the person asking, or a timed post to this channel, only when they ask for one.

    It is stored only once this returns "Set" (say so then, with its time); "Not set: …" gives the reason to tell them.

    Args:
        when: As they said it or ISO: `2h`, `in 3 days`, `tomorrow 9:00`, `monday 9am`, `2026-12-01 14:00` (no
            zone: the server's).
        text: What to post, in their words.
        every: Empty for once, or `hourly`, `6h` (every N hours), `daily`, `weekdays`, `weekly` (on the
            weekday of `when`).
        post_here: False for "remind me" (pings the asker); true for a post to the whole channel (pings no one).
    """
    deps = ctx.deps
    if deps.reminders is None:
        return "Not set: reminders are off here (Parley keeps no archive)."
    if deps.guild_id == 0:
        return NOT_IN_DMS
    if post_here and not deps.requester_manages_messages:
        return POST_HERE_NEEDS
    log_tool_call(ctx, REMIND.name)
    try:
        reminder = await deps.reminders.set(
            guild_id=deps.guild_id,
            channel_id=deps.channel_id,
            owner_id=deps.requester_id,
            owner_may_post=deps.requester_may_post,
            text=text,
            when=when,
            every=every,
            post_here=post_here,
        )
    except ReminderRefused as refused:
        return f"Not set: {refused}"
    except Exception:
        log.exception("%s failed in channel %s", REMIND.name, deps.channel_id)
        return "Not set: the reminder could not be saved just now."
    return f"Set. {deps.reminders.confirmation(reminder)}"


REMINDER_TOOLS = (REMIND.tool(remind),)
