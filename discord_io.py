"""Discord <-> records, posting and splitting: how Discord messages become engine and archive records,
and how an answer is split into posts and delivered."""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import re
import unicodedata
from collections.abc import AsyncIterator, Callable, Collection, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

import discord

from addressing import calls_by_name
from archive import ArchivedAttachment, ArchivedMessage
from archive.text import safe_text
from records import AttachmentInfo, MessageRecord
from tools.images import MadeImage

log = logging.getLogger("parley")

DISCORD_MESSAGE_LIMIT = 2000  # https://discord.com/developers/docs/resources/message#create-message


# --- Turning Discord messages into engine records ----------------------------------------------


def to_record(message: discord.Message, wake_words: Collection[str] = ()) -> MessageRecord:
    """The engine's view of a Discord message; `wake_words`: names besides its own that Parley answers to."""
    mentions = mentioned_ids(message)
    return MessageRecord(
        message_id=message.id,
        channel_id=message.channel.id,
        author_id=message.author.id,
        author=safe_text(message.author.display_name),
        content=safe_text(message.clean_content),
        timestamp=message.created_at,
        is_bot=is_automated(message),
        mention_ids=mentions,
        reply_to_author_id=replied_author_id(message),
        called_by_name=_calls_parley_by_name(message, mentions, wake_words),
        mentions_everyone=message.mention_everyone,
        attachments=tuple(attachment_info(attachment) for attachment in message.attachments),
    )


def _calls_parley_by_name(message: discord.Message, mentions: frozenset[int], wake_words: Collection[str]) -> bool:
    """Whether a server message that does not @mention Parley calls it by one of its names: its username, its
    display name, its nickname in that server, or a wake word (WAKE_WORDS)."""
    me = message.guild.me if message.guild is not None else None
    if me is None or me.id in mentions or message.author.id == me.id:
        return False
    return calls_by_name(message.content, [me.name, me.global_name or "", me.display_name, *wake_words])


def attachment_info(attachment: discord.Attachment) -> AttachmentInfo:
    """What the engine and the model are told of a file shared in Discord, before it is downloaded."""
    return AttachmentInfo(
        attachment_id=attachment.id,
        filename=safe_text(attachment.filename),
        content_type=attachment.content_type or "",
        size=attachment.size,
    )


def mentioned_ids(message: discord.Message) -> frozenset[int]:
    """The users a message @mentions; a mention of the bot's own integration role counts as one of the bot.

    Members often pick the bot's managed role from the autocomplete instead of its user: they mean the bot.
    Any other role's mention names no one in particular, so it is left out.
    """
    ids = {user.id for user in message.mentions}
    # Looked up only when a role is mentioned: `self_role` walks the server's roles.
    if message.role_mentions and message.guild is not None:
        own_role = message.guild.self_role
        bot_id = own_role.tags.bot_id if own_role is not None and own_role.tags is not None else None
        if bot_id is not None and own_role in message.role_mentions:
            ids.add(bot_id)
    return frozenset(ids)


def is_automated(message: discord.Message) -> bool:
    """Whether a bot, a webhook or Discord itself wrote the message, rather than a person."""
    author = message.author
    return author.bot or author.system or message.webhook_id is not None


def role_ids_of(user: discord.Member | discord.User | discord.abc.User) -> frozenset[int]:
    """The ids of a server member's roles, the server's own id (its @everyone role) included; none for a user met
    outside a server (a DM)."""
    roles = user.roles if isinstance(user, discord.Member) else ()
    return frozenset(role.id for role in roles)


def discord_time(moment: datetime) -> str:
    """A timestamp each reader's Discord client shows as relative time ("2 minutes ago")."""
    return f"<t:{int(moment.timestamp())}:R>"


def message_link(guild_id: int, channel_id: int, message_id: int) -> str:
    return f"https://discord.com/channels/{guild_id}/{channel_id}/{message_id}"


class LinkedPoint(Protocol):
    """A point of a summary, tied to the message it comes from (catchup.writing.Point)."""

    @property
    def topic(self) -> str: ...
    @property
    def summary(self) -> str: ...
    @property
    def message_id(self) -> int: ...


