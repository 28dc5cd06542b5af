"""Profiles: precedence and sources, PROFILES_FILE's checks, the commands' values in the archive, the tools offered."""

from __future__ import annotations

import re
import sqlite3
from collections import deque
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from pydantic_ai import Agent, ModelMessage, ModelResponse, ToolCallPart, ToolDefinition
from pydantic_ai.models.function import AgentInfo, FunctionModel

from agent import JudgeOutput, LLMJudge
from archive import Archive, ArchiveWriteFailed
from archive.backends import open_archive
from archive.postgres import MIGRATIONS as POSTGRES_MIGRATIONS
from archive.sqlite import MIGRATIONS, SQLiteArchive
from archive.stores import StoreTables
from config import Settings
from conversation import ChannelConversation, utc_now
from profiles.channels import (
    Profiles,
    ProfilesFile,
    ProfilesFileError,
    Source,
    load_profiles_file,
    offered,
    persona_instructions,
)
from records import MessageRecord
from tests.conftest import fresh_postgres_database
from tests.support.archive_contract_support import raw_db, refuse_mode_writes

GUILD, CHANNEL, OTHER_CHANNEL, ALICE = 1000, 2000, 2001, 3000


async def stored_rows(archive: Archive, sql: str) -> list[tuple[Any, ...]]:
    """Rows straight from the backend's tables: what it keeps, beyond what the archive's interface shows."""
    assert isinstance(archive, StoreTables)
    return await archive.read(sql)


@pytest.fixture
def settings(make_settings: Callable[..., Settings]) -> Settings:
    return make_settings(llm_model="base-model", llm_base_url="http://127.0.0.1:9/v1", models="strong,cheap")


@pytest.fixture
async def archive(archive_url: str) -> AsyncIterator[Archive]:
    """An empty archive on each backend in turn."""
    opened = await open_archive(archive_url, retention_days=0)
    yield opened
    await opened.close()


def write_file(tmp_path: Path, text: str, settings: Settings) -> Settings:
    path = tmp_path / "profiles.toml"
    path.write_text(text)
    return settings.model_copy(update={"profiles_file": path})


async def test_each_value_comes_from_the_most_specific_layer(settings: Settings) -> None:
    """Channel command > channel file > server command > server file > default, each value naming its source."""
    profiles = Profiles(
        settings,
        ProfilesFile(
            servers={GUILD: {"persona": "server file", "model": "cheap", "mode": "chatty", "tools": "archive"}},
            channels={CHANNEL: {"persona": "channel file", "model": "strong"}},
        ),
    )
    await profiles.set_value("server", GUILD, CHANNEL, "model", "base-model", ALICE)
    await profiles.set_value("server", GUILD, CHANNEL, "mode", "mention-only", ALICE)
    await profiles.set_value("channel", GUILD, CHANNEL, "persona", "channel command", ALICE)

    here = profiles.resolve(GUILD, CHANNEL)
    assert (here.persona, here["persona"].source, here["persona"].set_by) == (
        "channel command",
        Source.CHANNEL_COMMAND,
        ALICE,
    )
    assert (here.model, here["model"].source) == ("strong", Source.CHANNEL_FILE)
    assert (here.mode, here["mode"].source) == ("mention-only", Source.SERVER_COMMAND)
    assert (here.tool_sets, here["tools"].source) == (frozenset({"archive"}), Source.SERVER_FILE)
    assert (here.judge_model, here["judge_model"].source) == ("base-model", Source.DEFAULT)

    elsewhere = profiles.resolve(GUILD, OTHER_CHANNEL)
    assert (elsewhere.persona, elsewhere.model) == ("server file", "base-model")
    other_server = profiles.resolve(GUILD + 1, OTHER_CHANNEL)
    assert (other_server.persona, other_server.tool_sets, other_server.mode) == ("", None, "normal")


async def test_values_are_checked(settings: Settings) -> None:
    """An unknown model, mode or tool set, or an over-long persona, is refused with the reason; nothing changes."""
    profiles = Profiles(settings)
    for name, value, reason in [
        ("model", "gpt-9", "model 'gpt-9' is not allowed here: choose base-model, cheap, strong"),
        ("judge_model", "gpt-9", "judge model 'gpt-9' is not allowed here"),
        ("mode", "loud", "unknown mode 'loud'"),
        ("tools", "archive, shell", "unknown tool set 'shell'"),
        ("persona", "x" * 2001, "persona is 2,001 characters; at most 2,000"),
    ]:
        with pytest.raises(ValueError, match=reason):
            await profiles.set_value("channel", GUILD, CHANNEL, name, value, ALICE)  # type: ignore[arg-type]
    assert all(value.source is Source.DEFAULT for value in profiles.resolve(GUILD, CHANNEL).values.values())


