"""Discord <-> records, posting and splitting: how Discord messages become engine and archive records,
and how an answer is split into posts and delivered."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import AsyncIterator

import discord

from conversation import MessageRecord
from history import ArchivedMessage

log = logging.getLogger("parley")

DISCORD_MESSAGE_LIMIT = 2000  # https://discord.com/developers/docs/resources/message#create-message


# --- Turning Discord messages into engine records ----------------------------------------------


def to_record(message: discord.Message) -> MessageRecord:
    """The engine's view of a Discord message."""
    return MessageRecord(
        message_id=message.id,
        channel_id=message.channel.id,
        author_id=message.author.id,
        author=message.author.display_name,
        content=message.clean_content,
        timestamp=message.created_at,
        is_bot=message.author.bot,
        mention_ids=frozenset(user.id for user in message.mentions),
        reply_to_author_id=replied_author_id(message),
        mentions_everyone=message.mention_everyone,
    )


def replied_author_id(message: discord.Message) -> int | None:
    reference = message.reference
    if reference is None or message.type is not discord.MessageType.reply:
        return None
    resolved = reference.resolved
    if isinstance(resolved, discord.Message):
        return resolved.author.id
    return None


def record_from_archive(row: ArchivedMessage) -> MessageRecord:
    """An archived message as conversation context (who it mentioned is not archived)."""
    return MessageRecord(
        message_id=row.message_id,
        channel_id=row.channel_id,
        author_id=row.author_id,
        author=row.author_name,
        content=row.content,
        timestamp=row.created_at,
        is_bot=row.is_bot,
    )


def to_archived(message: discord.Message) -> ArchivedMessage:
    """The archive's row for a Discord message."""
    return ArchivedMessage(
        message_id=message.id,
        guild_id=message.guild.id if message.guild else 0,
        channel_id=message.channel.id,
        author_id=message.author.id,
        author_name=message.author.display_name,
        content=message.clean_content,
        created_at=message.created_at,
        is_bot=message.author.bot,
        reply_to_message_id=message.reference.message_id if message.reference else None,
        edited_at=message.edited_at,
    )


# --- Delivering answers ------------------------------------------------------------------------

_FENCE = re.compile(r"^[ \t]*```(\S*)", re.MULTILINE)
_FENCE_CLOSE = "\n```"
_SENTENCE_END = re.compile(r"[.!?][)\"'\]]*\s")


def split_message(text: str, limit: int = DISCORD_MESSAGE_LIMIT) -> list[str]:
    """Split text into posts of at most `limit` characters, at the most natural boundary.

    Paragraphs first, then lines, sentences, words, and a hard cut only as a last resort. A code
    fence open at a cut is closed at the end of one post and reopened (same language) at the start
    of the next, so every post renders on its own and no text is lost.
    """
    posts: list[str] = []
    reopen = ""
    rest = text.strip("\n")
    while rest:
        whole = reopen + rest
        if _open_fence(whole) is not None:
            whole += _FENCE_CLOSE
        if len(whole) <= limit:
            posts.append(whole)
            break
        cut = _best_cut(rest, limit - len(reopen) - len(_FENCE_CLOSE))
        post = reopen + rest[:cut].rstrip()
        opener = _open_fence(post)
        if opener is not None:
            post += _FENCE_CLOSE
            reopen = opener + "\n"
        else:
            reopen = ""
        posts.append(post)
        rest = rest[cut:].lstrip("\n")
    return posts


def _open_fence(text: str) -> str | None:
    """The opening fence (with its language) if `text` ends inside a code block, else None."""
    opener = None
    for fence in _FENCE.finditer(text):
        opener = None if opener is not None else "```" + fence.group(1)
    return opener


def _best_cut(text: str, room: int) -> int:
    """Where to end a post of at most `room` characters: just after the best boundary."""
    window = text[:room]
    # A boundary in the first quarter would make a stub post; a later, weaker one reads better.
    floor = room // 4
    for boundary in ("\n\n", "\n"):
        position = window.rfind(boundary)
        if position > floor:
            return position + len(boundary)
    sentence_ends = [match.end() for match in _SENTENCE_END.finditer(window)]
    if sentence_ends and sentence_ends[-1] > floor:
        return sentence_ends[-1]
    position = window.rfind(" ")
    if position > floor:
        return position + 1
    return room


def reply_mentions(person: discord.abc.User) -> discord.AllowedMentions:
    """A reply may ping only the person it answers: never @everyone, @here or a role."""
    return discord.AllowedMentions(everyone=False, roles=False, users=[person], replied_user=True)


TYPING_REFRESH_SECONDS = 8  # Discord shows typing for 10 s after each trigger-typing request
# Typing starts once the model request is on its way: its own request would otherwise compete with
# the model call for the event loop, and an answer this quick needs no indicator.
TYPING_DELAY_SECONDS = 0.3


@contextlib.asynccontextmanager
async def typing_indicator(channel: discord.abc.Messageable) -> AsyncIterator[None]:
    """Show "Parley is typing…" while the body runs, without ever holding it up.

    The indicator runs beside the body: a slow or failing typing request never delays the model call.
    """
    typing = asyncio.create_task(_keep_typing(channel))
    try:
        yield
    finally:
        typing.cancel()


async def _keep_typing(channel: discord.abc.Messageable) -> None:
    await asyncio.sleep(TYPING_DELAY_SECONDS)
    while True:
        try:
            await channel.typing()
        except discord.HTTPException as error:
            log.debug("typing indicator failed: %s", error)
            return
        await asyncio.sleep(TYPING_REFRESH_SECONDS)