def topic_lines(points: Sequence[LinkedPoint], guild_id: int, channel_id: int) -> list[str]:
    """The points grouped by topic, in the order the topics came up: a bold heading each, then one line a point
    with its jump link (a catch-up's and a digest's)."""
    groups: dict[str, tuple[str, list[LinkedPoint]]] = {}
    for point in points:
        key = " ".join(point.topic.casefold().split())
        groups.setdefault(key, (point.topic.strip() or "Other", []))[1].append(point)
    lines: list[str] = []
    for topic, grouped in groups.values():
        lines.append(f"\n**{discord.utils.escape_markdown(topic)}**")
        for point in grouped:
            link = message_link(guild_id, channel_id, point.message_id)
            lines.append(f"- {discord.utils.escape_markdown(point.summary)} [jump]({link})")
    return lines


def author_permissions(message: discord.Message) -> discord.Permissions:
    """The author's permissions where they wrote; none for a webhook, which is no member."""
    author = message.author
    if not isinstance(author, discord.Member):
        return discord.Permissions.none()
    try:
        return message.channel.permissions_for(author)
    except discord.ClientException:
        return discord.Permissions.none()  # a thread whose parent channel is not cached: its permissions are unknown


def may_post(permissions: discord.Permissions, *, in_thread: bool) -> bool:
    """Whether a member with `permissions` in a channel (`in_thread`: a thread) may see it and post in it: what
    Parley asks of a member before it posts their words, or an answer to them, there."""
    sends = permissions.send_messages_in_threads if in_thread else permissions.send_messages
    return permissions.view_channel and sends


def may_read_history(message: discord.Message) -> bool:
    """Whether the author has Read Message History where they wrote."""
    return author_permissions(message).read_message_history


def replied_author_id(message: discord.Message) -> int | None:
    reference = message.reference
    if reference is None or message.type is not discord.MessageType.reply:
        return None
    resolved = reference.resolved
    if isinstance(resolved, discord.Message):
        return resolved.author.id
    return None


def record_from_archive(row: ArchivedMessage) -> MessageRecord:
    """An archived message as conversation context, with whom it mentioned and replied to, as from Discord."""
    return MessageRecord(
        message_id=row.message_id,
        channel_id=row.channel_id,
        author_id=row.author_id,
        author=row.author_name,
        content=row.content,
        timestamp=row.created_at,
        is_bot=row.is_bot,
        mention_ids=row.mention_ids,
        reply_to_author_id=row.reply_to_author_id,
        mentions_everyone=row.mentions_everyone,
        attachments=tuple(
            AttachmentInfo(attachment.attachment_id, attachment.filename, attachment.content_type, attachment.size)
            for attachment in row.attachments
        ),
    )


def to_archived(message: discord.Message, record: MessageRecord | None = None) -> ArchivedMessage:
    """The archive's row for a Discord message; `record`, its engine record when the caller already has one."""
    record = record or to_record(message)
    return ArchivedMessage(
        message_id=record.message_id,
        guild_id=message.guild.id if message.guild else 0,
        channel_id=record.channel_id,
        author_id=record.author_id,
        author_name=record.author,
        content=record.content,
        created_at=record.timestamp,
        is_bot=record.is_bot,
        reply_to_message_id=message.reference.message_id if message.reference else None,
        edited_at=message.edited_at,
        mention_ids=record.mention_ids,
        reply_to_author_id=record.reply_to_author_id,
        mentions_everyone=record.mentions_everyone,
        attachments=tuple(
            ArchivedAttachment(info.attachment_id, info.filename, info.content_type, info.size)
            for info in record.attachments
        ),
    )


# --- Delivering answers ------------------------------------------------------------------------

# The smallest post limit the splitter accepts: a reopened fence, its close and some text must fit.
MIN_POST_LIMIT = 64
_FENCE = re.compile(r"^[ \t]*```(\S*)[^\n]*", re.MULTILINE)
_FENCE_CLOSE = "\n```"
# A reopened fence keeps its language only when that is short, as real ones are ("python", "typescript"):
# a longer info string would eat every continuation post's room, so the fence is reopened bare.
MAX_REOPENED_FENCE = 32
_BARE_FENCE = "```"
ANSWER_CUT_MARKER = "(answer cut)"
_CUT_NOTE = "\n\n" + ANSWER_CUT_MARKER
_SENTENCE_END = re.compile(r"[.!?][)\"'\]]*\s")
_ZERO_WIDTH_JOINER = "\u200d"
_SKIN_TONES = range(0x1F3FB, 0x1F400)


@dataclass(frozen=True, slots=True)
class SplitStep:
    """One turn of the splitter's loop: the post it produced (None for a stretch of bare whitespace)
    and how many characters of the input are still to be posted, always fewer than before."""

    post: str | None
    remaining: int


