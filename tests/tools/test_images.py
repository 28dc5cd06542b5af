"""Images the model makes and edits (tools/images.py): claimed before the image model is called, attached to the
answer, kept for the next edit, and refused in one line (a daily limit, no files allowed, the provider's filter)."""

from __future__ import annotations

import asyncio
import io
from dataclasses import dataclass, field, replace
from typing import Any

import pytest
from PIL import Image
from pydantic_ai import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.exceptions import ContentFilterError
from pydantic_ai.images import ImageGenerationResult, ImageGenerator, TestImageGenerationModel
from pydantic_ai.messages import BinaryContent, BinaryImage, FilePart, ModelRequest, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from agent import Reply, build_responder, generate_reply
from files.history import expire_images
from tests.support.agent_test_support import ALICE, conversation_of, deps, msg
from tools import ChatDeps, build_toolbox
from tools.images import (
    FAILED,
    FILTERED,
    NATIVE_ALT_TEXT,
    NO_FILES_HERE,
    TOO_LARGE,
    MadeImage,
    drawn_to_fit,
    images_made,
    latest_image,
    without_made_image,
)

LIMIT_LINE = "You've had your 1 images for today."


@dataclass
class Grant:
    """A `tools.deps.ImageGrant` with `left` images, recording its claims and what was made."""

    left: int = 5
    upload_limit: int = 10 * 2**20
    claims: int = 0
    made_results: list[ImageGenerationResult | None] = field(default_factory=list)

    async def claim(self) -> str | None:
        if self.left <= 0:
            return LIMIT_LINE
        self.left -= 1
        self.claims += 1
        return None

    def made(self, result: ImageGenerationResult | None) -> None:
        self.made_results.append(result)

    async def any_left(self) -> bool:
        return self.left > 0


class Filtered(TestImageGenerationModel):
    """An image model whose provider's content filter refuses every prompt."""

    async def generate(self, prompt: str, **options: Any) -> ImageGenerationResult:
        raise ContentFilterError("blocked for content moderation", "{}")


def png(width: int, height: int, noise: bool = False) -> bytes:
    image = Image.effect_noise((width, height), 80).convert("RGB") if noise else Image.new("RGB", (width, height))
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


class Huge(TestImageGenerationModel):
    """An image model whose images are large noisy pngs."""

    async def generate(self, prompt: str, **options: Any) -> ImageGenerationResult:
        result = await super().generate(prompt, **options)
        result.images[0].content = BinaryImage(data=png(1024, 1024, noise=True), media_type="image/png")
        return result


def drawing_model(seen: list[list[ModelMessage]], *, edit: bool = False) -> FunctionModel:
    """The answer model: calls `generate_image` once, then answers."""

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(list(messages))
        if not any(isinstance(part, ToolReturnPart) for part in messages[-1].parts):
            args = {"prompt": "a red fox in the snow", **({"edit_latest_image": True} if edit else {})}
            return ModelResponse(parts=[ToolCallPart("generate_image", args)])
        return ModelResponse(parts=[TextPart("Here is your fox.")])

    return FunctionModel(model)


async def draw(
    make_settings: Any,
    image_model: TestImageGenerationModel,
    chat: ChatDeps,
    *,
    edit: bool = False,
    history: list[ModelMessage] | None = None,
    seen: list[list[ModelMessage]] | None = None,
) -> Reply:
    settings = make_settings(image_model="openai:gpt-image-1")
    toolbox = build_toolbox(settings, images=ImageGenerator(image_model))
    responder = build_responder(settings, model=drawing_model([] if seen is None else seen, edit=edit), toolbox=toolbox)
    message = msg(ALICE, "Alice", "make it night" if edit else "draw a red fox in the snow")
    return await generate_reply(responder, conversation_of(message, llm_history=history), message, chat)


