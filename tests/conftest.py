"""Shared test setup: no test may reach a real model provider."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pydantic_ai.models
import pytest

from config import Settings

pydantic_ai.models.ALLOW_MODEL_REQUESTS = False


@pytest.fixture
def make_settings(monkeypatch: pytest.MonkeyPatch) -> Callable[..., Settings]:
    """Build `Settings` from keyword overrides only, ignoring the developer's environment and `.env`."""
    for name in ("LLM_MODEL", "LLM_BASE_URL", "LLM_API_KEY", "JUDGE_MODEL", "DATABASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)

    def make(**overrides: Any) -> Settings:
        return Settings(_env_file=None, **{"discord_token": "test-token", **overrides})

    return make