def split_message(text: str, limit: int = DISCORD_MESSAGE_LIMIT, *, max_posts: int | None = None) -> list[str]:
    """Split text into posts of at most `limit` characters, at the most natural boundary.

    Paragraphs first, then lines, sentences, words, and a hard cut only as a last resort. A code
    fence open at a cut is closed at the end of one post and reopened (same language) at the start
    of the next, so every post renders on its own and no text is lost. With `max_posts`, text that
    needs more posts is cut: the last post ends with ANSWER_CUT_MARKER, after any fence is closed.
    """
    if max_posts is not None and max_posts < 1:
        raise ValueError("max_posts must be at least 1")
    if max_posts is not None and limit - len(_CUT_NOTE) < MIN_POST_LIMIT:
        raise ValueError(
            f"a post limit under {MIN_POST_LIMIT + len(_CUT_NOTE)} characters leaves no room for the cut marker"
        )
    posts: list[str] = []
    remaining = 0
    for step in split_steps(text, limit):
        if step.post is None:
            continue
        if len(posts) == max_posts:
            posts[-1] = _marked_cut(posts[-1], limit)
            log.info("text cut to %d posts; about %d characters not posted", max_posts, remaining)
            break
        posts.append(step.post)
        remaining = step.remaining
    return posts


def _marked_cut(post: str, limit: int) -> str:
    """`post` ending with the cut marker, shortened (at a natural boundary, fences closed) to make room."""
    if len(post) + len(_CUT_NOTE) <= limit:
        return post + _CUT_NOTE
    # Re-split with the room the marker leaves, judging fence lines as the full-size split did.
    shorter = split_steps(post, limit - len(_CUT_NOTE), fence_line_max=_fence_line_max(limit))
    first = next(step.post for step in shorter if step.post is not None)
    return first + _CUT_NOTE


def split_steps(
    text: str, limit: int = DISCORD_MESSAGE_LIMIT, *, fence_line_max: int | None = None
) -> Iterator[SplitStep]:
    """The splitter's loop, one step at a time; every step consumes at least one character of the
    input, so any text ends in at most `len(text)` steps.

    `fence_line_max`: the longest line that can open or close a code block (default: half of `limit`).
    """
    if limit < MIN_POST_LIMIT:
        raise ValueError(f"a post limit under {MIN_POST_LIMIT} characters leaves no room for text")
    line_max = _fence_line_max(limit) if fence_line_max is None else fence_line_max
    rest = text.replace("\r\n", "\n").strip("\n")
    reopen = ""
    while rest:
        post, used, reopen = _next_post(rest, reopen, limit, line_max)
        if used < 1:
            # Unreachable (see _next_post), but a hang would silence every server: fail loudly instead.
            raise RuntimeError("the splitter made no progress")
        rest = rest[used:].lstrip("\n")
        yield SplitStep(post, len(rest))


def _fence_line_max(limit: int) -> int:
    # A longer fence line's info string alone would leave no room for the code: it is text.
    return limit // 2


def _next_post(rest: str, reopen: str, limit: int, fence_line_max: int) -> tuple[str | None, int, str]:
    """The next post from the front of `rest`, how many characters of `rest` it used, and the fence
    line (with its newline) to start the following post with.

    It uses at least one character: the room for text is at least `limit` minus a capped reopened
    fence and its close (MIN_POST_LIMIT keeps that positive), and `_best_cut` never returns 0.
    """
    if not rest.strip():
        return None, len(rest), ""
    whole = reopen + rest
    # Only a text within the limit can be the last post: scanning a longer one for fences would be wasted.
    if len(whole) <= limit:
        if _open_fence(whole, fence_line_max) is not None:
            whole += _FENCE_CLOSE
        if len(whole) <= limit:
            return whole, len(rest), ""
    cut = _best_cut(rest, limit - len(reopen) - len(_FENCE_CLOSE))
    body = rest[:cut].rstrip()
    if not body.strip():
        return None, cut, reopen
    post = reopen + body
    opener = _open_fence(post, fence_line_max)
    if opener is None:
        return post, cut, ""
    return post + _FENCE_CLOSE, cut, _reopened(opener)


def _open_fence(text: str, line_max: int = _fence_line_max(DISCORD_MESSAGE_LIMIT)) -> str | None:
    """The opening fence (with its language) if `text` ends inside a code block, else None.

    A line longer than `line_max` is text even if it starts with a fence: its info string alone
    would leave no room for the code.
    """
    opener = None
    for fence in _FENCE.finditer(text):
        if len(fence.group(0)) <= line_max:
            opener = None if opener is not None else "```" + fence.group(1)
    return opener