async def test_a_drawing_is_attached_to_the_answer_and_counted(make_settings) -> None:
    grant = Grant()
    seen: list[list[ModelMessage]] = []

    reply = await draw(make_settings, TestImageGenerationModel(), replace(deps(), images=grant), seen=seen)

    assert reply.text == "Here is your fox."
    [image] = reply.images
    assert image.data.startswith(b"\x89PNG") and image.description == "a red fox in the snow"
    assert grant.claims == 1 and len(grant.made_results) == 1 and grant.made_results[0] is not None
    # The model reads a line about the image, never its bytes: they ride in the metadata, which it is not sent.
    [returned] = [p for p in seen[-1][-1].parts if isinstance(p, ToolReturnPart)]
    assert isinstance(returned.content, str) and "attached" in returned.content
    assert images_made(reply.messages) == [image]


async def test_an_edit_sends_the_previous_image_as_the_reference(make_settings) -> None:
    first = await draw(make_settings, TestImageGenerationModel(), replace(deps(), images=Grant()))
    editor = TestImageGenerationModel()

    reply = await draw(make_settings, editor, replace(deps(), images=Grant()), edit=True, history=first.messages)

    [reference] = editor.last_images
    assert isinstance(reference, BinaryImage) and reference.data == first.images[0].data
    assert len(reply.images) == 1


async def test_an_edit_of_a_members_attachment_sends_it(make_settings) -> None:
    first = await draw(make_settings, TestImageGenerationModel(), replace(deps(), images=Grant()))
    attached = BinaryContent(png(4, 4), media_type="image/png")

    found = latest_image([*first.messages, prompt_of(["what is this", attached])])

    assert found is not None and found.data == attached.data


def prompt_of(content: list[Any]) -> ModelMessage:
    return ModelRequest(parts=[UserPromptPart(content)])


async def test_past_the_daily_limit_the_answer_is_one_line_and_no_image_model_is_called(make_settings) -> None:
    image_model = TestImageGenerationModel()
    grant = Grant(left=0)

    reply = await draw(make_settings, image_model, replace(deps(), images=grant))

    assert reply.text == LIMIT_LINE and reply.limited == "images" and reply.images == ()
    assert image_model.last_settings is None  # never called
    assert grant.made_results == []


async def test_where_parley_may_not_attach_files_the_answer_is_one_line(make_settings) -> None:
    grant = Grant(upload_limit=0)

    reply = await draw(make_settings, TestImageGenerationModel(), replace(deps(), images=grant))

    assert reply.text == NO_FILES_HERE and grant.claims == 0


async def test_the_providers_content_filter_is_one_line_and_ends_the_claim(make_settings) -> None:
    grant = Grant()

    reply = await draw(make_settings, Filtered(), replace(deps(), images=grant))

    assert reply.text == FILTERED and reply.images == ()
    assert grant.made_results == [None]


async def test_an_image_over_the_upload_limit_is_made_smaller(make_settings) -> None:
    grant = Grant(upload_limit=400_000)

    reply = await draw(make_settings, Huge(), replace(deps(), images=grant))

    [image] = reply.images
    assert len(image.data) <= 400_000 and image.media_type == "image/jpeg"


async def test_an_image_that_cannot_be_made_small_enough_is_one_line(make_settings) -> None:
    reply = await draw(make_settings, Huge(), replace(deps(), images=Grant(upload_limit=1_000)))

    assert reply.text == TOO_LARGE and reply.images == ()


async def test_an_answer_that_may_make_no_images_is_not_offered_the_tool(make_settings) -> None:
    seen: list[AgentInfo] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(info)
        return ModelResponse(parts=[TextPart("done")])

    settings = make_settings(image_model="openai:gpt-image-1")
    toolbox = build_toolbox(settings, images=ImageGenerator(TestImageGenerationModel()))
    responder = build_responder(settings, model=FunctionModel(model), toolbox=toolbox)
    message = msg(ALICE, "Alice", "draw a fox")
    without_images = replace(deps(), images=Grant(), offered_toolsets=frozenset({"memory"}))

    await generate_reply(responder, conversation_of(message), message, without_images)
    await generate_reply(responder, conversation_of(message), message, deps())  # no grant: no images

    assert all("generate_image" not in [tool.name for tool in info.function_tools] for info in seen)