async def test_tool_lists_are_normalised(settings: Settings) -> None:
    """Names are trimmed, lower-cased and deduplicated; `none` is no tools and `all` every set."""
    profiles = Profiles(settings)
    assert await profiles.set_value("channel", GUILD, CHANNEL, "tools", " Memory, mcp:docs,memory", ALICE) == (
        "memory,mcp:docs"
    )
    assert profiles.resolve(GUILD, CHANNEL).tool_sets == frozenset({"memory", "mcp:docs"})
    await profiles.set_value("channel", GUILD, CHANNEL, "tools", "none", ALICE)
    assert profiles.resolve(GUILD, CHANNEL).tool_sets == frozenset()
    await profiles.set_value("channel", GUILD, CHANNEL, "tools", "all", ALICE)
    assert profiles.resolve(GUILD, CHANNEL).tool_sets is None


def test_offered_keeps_the_tools_of_the_offered_sets() -> None:
    """Archive and memory tools follow the profile's sets; others pass: their own tool sets withhold themselves."""
    tools = [
        ToolDefinition(name="search_history"),
        ToolDefinition(name="recall"),
        ToolDefinition(name="search_web"),
    ]

    def names(sets: frozenset[str] | None) -> list[str]:
        return [tool.name for tool in offered(tools, sets)]

    assert names(None) == ["search_history", "recall", "search_web"]
    assert names(frozenset({"memory", "web"})) == ["recall", "search_web"]
    assert names(frozenset()) == ["search_web"]


def test_persona_is_framed_as_the_operators_configuration() -> None:
    """The persona is added under a header saying who wrote it; no persona adds nothing."""
    framed = persona_instructions("Be terse.")
    assert framed is not None and framed.endswith("\nBe terse.") and "operators of this Discord server" in framed
    assert persona_instructions("") is None


# --- PROFILES_FILE --------------------------------------------------------------------------------


def test_the_file_is_read(tmp_path: Path, settings: Settings) -> None:
    """Server and channel tables become the file's layers, with values normalised."""
    settings = write_file(
        tmp_path,
        f'[servers.{GUILD}]\npersona = "  Hi.  "\ntools = ["Archive"]\n\n[channels."{CHANNEL}"]\nmode = "chatty"\n',
        settings,
    )
    loaded = load_profiles_file(settings)
    assert loaded.servers == {GUILD: {"persona": "Hi.", "tools": "archive"}}
    assert loaded.channels == {CHANNEL: {"mode": "chatty"}}


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (
            '[channels.1]\nmode = "chatty"\nmode = "normal"\n',
            "line 3: not valid TOML: Cannot overwrite a value (column 16)",
        ),
        ('[channels.1]\npersona = "ok"\nvoice = "loud"\n', "line 3: unknown setting 'voice': use persona, model,"),
        ('[channels.1]\n\nmodel = "gpt-9"\n', "line 3: model 'gpt-9' is not allowed here: choose base-model, cheap"),
        ('[channels.general]\nmode = "chatty"\n', "line 1: [channels.general]: 'general' is not a Discord id"),
        ('[users.1]\nmode = "chatty"\n', "line 1: unknown table [users]: use [servers.<id>] or [channels.<id>]"),
        ("[servers.1]\ntools = 5\n", "line 2: tools must be a list of tool set names"),
        ("[servers.1]\nmode = 3\n", "line 2: mode must be text"),
    ],
)
def test_an_invalid_file_is_one_line_naming_file_line_and_problem(
    tmp_path: Path, settings: Settings, text: str, problem: str
) -> None:
    """Each kind of mistake is reported on one line with the file, the line number and what is wrong."""
    settings = write_file(tmp_path, text, settings)
    with pytest.raises(ProfilesFileError) as raised:
        load_profiles_file(settings)
    message = str(raised.value)
    assert message.startswith(f"PROFILES_FILE {tmp_path / 'profiles.toml'}, {problem}") and "\n" not in message


