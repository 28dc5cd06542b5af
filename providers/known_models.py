"""The model names each provider is known to have, offline: pydantic-ai's `KnownModelName` and genai-prices' data.

`--check` uses them to catch a model string its provider does not know (`openai:gpt-9`) and to suggest the one meant
(`gpt-4o` is `openai:gpt-4o`, `openai/gpt-4o-mini` is `openai:gpt-4o-mini`). Both lists trail the providers' own
releases, so a name missing from them may still be a real (new or fine-tuned) model.
"""

from __future__ import annotations

import difflib
import functools
from typing import get_args

from genai_prices import data as prices
from genai_prices.types import Provider
from pydantic_ai.images import KnownImageGenerationModelName
from pydantic_ai.models import KnownModelName

# pydantic-ai's provider prefixes whose models genai-prices lists, by its provider id. A prefix not here (ollama,
# openrouter, a gateway, ...) has no offline list, and its model names are left to the provider.
PRICES_PROVIDER = {
    "openai": "openai",
    "openai-chat": "openai",
    "openai-responses": "openai",
    "anthropic": "anthropic",
    "google": "google",
    "google-gla": "google",
    "google-vertex": "google",
    "mistral": "mistral",
    "groq": "groq",
    "deepseek": "deepseek",
    "xai": "x-ai",
    "grok": "x-ai",
    "cohere": "cohere",
    "cerebras": "cerebras",
    "moonshotai": "moonshotai",
    "bedrock": "aws",
}
# Where a bare model name is looked for, in this order: the providers that made the models first, so `claude-…`
# is Anthropic's although Google and Bedrock serve it too.
BARE_NAME_PROVIDERS = ("openai", "anthropic", "google", "mistral", "groq", "deepseek", "xai", "cohere")
# How alike a name must be to a known one to be suggested (difflib's ratio).
_LIKENESS = 0.6


@functools.cache
def _pydantic_ai_names(prefix: str) -> frozenset[str]:
    names = get_args(KnownModelName.__value__)
    return frozenset(name.split(":", 1)[1] for name in names if name.startswith(f"{prefix}:"))


@functools.cache
def _prices_provider(prefix: str) -> Provider | None:
    wanted = PRICES_PROVIDER.get(prefix)
    return next((provider for provider in prices.providers if provider.id == wanted), None)


def has_model_list(prefix: str) -> bool:
    """Whether the provider `prefix` (pydantic-ai's: `openai`, `anthropic`, ...) has a model list offline."""
    return _prices_provider(prefix) is not None


def known_names(prefix: str) -> list[str]:
    """The model names the provider is known to have, sorted."""
    provider = _prices_provider(prefix)
    listed = {model.id for model in provider.models} if provider is not None else set()
    return sorted(_pydantic_ai_names(prefix) | listed)


def is_known(prefix: str, name: str) -> bool:
    """Whether `name` is one of the provider's models (genai-prices also matches its dated and suffixed forms)."""
    provider = _prices_provider(prefix)
    return name in _pydantic_ai_names(prefix) or (provider is not None and provider.find_model(name) is not None)


def closest(prefix: str, name: str) -> str | None:
    """The provider's model name most like `name`, as a model string (`openai:gpt-4o`); None if none is alike."""
    found = difflib.get_close_matches(name, known_names(prefix), n=1, cutoff=_LIKENESS)
    return f"{prefix}:{found[0]}" if found else None


def suggestion(model: str) -> str | None:
    """The model string meant by `model`, one pydantic-ai cannot read: a bare name with its provider's prefix
    (`gpt-4o` -> `openai:gpt-4o`, the closest known name if it is not one), or a slash for the colon
    (`openai/gpt-4o-mini` -> `openai:gpt-4o-mini`); None when no provider is recognisable."""
    if ":" in model:
        return None
    prefix, slash, rest = model.partition("/")
    if slash and has_model_list(prefix):
        return f"{prefix}:{rest}" if is_known(prefix, rest) else closest(prefix, rest)
    for prefix in BARE_NAME_PROVIDERS:
        if is_known(prefix, model):
            return f"{prefix}:{model}"
    likely = [found for prefix in BARE_NAME_PROVIDERS if (found := closest(prefix, model))]
    # The likest name, the first provider's on a tie (max keeps the first of equals).
    return max(likely, key=lambda found: _likeness(model, found.split(":", 1)[1]), default=None)


def _likeness(name: str, known: str) -> float:
    return difflib.SequenceMatcher(None, name, known).ratio()


def known_image_models() -> list[str]:
    """The image models pydantic-ai knows by name (`openai:gpt-image-2`, ...), as IMAGE_MODEL names them."""
    return sorted(get_args(KnownImageGenerationModelName.__value__))


def is_known_image_model(model: str) -> bool:
    """Whether IMAGE_MODEL's `model` is one pydantic-ai lists, or one genai-prices prices under its provider (the
    older `openai:gpt-image-1` is priced, not listed)."""
    prefix, _, name = model.partition(":")
    return model in known_image_models() or (prefix == "openai" and is_known(prefix, name) and "image" in name)


def closest_image_model(model: str) -> str | None:
    """The known image model most like `model`; None if none is alike."""
    found = difflib.get_close_matches(model, known_image_models(), n=1, cutoff=_LIKENESS)
    return found[0] if found else None