def _reopened(opener: str) -> str:
    """The line that reopens `opener`'s code block at the start of the next post."""
    return (opener if len(opener) <= MAX_REOPENED_FENCE else _BARE_FENCE) + "\n"


def _best_cut(text: str, room: int) -> int:
    """Where to end a post of at most `room` characters: just after the best boundary, never at 0."""
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
    return _hard_cut(text, max(room, 1), floor)


def _hard_cut(text: str, cut: int, floor: int) -> int:
    """`cut`, moved back (not past `floor`) so it does not split a character from its accents or an emoji sequence."""
    while cut > floor + 1 and cut < len(text) and _joins_previous(text[cut - 1], text[cut]):
        cut -= 1
    return cut


def _joins_previous(before: str, char: str) -> bool:
    """Whether `char` is drawn together with `before`: an accent, a joiner, a variation selector, a skin tone."""
    return (
        before == _ZERO_WIDTH_JOINER
        or char == _ZERO_WIDTH_JOINER
        or unicodedata.category(char) in ("Mn", "Me", "Mc")
        or ord(char) in _SKIN_TONES
    )


# --- Images posted with an answer ---------------------------------------------------------------


def upload_limit(channel: object) -> int:
    """The bytes a file Parley posts in `channel` may have: the server's upload limit (its boost tier's), Discord's
    default in a DM, 0 where Parley may not attach files."""
    guild = getattr(channel, "guild", None)
    if guild is None:
        return discord.utils.DEFAULT_FILE_SIZE_LIMIT_BYTES
    me = guild.me
    permissions_for = getattr(channel, "permissions_for", None)
    if me is None or permissions_for is None or not permissions_for(me).attach_files:
        return 0
    limit: int = guild.filesize_limit
    return limit


def image_files(images: Sequence[MadeImage]) -> list[discord.File]:
    """The images an answer made as files for its post, each with its alt text; new ones for every try, since a
    file is read once it is sent."""
    return [
        discord.File(io.BytesIO(image.data), filename=f"{index}-{image.filename}", description=image.description)
        for index, image in enumerate(images, start=1)
    ]


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


# --- Threads and direct messages -----------------------------------------------------------------

THREAD_NAME_MAX = 100  # https://discord.com/developers/docs/resources/channel#start-thread-from-message


def thread_name(question: str, asker: str, bot_name: str) -> str:
    """A thread's name from the question that opened it: one line, without the @mention of Parley it starts
    with, at most THREAD_NAME_MAX characters (cut with an ellipsis); "Question from <asker>" if nothing is left."""
    line = " ".join(safe_text(question).split())
    mention = f"@{' '.join(bot_name.split())}"
    while line.startswith(mention):
        line = line[len(mention) :].lstrip(" ,:")
    line = line or f"Question from {' '.join(safe_text(asker).split())}"
    return line if len(line) <= THREAD_NAME_MAX else line[: THREAD_NAME_MAX - 1].rstrip() + "…"


def is_closed_thread(channel: object) -> bool:
    """Whether `channel` is an archived or locked thread, where Parley posts nothing (posting would reopen it)."""
    return isinstance(channel, discord.Thread) and (channel.archived or channel.locked)


def guild_id_of(message: discord.Message) -> int:
    """The message's server id; 0 for a direct message, so DMs share one budget and memory scope apart from servers."""
    return 0 if message.guild is None else message.guild.id


class KnownChannels:
    """Where a channel this process knows sits, read from discord.py's cache (`get_channel`): what the parts are
    handed instead of the client."""

    def __init__(self, get_channel: Callable[[int], object | None]) -> None:
        self.get_channel = get_channel

    def server_of(self, channel_id: int) -> int:
        """The server of a channel this process knows; 0 (as for DMs) for one it does not."""
        guild = getattr(self.get_channel(channel_id), "guild", None)
        return guild.id if guild is not None else 0

    def profile_place(self, channel_id: int) -> tuple[int | None, int]:
        """The server of a channel (None: not known) and the channel whose profile it follows: a thread's parent."""
        channel = self.get_channel(channel_id)
        guild = getattr(channel, "guild", None)
        followed = channel.parent_id if isinstance(channel, discord.Thread) else channel_id
        return (guild.id if guild is not None else None), followed
