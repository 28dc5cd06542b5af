"""The image model IMAGE_MODEL names, built from the settings without any network call.

pydantic-ai's `ImageGenerator` calls the provider's images API (OpenAI's, Google's, xAI's) with the provider's own
key (OPENAI_API_KEY, ...). With LLM_BASE_URL set, an `openai:` image model is that server's instead, with LLM_API_KEY,
as the transcription model is (files/providers.py): one OpenAI-compatible server serves what Parley asks of it.
"""

from __future__ import annotations

from pydantic_ai.images import ImageGenerator

from config import NATIVE_IMAGES, Settings

# The providers whose images API pydantic-ai calls directly (pydantic_ai.images.infer_image_generation_model).
DIRECT_IMAGE_PROVIDERS = ("openai", "google", "google-cloud", "xai")


def build_image_generator(settings: Settings) -> ImageGenerator | None:
    """IMAGE_MODEL's generator; None when it is unset or `native` (the answer model's own tool draws)."""
    name = settings.image_model
    if name is None or name == NATIVE_IMAGES:
        return None
    provider, _, model_name = name.partition(":")
    if settings.llm_base_url and provider == "openai":
        from openai import AsyncOpenAI
        from pydantic_ai.images.openai import OpenAIImageGenerationModel
        from pydantic_ai.providers.openai import OpenAIProvider

        api_key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else "api-key-not-set"
        client = AsyncOpenAI(base_url=settings.llm_base_url, api_key=api_key, max_retries=settings.model_retries)
        return ImageGenerator(OpenAIImageGenerationModel(model_name, provider=OpenAIProvider(openai_client=client)))
    return ImageGenerator(name)
