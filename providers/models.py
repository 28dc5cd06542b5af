"""The models Parley runs on, built from the settings without any network call, and their retries and closing.

A provider's SDK is imported when a model of it is built (pydantic-ai's `infer_model` does the same), so a run
with one provider loads only that one: the openai SDK alone takes about half a second to import.
"""

from __future__ import annotations

import inspect
import sys
from functools import partial
from typing import TYPE_CHECKING, Any

from pydantic_ai import ModelSettings
from pydantic_ai.models import Model, infer_model
from pydantic_ai.providers import Provider, infer_provider_class
from pydantic_ai.providers.gateway import gateway_provider

from config import Settings
from providers.tool_schemas import shape_tool_schemas_once

if TYPE_CHECKING:
    from providers.openai_transport import UntransformedOpenAI

# The provider name recorded on responses from LLM_BASE_URL's server, in history and telemetry.
OPENAI_COMPATIBLE_SERVER = "llm-server"


def build_model(settings: Settings, model_name: str | None = None, *, max_retries: int | None = None) -> Model:
    """The model for `model_name` (default: LLM_MODEL), built without any network call.

    With LLM_BASE_URL, the name is sent verbatim to that OpenAI-compatible server (vLLM, Ollama,
    LM Studio, ...), through a client that retries transient errors `max_retries` times (default:
    MODEL_RETRIES). Otherwise it is a pydantic-ai model string such as `openai:gpt-4.1-mini`;
    LLM_API_KEY, when set, goes to its provider, else the provider's own variable (OPENAI_API_KEY, ...)
    applies, and retries are left to `retry_settings`. Its requests' tool schemas are shaped once per schema
    (providers/tool_schemas.py).
    """
    return shape_tool_schemas_once(_model_named(settings, model_name or settings.llm_model, max_retries))


def _model_named(settings: Settings, name: str, max_retries: int | None) -> Model:
    api_key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else None
    if settings.llm_base_url:
        from openai import DefaultAioHttpClient
        from pydantic_ai.models.openai import OpenAIChatModel
        from pydantic_ai.providers.openai_compatible import OpenAICompatibleProvider

        from providers.openai_transport import UntransformedOpenAI

        client = UntransformedOpenAI(
            base_url=settings.llm_base_url,
            # The SDK insists on a key; a server that needs none ignores this one.
            api_key=api_key or "api-key-not-set",
            max_retries=settings.model_retries if max_retries is None else max_retries,
            # aiohttp, which discord.py already runs, as the HTTP transport: the SDK documents it as the
            # faster option and ships it, and its C parser saved about 0.25 ms a request over httpx's h11.
            http_client=DefaultAioHttpClient(),
        )
        # Not OpenAIProvider: that one is for OpenAI itself, would send OPENAI_API_KEY to this server and
        # assume OpenAI-only features; this one also guards self-hosted chat templates' special tokens.
        provider = OpenAICompatibleProvider(OPENAI_COMPATIBLE_SERVER, openai_client=client)
        return OpenAIChatModel(name, provider=provider)
    if api_key is None:
        return infer_model(name)
    return infer_model(name, provider_factory=partial(_provider_with_key, api_key=api_key))


async def close_model(model: Model | str | None) -> None:
    """Close the connections of a model (an agent's `model`) `build_model` made for LLM_BASE_URL; others have none."""
    client = _base_url_client(model)
    if client is not None:
        await client.close()


def retry_settings(model: Model, max_retries: int) -> ModelSettings | None:
    """The settings that make `model`'s SDK retry transient errors `max_retries` times; None if its client already does.

    `ModelSettings.max_retries` works for every provider, but pydantic-ai applies it by copying the
    SDK client for each request, and the copy looks up the platform in a worker thread: a thread hop
    before every request. `build_model` gives the LLM_BASE_URL client its retries up front instead.
    """
    client = _base_url_client(model)
    if client is not None and client.max_retries == max_retries:
        return None
    return ModelSettings(max_retries=max_retries)


def _base_url_client(model: Model | str | None) -> UntransformedOpenAI | None:
    """The LLM_BASE_URL client `build_model` made for `model`, if it made one (only then is its module loaded)."""
    transport = sys.modules.get("providers.openai_transport")
    client = getattr(model, "client", None)
    return client if transport is not None and isinstance(client, transport.UntransformedOpenAI) else None


def _provider_with_key(provider_name: str, *, api_key: str) -> Provider[Any]:
    """The provider `infer_model` would build for `provider_name`, given `api_key` where it takes one."""
    if provider_name.startswith("gateway/"):
        # The gateway's provider class is the upstream one; building that directly would bypass the gateway.
        return gateway_provider(provider_name.removeprefix("gateway/"), api_key=api_key)
    provider_class = infer_provider_class(provider_name)
    if "api_key" in inspect.signature(provider_class).parameters:
        return provider_class(api_key=api_key)  # type: ignore[call-arg]
    return provider_class()
