"""What model providers take: the transcription model, and telling a provider that refuses images."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from pydantic_ai.exceptions import ModelHTTPError

from config import Settings
from files.kinds import Transcriber
from records import AttachmentInfo

if TYPE_CHECKING:
    from pydantic_ai.models import Model


def build_transcriber(settings: Settings) -> Transcriber | None:
    """TRANSCRIPTION_MODEL on LLM_BASE_URL's server (or OpenAI's), through the openai SDK; None when it is unset."""
    model_name = settings.transcription_model
    if not model_name:
        return None
    api_key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else None
    if api_key is None and settings.llm_base_url:
        # As for the chat model: the SDK insists on a key, and a local server that needs none ignores it.
        api_key = "api-key-not-set"

    async def transcribe(info: AttachmentInfo, data: bytes) -> str:
        from openai import AsyncOpenAI

        upload = (info.filename or "voice-message.ogg", data, info.content_type or "audio/ogg")
        async with AsyncOpenAI(
            base_url=settings.llm_base_url, api_key=api_key, max_retries=settings.model_retries
        ) as client:
            result = await client.audio.transcriptions.create(model=model_name, file=upload)
        return result.text

    return transcribe


def model_key(model: Model) -> str:
    return f"{model.system}:{model.model_name}"


# --- Providers that refuse images ---------------------------------------------------------------

# Bad request, unsupported media type, unprocessable: what servers answer a request they cannot take.
_REFUSAL_STATUSES = frozenset({400, 415, 422})
_IMAGE_WORDS = re.compile(r"image|vision|multimodal|multi-modal", re.IGNORECASE)
_REFUSAL_WORDS = re.compile(
    r"not support|unsupported|only supported|not a multimodal|cannot (?:process|read|accept)|does not accept",
    re.IGNORECASE,
)


def is_image_refusal(error: BaseException | None) -> bool:
    """Whether `error` (or what it was raised from) is a provider saying the model takes no images."""
    seen = 0
    while error is not None and seen < 5:
        if isinstance(error, ModelHTTPError) and error.status_code in _REFUSAL_STATUSES:
            text = f"{error.message} {error.body}"
            if _IMAGE_WORDS.search(text) and _REFUSAL_WORDS.search(text):
                return True
        error = error.__cause__ or error.__context__
        seen += 1
    return False