def test_a_missing_file_is_named(tmp_path: Path, settings: Settings) -> None:
    """A PROFILES_FILE that does not exist is one line naming it."""
    settings = settings.model_copy(update={"profiles_file": tmp_path / "absent.toml"})
    with pytest.raises(ProfilesFileError, match=r"^PROFILES_FILE .*absent\.toml cannot be read: "):
        load_profiles_file(settings)


# --- The archive ----------------------------------------------------------------------------------


async def test_command_values_survive_in_the_archive(archive: Archive, settings: Settings) -> None:
    """Values set by command are read back by a new Profiles with who set them; a reset one is gone."""
    profiles = Profiles(settings)
    await profiles.attach(archive)
    await profiles.set_value("channel", GUILD, CHANNEL, "persona", "Be terse.", ALICE)
    await profiles.set_value("server", GUILD, CHANNEL, "model", "cheap", ALICE)
    await profiles.set_value("channel", GUILD, CHANNEL, "mode", "chatty", ALICE)
    assert await profiles.reset_values("channel", GUILD, CHANNEL, ["mode", "tools"]) == ["mode"]

    again = Profiles(settings)
    await again.attach(archive)
    profile = again.resolve(GUILD, OTHER_CHANNEL)
    assert (profile.model, profile["model"].source, profile["model"].set_by) == ("cheap", Source.SERVER_COMMAND, ALICE)
    here = again.resolve(GUILD, CHANNEL)
    assert (here.persona, here.mode) == ("Be terse.", "normal")


async def test_a_value_no_longer_allowed_is_left_out_at_start(
    archive: Archive,
    settings: Settings,
    make_settings: Callable[..., Settings],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A model dropped from MODELS since it was chosen falls back to the next layer, with a warning."""
    profiles = Profiles(settings)
    await profiles.attach(archive)
    await profiles.set_value("channel", GUILD, CHANNEL, "model", "strong", ALICE)
    narrower = make_settings(llm_model="base-model", llm_base_url="http://127.0.0.1:9/v1", models="cheap")
    again = Profiles(narrower)
    await again.attach(archive)
    assert again.resolve(GUILD, CHANNEL).model == "base-model"
    assert f"ignoring the stored model of channel {CHANNEL}: model 'strong' is not allowed here" in caplog.text


async def test_a_value_that_cannot_be_stored_raises_and_keeps_the_old_one(
    archive: Archive, settings: Settings, archive_url: str, tmp_path: Path
) -> None:
    """When the archive drops the write the caller hears of it, and the profile keeps its previous value."""
    profiles = Profiles(settings)
    await profiles.attach(archive)
    await profiles.set_value("channel", GUILD, CHANNEL, "mode", "chatty", ALICE)
    await refuse_mode_writes(archive_url, tmp_path / "data" / "parley.db", "UPDATE")
    with pytest.raises(ArchiveWriteFailed):
        await profiles.set_value("channel", GUILD, CHANNEL, "mode", "normal", ALICE)
    assert profiles.resolve(GUILD, CHANNEL).mode == "chatty"


async def test_a_deleted_channel_or_left_server_takes_its_values(archive: Archive, settings: Settings) -> None:
    """The archive drops a channel's values with the channel, and a server's (its channels' too) with the server."""
    profiles = Profiles(settings)
    await profiles.attach(archive)
    await profiles.set_value("channel", GUILD, CHANNEL, "persona", "one", ALICE)
    await profiles.set_value("channel", GUILD, OTHER_CHANNEL, "persona", "two", ALICE)
    await profiles.set_value("server", GUILD, CHANNEL, "persona", "three", ALICE)
    archive.delete_channel(CHANNEL)
    await archive.flush()
    assert await stored_rows(archive, "SELECT scope_id FROM profile_settings ORDER BY scope_id") == [
        (GUILD,),
        (OTHER_CHANNEL,),
    ]
    archive.delete_guild(GUILD)
    await archive.flush()
    assert await stored_rows(archive, "SELECT count(*) FROM profile_settings") == [(0,)]
    profiles.forget(GUILD)
    assert profiles.resolve(GUILD, OTHER_CHANNEL).persona == ""


async def test_the_modes_of_an_older_archive_move_into_profiles(tmp_path: Path, settings: Settings) -> None:
    """A v7 archive's channel modes become the channels' command-set modes, with no setter recorded."""
    path = tmp_path / "old.db"
    with raw_db(path) as db:
        for number, migration in enumerate(MIGRATIONS[:7], start=1):
            db.executescript(migration)
            db.execute(f"PRAGMA user_version = {number}")
        db.execute("INSERT INTO channel_settings VALUES (?, ?, 'chatty', 1700000000000)", (CHANNEL, GUILD))
    archive = await SQLiteArchive.open(path, retention_days=0)
    try:
        profiles = Profiles(settings)
        await profiles.attach(archive)
        mode = profiles.resolve(GUILD, CHANNEL)["mode"]
        assert (mode.value, mode.source, mode.set_by) == ("chatty", Source.CHANNEL_COMMAND, None)
    finally:
        await archive.close()
    with pytest.raises(sqlite3.OperationalError), raw_db(path) as db:
        db.execute("SELECT * FROM channel_settings")


async def test_the_modes_of_an_older_postgres_archive_move_into_profiles(
    postgres_server: str, settings: Settings
) -> None:
    """On Postgres too, a v10 archive's channel modes become the channels' command-set modes."""
    url = await fresh_postgres_database(postgres_server)
    connection = await asyncpg.connect(url)
    try:
        await connection.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
        for number, migration in enumerate(POSTGRES_MIGRATIONS[:10], start=1):
            await connection.execute(migration)
            await connection.execute("INSERT INTO schema_version (version) VALUES ($1)", number)
        await connection.execute(
            "INSERT INTO channel_settings VALUES ($1, $2, 'chatty', 1700000000000)", CHANNEL, GUILD
        )
    finally:
        await connection.close()
    archive = await open_archive(url, retention_days=0)
    try:
        profiles = Profiles(settings)
        await profiles.attach(archive)
        mode = profiles.resolve(GUILD, CHANNEL)["mode"]
        assert (mode.value, mode.source, mode.set_by) == ("chatty", Source.CHANNEL_COMMAND, None)
    finally:
        await archive.close()


# --- The judge --------------------------------------------------------------------------------------


async def test_the_judge_runs_on_the_channels_model() -> None:
    """`model_for` picks the judge's model per channel; without one the agent's own model decides."""
    asked: list[str] = []

    def verdict(name: str) -> Any:
        def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            asked.append(name)
            args = {"respond": True, "confidence": 0.9, "reason": "asked"}
            return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, args)])

        return FunctionModel(answer)

    judge = LLMJudge(Agent(verdict("default"), output_type=JudgeOutput))
    strong = verdict("strong")
    judge.model_for = lambda channel_id: strong if channel_id == CHANNEL else None
    for channel_id in (CHANNEL, OTHER_CHANNEL):
        message = MessageRecord(1, channel_id, ALICE, "alice", "hi", utc_now())
        now = utc_now()
        assert (await judge(message, ChannelConversation(channel_id, now, now, deque())))[0] is True
    assert asked == ["strong", "default"]


