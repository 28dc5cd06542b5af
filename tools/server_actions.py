"""The server actions the model may take when a member asks: pin and unpin a message, make a thread, set slowmode,
delete a message, time a member out.

Each waits for the asker's Approve, every argument shown (its registry entry asks first), then, as it runs, checks
what the asker's words cannot change: the action is not turned off in the server (`/parley-admin actions`), the asker
holds the permission it takes in the channel and Parley does too (channel_actions.NEEDS), and its target is this
channel's (a message looked up here alone) or a member the question names. The server, channel and asker come from
the run's deps, never from the model's arguments. Anything refused is one line the model relays, and nothing is done;
what is done lands in the audit log, with who asked and who approved (the asker: only they may press Approve).
"""

# No `from __future__ import annotations`: pydantic-ai reads the tool functions' annotations on every request.
import logging
from collections.abc import Awaitable, Callable
from datetime import timedelta

from pydantic_ai import RunContext

from records import ModerationAction
from tools.channel_actions import NEEDS, ActionRefused, ChannelActions, ServerAction, permission_name
from tools.deps import ChatDeps, log_tool_call
from tools.registry import (
    CREATE_THREAD,
    DELETE_MESSAGE,
    PIN_MESSAGE,
    SET_SLOWMODE,
    TIME_OUT_MEMBER,
    UNPIN_MESSAGE,
    ToolEntry,
)

log = logging.getLogger("parley.tools")

# Discord's own bounds: https://discord.com/developers/docs/resources/channel#modify-channel-json-params-guild-channel
# and https://discord.com/developers/docs/resources/guild#modify-guild-member (a timeout of at most 28 days).
SLOWMODE_MAX_SECONDS = 21600
TIMEOUT_MAX_MINUTES = 28 * 24 * 60
THREAD_NAME_MAX_CHARS = 100

# What each action is called in the lines the model reads.
_DOING: dict[ServerAction, str] = {
    "pin": "pinning a message",
    "unpin": "unpinning a message",
    "delete": "deleting a message",
    "thread": "making a thread",
    "slowmode": "setting slowmode",
    "timeout": "timing a member out",
}
NOT_HERE = "Not done: server actions are not available here (only in a server's channels, where they are turned on)."
NO_MESSAGE = "Not done: say which message: the person asking can reply to it, or give its message_id from this channel."
NOT_NAMED = (
    "Not done: a member is timed out only when the message asking names them: it must @mention them or reply to"
    " one of their messages."
)
NOT_REACHED = "Not done: Discord could not be reached just now."


def _turned_off(action: ServerAction) -> str:
    return f"Not done: this server's admins turned {_DOING[action]} off (`/parley-admin actions`)."


def _asker_lacks(action: ServerAction) -> str:
    needed = " or ".join(permission_name(permission) for permission in NEEDS[action].asker)
    return f"Not done: {_DOING[action]} needs the {needed} permission in this channel, which the person asking lacks."


def _parley_lacks(action: ServerAction) -> str:
    needed = " or ".join(permission_name(permission) for permission in NEEDS[action].parley)
    return (
        f"Not done: {_DOING[action]} needs Parley to hold the {needed} permission in this channel, which it lacks;"
        " a server admin can grant it."
    )


def _message_id(ctx: RunContext[ChatDeps], said: str) -> int | None:
    """The message the call means: the id the model gave, or the one the question replies to; None if neither."""
    digits = said.strip()
    if digits.isdigit():
        return int(digits)
    deps = ctx.deps.server_actions
    return None if digits or deps is None else deps.replied_to


async def _refusal(ctx: RunContext[ChatDeps], action: ServerAction) -> str | None:
    """Why `action` may not run now, as the line the model reads; None if it may."""
    deps, place = ctx.deps.server_actions, ctx.deps
    if deps is None or place.guild_id == 0:
        return NOT_HERE
    if action in await deps.switches.turned_off(place.guild_id):
        return _turned_off(action)
    needs = NEEDS[action]
    if not set(needs.asker) & await deps.discord.asker_permissions():
        return _asker_lacks(action)
    if not set(needs.parley) & await deps.discord.own_permissions():
        return _parley_lacks(action)
    return None


async def _act(
    ctx: RunContext[ChatDeps],
    entry: ToolEntry,
    action: ServerAction,
    do: Callable[[ChannelActions, str], Awaitable[str]],
    *,
    detail: str,
    message_id: int | None = None,
    member_id: int | None = None,
) -> str:
    """Run `do` (the Discord call, given the audit reason; it returns the line the model reads) if `action` may run,
    and record it in the audit log; otherwise the refusal line, and nothing is done."""
    deps = ctx.deps
    try:
        refusal = await _refusal(ctx, action)
        if refusal is not None:
            return refusal
        assert deps.server_actions is not None
        log_tool_call(ctx, entry.name)
        done = await do(deps.server_actions.discord, f"Asked of Parley and approved by member {deps.requester_id}")
    except ActionRefused as refused:
        return f"Not done: {refused}"
    except Exception:
        log.exception("%s failed in channel %s", entry.name, deps.channel_id)
        return NOT_REACHED
    record = ModerationAction(
        guild_id=deps.guild_id,
        channel_id=deps.server_actions.channel_id,
        action=action,
        actor_id=deps.requester_id,
        requested_by=deps.requester_id,
        target_member_id=member_id,
        target_message_id=message_id,
        detail=detail,
        case_id=None,
        at=deps.server_actions.clock(),
    )
    try:
        await deps.server_actions.log.record_action(record)
    except Exception:
        # Done on Discord, whose own audit log names Parley and the reason: the answer says so all the same.
        log.exception("%s in channel %s could not be kept in the audit log", entry.name, deps.channel_id)
    return done