async def test_made_images_leave_the_history_with_the_members_images(make_settings) -> None:
    reply = await draw(make_settings, TestImageGenerationModel(), replace(deps(), images=Grant()))
    later = [*reply.messages, prompt_of(["and then?"]), prompt_of(["and then?"])]

    assert images_made(expire_images(later, 3, also=without_made_image)) == list(reply.images)
    assert images_made(expire_images(later, 2, also=without_made_image)) == []


def native_drawing_model(offered: list[bool]) -> FunctionModel:
    """An answer model whose provider draws itself: an image and a line when its native image tool is offered."""

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        native = [tool for tool in info.model_request_parameters.native_tools if tool.kind == "image_generation"]
        offered.append(bool(native))
        if not native:
            return ModelResponse(parts=[TextPart("I can't draw right now.")])
        return ModelResponse(parts=[FilePart(BinaryImage(data=png(4, 4), media_type="image/png")), TextPart("Done.")])

    return FunctionModel(model)


async def native_draw(make_settings: Any, grant: Grant, offered: list[bool]) -> Reply:
    settings = make_settings(image_model="native")
    responder = build_responder(settings, model=native_drawing_model(offered), toolbox=build_toolbox(settings))
    message = msg(ALICE, "Alice", "draw a fox")
    return await generate_reply(responder, conversation_of(message), message, replace(deps(), images=grant))


async def test_the_answer_models_own_image_tool_draws_and_its_image_is_counted_after(make_settings) -> None:
    offered: list[bool] = []
    grant = Grant()

    reply = await native_draw(make_settings, grant, offered)

    assert offered == [True] and reply.text == "Done."
    [image] = reply.images
    assert not image.counted and image.media_type == "image/png"
    assert grant.claims == 0  # counted by the answer's tail once it is posted (answering/outcome.py)


async def test_the_native_image_tool_is_not_offered_past_the_limit(make_settings) -> None:
    offered: list[bool] = []

    reply = await native_draw(make_settings, Grant(left=0), offered)

    assert offered == [False] and reply.images == ()


class Slow(TestImageGenerationModel):
    """An image model that never answers (until the answer is stopped); `started` once it is asked."""

    def __init__(self) -> None:
        super().__init__()
        self.started = asyncio.Event()

    async def generate(self, prompt: str, **options: Any) -> ImageGenerationResult:
        self.started.set()
        await asyncio.Event().wait()
        raise AssertionError("never")


async def test_an_answer_stopped_while_drawing_ends_its_claim(make_settings) -> None:
    grant = Grant()
    slow = Slow()
    drawing = asyncio.create_task(draw(make_settings, slow, replace(deps(), images=grant)))
    await slow.started.wait()

    drawing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await drawing

    assert grant.claims == 1 and grant.made_results == [None]


class Failing(TestImageGenerationModel):
    """An image model whose provider is down."""

    async def generate(self, prompt: str, **options: Any) -> ImageGenerationResult:
        raise RuntimeError("503 from the provider, quoting the prompt: a red fox")


async def test_an_image_model_that_fails_gives_the_model_a_line_and_ends_the_claim(make_settings) -> None:
    grant = Grant()
    seen: list[list[ModelMessage]] = []

    reply = await draw(make_settings, Failing(), replace(deps(), images=grant), seen=seen)

    assert reply.text == "Here is your fox." and reply.images == ()
    [returned] = [p for p in seen[-1][-1].parts if isinstance(p, ToolReturnPart)]
    assert returned.content == FAILED
    assert grant.made_results == [None]


async def test_an_image_the_answer_models_tool_drew_is_fitted_within_the_upload_limit(make_settings) -> None:
    drawn = MadeImage(png(1024, 1024, noise=True), "image/png", NATIVE_ALT_TEXT, counted=False)

    [fitted] = await drawn_to_fit([drawn], 400_000)
    too_large = await drawn_to_fit([drawn], 1_000)

    assert len(fitted.data) <= 400_000 and not fitted.counted
    assert too_large == ()
