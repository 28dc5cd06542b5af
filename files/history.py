"""What the model's history keeps of members' files: images expire after a few turns, and removed files (deleted
messages, edits taking files off) leave it."""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from pydantic_ai.framing import open_tag, wrap
from pydantic_ai.messages import (
    BinaryContent,
    ImageUrl,
    ModelMessage,
    ModelRequest,
    ModelRequestPart,
    UserContent,
    UserPromptPart,
)

from files.prepared import ATTACHMENT_TAG
from prompting.quoting import inline
from records import AttachmentInfo

# What else an old request part holds an image in (a made image, tools/images.py): the part without it, or None.
PartExpiry = Callable[[ModelRequestPart], ModelRequestPart | None]


def expire_images(
    messages: list[ModelMessage], retain_turns: int, *, also: PartExpiry | None = None
) -> list[ModelMessage]:
    """`messages` with every image older than `retain_turns` user turns replaced by a one-line placeholder.

    The turn that sent an image is its first; from the turn `retain_turns` after it, the model reads the
    placeholder (its `<attachment>` frame still names the file) instead of being sent the image again. `also`
    takes the images other parts hold out of them at the same age (the images Parley made).
    """
    turns = 0
    kept = list(messages)
    for index in range(len(kept) - 1, -1, -1):
        message = kept[index]
        if not isinstance(message, ModelRequest):
            continue
        prompted = any(isinstance(p, UserPromptPart) for p in message.parts)
        turns += prompted
        if turns > retain_turns or (turns == retain_turns and not prompted):
            kept[index] = _images_expired(message, turns - 1 if prompted else turns, also)
    return kept


def _images_expired(request: ModelRequest, age: int, also: PartExpiry | None) -> ModelRequest:
    parts = []
    changed = False
    for part in request.parts:
        if isinstance(part, UserPromptPart) and not isinstance(part.content, str):
            content = [_placeholder(item, age) for item in part.content]
            if any(a is not b for a, b in zip(content, part.content, strict=True)):
                part = replace(part, content=content)
                changed = True
        elif also is not None and (expired := also(part)) is not None:
            part = expired
            changed = True
        parts.append(part)
    return replace(request, parts=parts) if changed else request


def _placeholder(item: UserContent, age: int) -> UserContent:
    if isinstance(item, ImageUrl) or (isinstance(item, BinaryContent) and item.is_image):
        return f"(image no longer shown: sent {age} turns ago)"
    return item


# One <attachment> element or image frame's opening tag: attribute values are escaped, so none holds ">", and a body
# cannot hold the closing tag (`wrap` neutralises it).
_ATTACHMENT_ELEMENT = re.compile(r'<attachment\b[^>]*\bmessage_id="(\d+)"[^>]*>(?:.*?</attachment>)?', re.DOTALL)
_FILENAME_ATTRIBUTE = re.compile(r'\bfilename="([^"]*)"')
_FILE_ID_ATTRIBUTE = re.compile(r'\bfile_id="(\d+)"')
DELETED_NOTE = "(message deleted)"
FILE_REMOVED_NOTE = "(file removed from its message)"


def kept_files(attachments: Iterable[AttachmentInfo]) -> frozenset[str]:
    """The keys a message's remaining files go by in `Removals.files_kept`: each one's id, which the model's history
    gives every file (names cannot tell pasted screenshots apart: all are `image.png`), and its name, for history
    written before it did."""
    names = (inline(attachment.filename) for attachment in attachments)
    return frozenset((*names, *(_file_key(attachment.attachment_id) for attachment in attachments)))


def _file_key(attachment_id: int | str) -> str:
    # Kept apart from names: a file may be called anything, even a number.
    return f"#{attachment_id}"


@dataclass(frozen=True)
class Removals:
    """What the model's history must no longer show of members' files: every file of the `deleted` messages, and
    of each message in `files_kept` (an edit took files off it) those not among its `kept_files`."""

    deleted: Collection[int] = ()
    files_kept: Mapping[int, Collection[str]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.deleted or self.files_kept)

    def note(self, element: str, message_id: int) -> str | None:
        """Why the `<attachment>` element or frame `element` of message `message_id` must go; None keeps it."""
        if message_id in self.deleted:
            return DELETED_NOTE
        kept = self.files_kept.get(message_id)
        if kept is None:
            return None
        identified = _FILE_ID_ATTRIBUTE.search(element)
        if identified is not None:
            return None if _file_key(identified[1]) in kept else FILE_REMOVED_NOTE
        named = _FILENAME_ATTRIBUTE.search(element)
        return None if named is not None and html.unescape(named[1]) in kept else FILE_REMOVED_NOTE


def without_removed(text: str, removals: Removals) -> str:
    """`text` with the `<attachment>` elements of removed files emptied: their name and text go with them."""
    if not removals or "<attachment" not in text:
        return text

    def replace_element(match: re.Match[str]) -> str:
        note = removals.note(match[0], int(match[1]))
        return match[0] if note is None else wrap(ATTACHMENT_TAG, "", message_id=match[1], note=note)

    return _ATTACHMENT_ELEMENT.sub(replace_element, text)


def images_without_removed(content: Sequence[UserContent], removals: Removals) -> list[UserContent]:
    """Prompt `content` with each removed file's image replaced by a note, and its frame by one without its name."""
    kept: list[UserContent] = []
    for item in content:
        previous = kept[-1] if kept else None
        frame = _ATTACHMENT_ELEMENT.fullmatch(previous) if isinstance(previous, str) else None
        note = removals.note(frame[0], int(frame[1])) if frame is not None and not isinstance(item, str) else None
        if frame is not None and note is not None:
            kept[-1] = open_tag(ATTACHMENT_TAG, message_id=frame[1])
            item = note
        kept.append(item)
    return kept


def content_chars(content: str | Sequence[UserContent]) -> int:
    """About how many characters prompt `content` counts for; an image as about 1,000 tokens (OpenAI's high detail)."""
    if isinstance(content, str):
        return len(content)
    return sum(len(item) if isinstance(item, str) else IMAGE_CHARS for item in content)


IMAGE_CHARS = 4000