# A message's action as Discord takes it: the channel's call, given the message's id and the audit reason.
MessageCall = Callable[[ChannelActions, int, str], Awaitable[None]]


async def _on_message(
    ctx: RunContext[ChatDeps], entry: ToolEntry, action: ServerAction, said: str, call: MessageCall, done: str
) -> str:
    """`action` on the message the call means (`said`, or the one replied to), which is `done` once taken."""
    target = _message_id(ctx, said)
    if target is None:
        return NO_MESSAGE

    async def take(discord: ChannelActions, reason: str) -> str:
        await call(discord, target, reason)
        return f"Done: message {target} is {done}."

    return await _act(ctx, entry, action, take, detail=done, message_id=target)


async def pin_message(ctx: RunContext[ChatDeps], message_id: str = "") -> str:
    """Pin a message of this channel, only when the person asking asks for it; it is pinned only once this returns
    "Done".

    Args:
        message_id: The message's message_id, from this channel; empty for the message the person asking replied to.
    """
    return await _on_message(
        ctx, PIN_MESSAGE, "pin", message_id, lambda discord, target, reason: discord.pin(target, reason), "pinned"
    )


async def unpin_message(ctx: RunContext[ChatDeps], message_id: str = "") -> str:
    """Unpin a pinned message of this channel, only when the person asking asks for it.

    Args:
        message_id: The message's message_id, from this channel; empty for the message the person asking replied to.
    """
    return await _on_message(
        ctx,
        UNPIN_MESSAGE,
        "unpin",
        message_id,
        lambda discord, target, reason: discord.unpin(target, reason),
        "unpinned",
    )


async def delete_message(ctx: RunContext[ChatDeps], message_id: str = "") -> str:
    """Delete a message of this channel, only when the person asking asks for it; it is gone only once this returns
    "Done".

    Args:
        message_id: The message's message_id, from this channel; empty for the message the person asking replied to.
    """
    return await _on_message(
        ctx,
        DELETE_MESSAGE,
        "delete",
        message_id,
        lambda discord, target, reason: discord.delete(target, reason),
        "deleted",
    )


async def create_thread(ctx: RunContext[ChatDeps], name: str, on_message: bool = True, message_id: str = "") -> str:
    """Start a public thread in this channel, only when the person asking asks for one.

    Args:
        name: The thread's name, at most 100 characters.
        on_message: True to start it on a message (the one named by message_id); false for a thread of its own.
        message_id: The message's message_id, from this channel; empty for the message the person asking replied to.
    """
    name = name.strip()
    if not 1 <= len(name) <= THREAD_NAME_MAX_CHARS:
        return f"Not done: a thread's name is 1 to {THREAD_NAME_MAX_CHARS} characters."
    target = _message_id(ctx, message_id) if on_message else None
    if on_message and target is None:
        return NO_MESSAGE

    async def start(discord: ChannelActions, reason: str) -> str:
        thread_id = await discord.create_thread(name, target, reason)
        return f"Done: the thread <#{thread_id}> is open."

    return await _act(ctx, CREATE_THREAD, "thread", start, detail=name, message_id=target)


async def set_slowmode(ctx: RunContext[ChatDeps], seconds: int) -> str:
    """Set this channel's slowmode (how long each member waits between messages), only when the person asking asks.

    Args:
        seconds: 0 (off) to 21600 (6 hours).
    """
    if not 0 <= seconds <= SLOWMODE_MAX_SECONDS:
        return f"Not done: slowmode is 0 to {SLOWMODE_MAX_SECONDS} seconds."

    async def slow(discord: ChannelActions, reason: str) -> str:
        await discord.set_slowmode(seconds, reason)
        return "Done: slowmode is off." if seconds == 0 else f"Done: slowmode is {seconds} s."

    return await _act(ctx, SET_SLOWMODE, "slowmode", slow, detail=f"{seconds} s")


async def time_out_member(ctx: RunContext[ChatDeps], member_id: str, minutes: int) -> str:
    """Time a member out (they cannot post or speak until it ends), only when the person asking asks for it.

    Args:
        member_id: Their author_id (or the number in their `<@id>`); the message asking must @mention them or reply
            to them.
        minutes: 1 to 40320 (28 days).
    """
    if not 1 <= minutes <= TIMEOUT_MAX_MINUTES:
        return f"Not done: a timeout is 1 to {TIMEOUT_MAX_MINUTES} minutes."
    digits = member_id.strip().removeprefix("<@").removesuffix(">").lstrip("!")
    named = ctx.deps.named_member_ids - {ctx.deps.requester_id, ctx.deps.bot_user_id}
    if not digits.isdigit() or int(digits) not in named:
        return NOT_NAMED
    target = int(digits)

    async def time_out(discord: ChannelActions, reason: str) -> str:
        deps = ctx.deps.server_actions
        assert deps is not None
        until = deps.clock() + timedelta(minutes=minutes)
        await discord.time_out(target, until, reason)
        return f"Done: <@{target}> is timed out for {minutes} minutes."

    return await _act(ctx, TIME_OUT_MEMBER, "timeout", time_out, detail=f"{minutes} minutes", member_id=target)


SERVER_ACTION_TOOLS = (
    PIN_MESSAGE.tool(pin_message),
    UNPIN_MESSAGE.tool(unpin_message),
    CREATE_THREAD.tool(create_thread),
    SET_SLOWMODE.tool(set_slowmode),
    DELETE_MESSAGE.tool(delete_message),
    TIME_OUT_MEMBER.tool(time_out_member),
)
