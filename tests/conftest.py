"""Shared test setup: no test may reach a real model provider."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import discord
import pydantic_ai.models
import pytest
from e2e_support import RunningBot
from fake_discord import FakeDiscord
from fake_llm import FakeLLM, allow_model_requests

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


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as server:
        yield server


@pytest.fixture
async def llm() -> AsyncIterator[FakeLLM]:
    async with FakeLLM() as server:
        yield server


@pytest.fixture
def discord_endpoints() -> Iterator[None]:
    """bot.py points discord.py's class-level endpoints at the fakes; put Discord's back afterwards."""
    saved = discord.http.Route.BASE, discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY
    yield
    discord.http.Route.BASE, discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = saved


@pytest.fixture
async def bot(fake: FakeDiscord, llm: FakeLLM, tmp_path: Path, discord_endpoints) -> AsyncIterator[RunningBot]:
    running = RunningBot(fake, llm, tmp_path)
    with allow_model_requests():
        yield running
        await running.stop()
    assert fake.handler_errors == [] and llm.handler_errors == []
