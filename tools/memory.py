"""The memory tools: `remember` a fact for later conversations, and `recall` the facts saved."""

# No `from __future__ import annotations`: pydantic-ai reads the tool functions' annotations on every request.
import logging

from pydantic_ai import RunContext

from memory.store import format_memories
from tools.deps import ChatDeps
from tools.registry import RECALL, REMEMBER

log = logging.getLogger("parley.tools")


RECALL_LIMIT = 10


async def remember(
    ctx: RunContext[ChatDeps], fact: str, about_the_speaker: bool = True, about_member_id: str | None = None
) -> str:
    """Save a fact for later conversations, only when someone asks you to remember it; say it was noted only once
    this returns "Remembered".

    Args:
        fact: One short sentence naming who it is about, e.g. `Alice deploys on Fridays`.
        about_the_speaker: True if it is about the person asking (recalled in this server's other channels too);
            false for the channel, a project or someone else.
        about_member_id: For a fact about another member, their author_id (or the number in their `<@id>`); the
            message asking must @mention or reply to them.
    """
    deps = ctx.deps
    if deps.memory is None:
        return "Memory is off here, so nothing was saved."
    if not fact.strip():
        return "Nothing was saved: the fact was empty."
    about = None
    if not about_the_speaker and about_member_id:
        about = _member_id(about_member_id)
        if about is None or about not in deps.named_member_ids | {deps.requester_id}:
            return (
                "Nothing was saved: a fact about another member is kept as theirs (they may see and delete it), so"
                " the message asking must @mention them or reply to them."
            )
    try:
        memory = await deps.memory.remember(
            guild_id=deps.guild_id,
            channel_id=deps.channel_id,
            said_by_id=deps.requester_id,
            source_message_id=deps.message_id,
            fact=fact,
            about_speaker=about_the_speaker or about == deps.requester_id,
            about_member_id=about,
        )
    except Exception:
        log.exception("%s failed in channel %s", REMEMBER.name, deps.channel_id)
        return "The memory could not be saved just now; nothing was remembered."
    log.info(
        "remembered fact %s in channel %s for user %s",
        memory.id,
        deps.channel_id,
        deps.requester_id,
        extra={"tool": REMEMBER.name, "channel_id": deps.channel_id, "requester_id": deps.requester_id},
    )
    return f"Remembered (memory {memory.id})."


def _member_id(said: str) -> int | None:
    """A member's id as the model gave it (the number, or their `<@id>` mention); None if it is not one."""
    digits = said.strip().removeprefix("<@").removesuffix(">").lstrip("!")
    return int(digits) if digits.isdigit() else None


async def recall(ctx: RunContext[ChatDeps], query: str) -> str:
    """Look up facts people asked you to remember: this channel's, and the asker's own.

    Args:
        query: Words the fact would contain, e.g. `deploy Friday`.
    """
    deps = ctx.deps
    if deps.memory is None:
        return "Memory is off here."
    try:
        found = await deps.memory.recall(
            query,
            guild_id=deps.guild_id,
            channel_id=deps.channel_id,
            member_id=deps.requester_id,
            limit=RECALL_LIMIT,
            # The channel's facts are copies of its history, which this member may not read.
            channel_facts=deps.requester_can_read_history,
        )
    except Exception:
        log.exception("%s failed in channel %s", RECALL.name, deps.channel_id)
        return "Memories could not be read just now."
    return format_memories(found, speaker_id=deps.requester_id)


MEMORY_TOOLS = (REMEMBER.tool(remember), RECALL.tool(recall))
