"""Shared test setup: no test may reach a real model provider, or depend on the developer's shell or `.env`."""

from __future__ import annotations

import os
import re
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

PARLEY_SETTINGS = frozenset(name.upper() for name in Settings.model_fields)
# What model providers, their SDKs and Logfire read: keys, endpoints, and Logfire's own settings.
PROVIDER_VARIABLE = re.compile(r"_API_KEY$|_BASE_URL$|^(OPENAI|ANTHROPIC|LOGFIRE|AWS|HF)_")
# Names a test may set (bot.main copies `.env` into the environment): removed again after each test.
SET_BY_TESTS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GROQ_API_KEY", "LLM_API_KEY", "LOGFIRE_TOKEN")


def foreign_variables() -> list[str]:
    """The Parley settings and provider variables in this process's environment."""
    return [name for name in os.environ if name.upper() in PARLEY_SETTINGS or PROVIDER_VARIABLE.search(name)]


@pytest.fixture(autouse=True)
def hermetic(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Every test starts without the shell's Parley settings and provider keys, in an empty folder (so no `.env`)."""
    for name in {*foreign_variables(), *PARLEY_SETTINGS, *SET_BY_TESTS}:
        # Set first, so monkeypatch also removes whatever the test itself puts there.
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def make_settings() -> Callable[..., Settings]:
    """Build `Settings` from keyword overrides only (the `hermetic` fixture keeps the shell and `.env` out)."""

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
