"""Images the model makes and edits (IMAGE_MODEL), through pydantic-ai's `ImageGeneration` capability.

With a direct image model (`openai:gpt-image-1`, ...) the capability's tool is Parley's own `generate_image`: each
call claims one of the asker's and the server's images for the day first (`ChatDeps.images`; a claim refused, or a
channel Parley may not attach files in, stops the answer on one line, and no image model is called), sends the
latest image of the conversation as the reference when it edits, and fits what comes back within the upload limit.
The image goes back to the model as a line; its bytes ride in the tool result's metadata, which the model is never
sent: the answer attaches them (`images_made`) and the next edit finds them there (`latest_image`), for as long as
the history keeps them (files/history.py's IMAGE_RETAIN_TURNS). With IMAGE_MODEL=native the answer model's own image
tool draws, offered only while the asker and the server have images left; what it drew is counted after the answer.
"""

# No `from __future__ import annotations`: pydantic-ai reads the tool function's annotations on every request.
import base64
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from pydantic_ai import RunContext, ToolReturn
from pydantic_ai.capabilities import ImageGeneration
from pydantic_ai.exceptions import ContentFilterError, UsageLimitExceeded
from pydantic_ai.images import ImageGenerator
from pydantic_ai.messages import (
    BinaryContent,
    BinaryImage,
    FilePart,
    ModelMessage,
    ModelRequestPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import Model
from pydantic_ai.native_tools import ImageGenerationTool

from files.images import ImageProblem, prepared_to_fit
from tools.deps import ChatDeps, log_tool_call
from tools.registry import GENERATE_IMAGE, IMAGES

log = logging.getLogger("parley.tools")

# The one line an answer ends on when no image may be made for it (the model is not asked to say it).
NO_FILES_HERE = "I can't post images here: I'm not allowed to attach files in this channel."
FILTERED = "The image service refused to draw that (its content filter), so there is no image."
TOO_LARGE = "The image came out too large to post here, even made smaller, so there is no image."
FAILED = "The image could not be made just now; tell the member so, briefly."
NOTHING_TO_EDIT = "There is no image in the conversation to edit: draw a new one, or ask for the image."
MADE = "The image is made and will be attached to your answer: don't describe it at length or link it."
# The alt text of an image the answer model's own tool drew: what it was asked for is the model's to know.
NATIVE_ALT_TEXT = "An image Parley made"
# Discord's limit on an attachment's description (its alt text).
ALT_TEXT_CHARS = 1024
# Where a made image's bytes ride in its tool result: the metadata, which the model is never sent.
_METADATA_KEY = "parley_image"


class ImageStop(UsageLimitExceeded):
    """An answer stopped at its image tool: `line` is all the member is told (a limit, no files, a refusal)."""

    def __init__(self, line: str) -> None:
        super().__init__(line)
        self.line = line


@dataclass(frozen=True)
class MadeImage:
    """An image made in an answer: its bytes and type, and its alt text (what it was asked to show). `counted`: in
    the day's images already (Parley's tool counts each as it is made; what a native tool drew is counted after)."""

    data: bytes
    media_type: str
    description: str
    counted: bool = True

    @property
    def filename(self) -> str:
        return "image." + self.media_type.removeprefix("image/").replace("jpeg", "jpg")


def image_capability(generator: ImageGenerator | None) -> ImageGeneration[ChatDeps]:
    """The `ImageGeneration` capability: Parley's `generate_image` over `generator` (IMAGE_MODEL), or, without
    one, the answer model's native image tool where the channel's profile offers images and its provider has it."""
    if generator is None:
        return ImageGeneration(native=_native_tool_offered)
    return ImageGeneration(native=False, local=GENERATE_IMAGE.tool(_generate_image_with(generator)))


def _generate_image_with(generator: ImageGenerator) -> Any:
    async def generate_image(ctx: RunContext[ChatDeps], prompt: str, edit_latest_image: bool = False) -> ToolReturn:
        """Make an image and attach it to your answer, or edit the latest image in the conversation (one a member
        attached, or the last one you made).

        Args:
            prompt: What the image shows, in a full sentence; for an edit, what to change.
            edit_latest_image: True to change the latest image rather than draw a new one.
        """
        grant = ctx.deps.images
        if grant is None:
            return ToolReturn("Images are off here.")
        if grant.upload_limit <= 0:
            raise ImageStop(NO_FILES_HERE)
        reference = latest_image(ctx.messages) if edit_latest_image else None
        if edit_latest_image and reference is None:
            return ToolReturn(NOTHING_TO_EDIT)
        refusal = await grant.claim()
        if refusal is not None:
            raise ImageStop(refusal)
        log_tool_call(ctx, GENERATE_IMAGE.name, "edit " if reference is not None else "")
        result = None
        try:
            result = await generator.generate(prompt, images=None if reference is None else [reference])
        except ContentFilterError:
            raise ImageStop(FILTERED) from None
        except Exception as error:  # noqa: BLE001 - an outside service: any failure is a line for the model
            # The type alone: a provider's message can quote the prompt, which the model wrote from members' words.
            log.warning("%s failed in channel %s: %s", GENERATE_IMAGE.name, ctx.deps.channel_id, type(error).__name__)
            return ToolReturn(FAILED)
        finally:
            # However it ended (a member's Stop cancels it too), the claim ends: counted if an image came.
            grant.made(result)
        try:
            fitted = await prepared_to_fit(result.image.data, grant.upload_limit)
        except ImageProblem:
            raise ImageStop(TOO_LARGE) from None
        image = MadeImage(fitted.data, fitted.media_type, prompt[:ALT_TEXT_CHARS])
        return ToolReturn(MADE, metadata={_METADATA_KEY: _as_metadata(image)})

    return generate_image


async def _native_tool_offered(ctx: RunContext[ChatDeps]) -> ImageGenerationTool | None:
    """The native image tool where `native_images_offered` (IMAGE_MODEL=native) and the asker and the server have
    an image left today; a run without it goes without images rather than failing."""
    grant = ctx.deps.images
    if not native_images_offered(ctx) or grant is None or not await grant.any_left():
        return None
    return ImageGenerationTool()


def native_images_offered(ctx: RunContext[ChatDeps]) -> bool:
    """Whether the run's profile offers images, its answer may make them and attach them, and its model's
    provider draws."""
    model, grant = ctx.model, ctx.deps.images
    if not ctx.deps.offers(IMAGES) or grant is None or grant.upload_limit <= 0 or not isinstance(model, Model):
        return False
    return supports_native_images(model)


def supports_native_images(model: Model) -> bool:
    """Whether `model`'s provider draws images itself (OpenAI Responses, Google's image models, ...)."""
    return ImageGenerationTool in model.profile.get("supported_native_tools", frozenset())


def images_made(messages: Iterable[ModelMessage]) -> list[MadeImage]:
    """The images `messages` made, in order: `generate_image`'s results and the images a native tool drew."""
    made: list[MadeImage] = []
    for message in messages:
        for part in message.parts:
            if isinstance(part, ToolReturnPart) and (image := _from_metadata(part.metadata)) is not None:
                made.append(image)
            elif isinstance(part, FilePart) and isinstance(part.content, BinaryImage):
                made.append(MadeImage(part.content.data, part.content.media_type, NATIVE_ALT_TEXT, counted=False))
    return made


async def drawn_to_fit(images: Sequence[MadeImage], upload_limit: int) -> tuple[MadeImage, ...]:
    """`images` with those a native tool drew fitted within `upload_limit` (Parley's tool fitted its own); one that
    cannot be made small enough is left out, and logged."""
    fitted: list[MadeImage] = []
    for image in images:
        if image.counted:
            fitted.append(image)
            continue
        try:
            prepared = await prepared_to_fit(image.data, upload_limit)
        except ImageProblem as problem:
            log.warning("an image the answer model drew was left out: %s", problem)
            continue
        fitted.append(replace(image, data=prepared.data, media_type=prepared.media_type))
    return tuple(fitted)


def latest_image(messages: Sequence[ModelMessage]) -> BinaryImage | None:
    """The newest image the history holds: the last one made, or a member's the prompt carries, whichever is later;
    None when every image has left the history (files/history.py)."""
    for message in reversed(messages):
        for part in reversed(message.parts):
            found = _image_of(part)
            if found is not None:
                return found
    return None


def _image_of(part: Any) -> BinaryImage | None:
    if isinstance(part, ToolReturnPart) and (made := _from_metadata(part.metadata)) is not None:
        return BinaryImage(data=made.data, media_type=made.media_type)
    if isinstance(part, FilePart) and isinstance(part.content, BinaryImage):
        return part.content
    if isinstance(part, UserPromptPart) and not isinstance(part.content, str):
        for item in reversed(part.content):
            if isinstance(item, BinaryContent) and item.is_image:
                return BinaryImage(data=item.data, media_type=item.media_type)
    return None


def without_made_image(part: ModelRequestPart) -> ModelRequestPart | None:
    """`part` without the made image's bytes it carries (files/history.py expires them), or None if it carries none."""
    if not isinstance(part, ToolReturnPart) or _from_metadata(part.metadata) is None:
        return None
    kept = {key: value for key, value in part.metadata.items() if key != _METADATA_KEY}
    return replace(part, metadata=kept or None)


def _as_metadata(image: MadeImage) -> dict[str, str]:
    # Plain JSON: the history is kept as JSON (the conversation's snapshot), and this comes back from it as it went.
    return {"data": base64.b64encode(image.data).decode(), "media_type": image.media_type, "alt": image.description}


def _from_metadata(metadata: Any) -> MadeImage | None:
    kept = metadata.get(_METADATA_KEY) if isinstance(metadata, dict) else None
    if not isinstance(kept, dict):
        return None
    return MadeImage(base64.b64decode(kept["data"]), kept["media_type"], kept["alt"])