def test_the_configuration_pages_example_file_is_valid(tmp_path: Path, make_settings: Callable[..., Settings]) -> None:
    """The PROFILES_FILE example on the Configuration page loads with the MODELS it names."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "configuration.md").read_text()
    [example] = re.findall(r"^```toml\n(.*?)^```", page, re.MULTILINE | re.DOTALL)
    settings = make_settings(models="anthropic:claude-sonnet-4-5")
    loaded = load_profiles_file(write_file(tmp_path, example, settings))
    [server] = loaded.servers.values()
    [channel] = loaded.channels.values()
    assert server["tools"] == "archive,memory" and channel["model"] == "anthropic:claude-sonnet-4-5"


def test_a_channels_place_is_looked_up_once_its_server_is_known(settings: Settings) -> None:
    """The decider's mode lookups ask `place` once per channel; a channel whose server is unknown is asked again."""
    profiles = Profiles(settings, ProfilesFile(servers={GUILD: {"mode": "chatty"}}))
    asked: list[int] = []

    def place(channel_id: int) -> tuple[int | None, int]:
        asked.append(channel_id)
        return (GUILD if channel_id == CHANNEL else None), channel_id

    profiles.place = place
    assert [profiles.modes.get(CHANNEL) for _ in range(3)] == ["chatty"] * 3
    assert [profiles.modes.get(OTHER_CHANNEL, "normal") for _ in range(2)] == ["normal"] * 2
    assert asked == [CHANNEL, OTHER_CHANNEL, OTHER_CHANNEL]
    assert CHANNEL in profiles.modes and OTHER_CHANNEL not in profiles.modes
