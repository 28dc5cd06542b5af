"""What one attachment becomes (`Prepared`) and a request's attachments ready for the prompt (`PreparedFiles`)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from pydantic_ai.framing import close_tag, open_tag, register_tag, wrap
from pydantic_ai.messages import BinaryContent, UserContent

from files.images import PreparedImage
from prompting.quoting import inline
from records import AttachmentInfo, Kind

ATTACHMENT_TAG = register_tag("attachment")


@dataclass(frozen=True, slots=True)
class Prepared:
    """What one attachment becomes: text to inline, an image to send, and/or a note on what was not sent."""

    info: AttachmentInfo
    message_id: int
    kind: Kind
    text: str | None = None
    image: PreparedImage | None = None
    note: str | None = None
    # The image's number in the request (1-based), once it has one.
    image_number: int | None = None

    def element(self) -> str:
        """The `<attachment>` element that follows its message's quote: names as escaped attributes, text as body."""
        attributes: dict[str, str | None] = {
            "filename": inline(self.info.filename),
            "type": self.kind.value,
            "size": human_size(self.info.size),
            "message_id": str(self.message_id),
            "file_id": str(self.info.attachment_id),
            "image": None if self.image_number is None else str(self.image_number),
            "note": self.note,
        }
        return wrap(ATTACHMENT_TAG, self.text or "", **attributes)


def human_size(size: int) -> str:
    if size >= 2**20:
        return f"{size / 2**20:.1f} MB"
    return f"{max(1, round(size / 1024))} kB" if size >= 1024 else f"{size} B"


@dataclass(frozen=True)
class PreparedFiles:
    """The attachments of one request's messages, ready for the prompt."""

    by_message: dict[int, list[Prepared]] = field(default_factory=dict)

    def elements(self, message_id: int) -> str:
        """The lines that follow message `message_id`'s quote in the prompt; empty without attachments."""
        return "\n".join(prepared.element() for prepared in self.by_message.get(message_id, ()))

    @property
    def images(self) -> list[Prepared]:
        found = [p for prepared in self.by_message.values() for p in prepared if p.image is not None]
        return sorted(found, key=lambda p: p.image_number or 0)

    @property
    def extracted(self) -> list[Prepared]:
        """The attachments whose text was read (text files, PDFs, transcripts), for the archive."""
        return [p for prepared in self.by_message.values() for p in prepared if p.text]

    def user_content(self, prompt: str) -> str | list[UserContent]:
        """The user prompt: `prompt` alone, or followed by each image in its own `<attachment>` frame."""
        images = self.images
        if not images:
            return prompt
        content: list[UserContent] = [prompt]
        for prepared in images:
            assert prepared.image is not None
            content.append(
                open_tag(
                    ATTACHMENT_TAG,
                    filename=inline(prepared.info.filename),
                    message_id=str(prepared.message_id),
                    file_id=str(prepared.info.attachment_id),
                    image=str(prepared.image_number),
                )
            )
            # An identifier of our own spares pydantic-ai hashing the image's bytes for one, on the event loop.
            identifier = f"attachment-{prepared.info.attachment_id}"
            content.append(
                BinaryContent(prepared.image.data, media_type=prepared.image.media_type, identifier=identifier)
            )
            content.append(close_tag(ATTACHMENT_TAG))
        return content

    def without_images(self, note: str) -> PreparedFiles:
        """The same files with every image left out and `note` saying why."""
        return PreparedFiles(
            {
                message_id: [
                    replace(p, image=None, image_number=None, note=note) if p.image is not None else p for p in prepared
                ]
                for message_id, prepared in self.by_message.items()
            }
        )
