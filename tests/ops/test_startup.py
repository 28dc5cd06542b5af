"""Tests for what happens before Parley connects: `.env` and `.env.example`, configuration checks, --check."""

from __future__ import annotations

import importlib.util
import logging
import os
import re
import shutil
import socket
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot import build_client, main
from config import Settings
from ops.cli import parse_args
from ops.preflight import export_dotenv_variables, invite_link, parley_version
from profiles.channels import ProfilesFile
from tests.fakes.fake_llm import MODEL_NAME

ROOT = Path(__file__).resolve().parents[2]
ENV_EXAMPLE = ROOT / ".env.example"


def forget_after_test(monkeypatch: pytest.MonkeyPatch, *names: str) -> None:
    """Unset `names` now and again when the test ends, whatever the code under test puts in os.environ."""
    for name in names:
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)


def default_text(name: str) -> str:
    """A setting's default as .env.example and the README write it; empty when it has none."""
    field = Settings.model_fields[name]
    if field.is_required() or field.default is None or field.default == frozenset():
        return ""
    return str(field.default).lower() if isinstance(field.default, bool) else str(field.default)


# --- Provider keys in .env ---------------------------------------------------------------------


def test_provider_keys_and_logfire_token_in_dotenv_reach_the_environment(monkeypatch, tmp_path: Path) -> None:
    """OPENAI_API_KEY and GROQ_API_KEY in .env reach os.environ for the providers; LOGFIRE_TOKEN reaches Settings."""
    forget_after_test(monkeypatch, "OPENAI_API_KEY", "GROQ_API_KEY")
    env_file = tmp_path / ".env"
    env_file.write_text(
        "DISCORD_TOKEN=t\nOPENAI_API_KEY=sk-from-file\nGROQ_API_KEY=gsk-from-file\nLOGFIRE_TOKEN=pylf-from-file\n"
    )
    exported = export_dotenv_variables(env_file)
    assert sorted(exported) == ["GROQ_API_KEY", "OPENAI_API_KEY"]
    assert os.environ["OPENAI_API_KEY"] == "sk-from-file"
    assert os.environ["GROQ_API_KEY"] == "gsk-from-file"
    token = Settings(_env_file=env_file).logfire_token  # a Parley setting: read from .env by Settings itself
    assert token is not None and token.get_secret_value() == "pylf-from-file"


def test_environment_wins_over_dotenv(monkeypatch, tmp_path: Path) -> None:
    """A key already exported keeps its value; .env fills in only what is missing."""
    forget_after_test(monkeypatch, "ANTHROPIC_API_KEY")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-exported")
    env_file = tmp_path / ".env"
    env_file.write_text("OPENAI_API_KEY=sk-from-file\nANTHROPIC_API_KEY=sk-ant-from-file\n")
    assert export_dotenv_variables(env_file) == ["ANTHROPIC_API_KEY"]
    assert os.environ["OPENAI_API_KEY"] == "sk-exported"
    assert os.environ["ANTHROPIC_API_KEY"] == "sk-ant-from-file"


def test_parley_settings_and_empty_lines_stay_out_of_the_environment(monkeypatch, tmp_path: Path) -> None:
    """Settings read .env themselves, and an empty `OPENAI_API_KEY=` (as in .env.example) sets nothing."""
    forget_after_test(monkeypatch, "DISCORD_TOKEN", "OPENAI_API_KEY")
    env_file = tmp_path / ".env"
    env_file.write_text("DISCORD_TOKEN=abc\nOPENAI_API_KEY=\n")
    assert export_dotenv_variables(env_file) == []
    assert "DISCORD_TOKEN" not in os.environ and "OPENAI_API_KEY" not in os.environ


def test_no_dotenv_file_exports_nothing(tmp_path: Path) -> None:
    """Without a .env there is nothing to read and nothing fails."""
    assert export_dotenv_variables(tmp_path / ".env") == []


# --- .env.example --------------------------------------------------------------------------------


def test_env_example_lists_every_setting_with_its_default_and_an_explanation() -> None:
    """Each Settings field is in .env.example as NAME=default (commented out unless required), after a comment."""
    lines = ENV_EXAMPLE.read_text().splitlines()
    for name, field in Settings.model_fields.items():
        variable = name.upper()
        expected = f"{variable}=" if field.is_required() else f"# {variable}={default_text(name)}"
        suggestion = f"add to .env.example:\n# {field.description}\n{expected}"
        assert expected in lines, suggestion
        explanation = lines[lines.index(expected) - 1]
        assert explanation.startswith("# ") and not re.match(r"# [A-Z_]+=", explanation), suggestion
    settings = {name.upper() for name in Settings.model_fields}
    named = {match[1] for line in lines if (match := re.match(r"(?:# )?([A-Z][A-Z_]+)=", line))}
    assert named - settings == {"OPENAI_API_KEY"}  # the provider's key; nothing retired lingers


def test_env_example_with_the_token_filled_in_gives_the_defaults(tmp_path: Path) -> None:
    """Copied to .env as the quick start says, with only the token filled in, every setting keeps its default."""
    env_file = tmp_path / ".env"
    shutil.copy(ENV_EXAMPLE, env_file)
    env_file.write_text(env_file.read_text().replace("\nDISCORD_TOKEN=\n", "\nDISCORD_TOKEN=abc\n"))
    settings = Settings(_env_file=env_file)
    assert settings.discord_token.get_secret_value() == "abc"
    for name in Settings.model_fields:
        if name not in {"discord_token", "judge_model", "summary_model"}:
            assert getattr(settings, name) == Settings.model_fields[name].default, name
    assert settings.judge_model == settings.llm_model
    assert settings.summary_model == settings.judge_model


# --- Checked before connecting: `python bot.py` with Discord out of reach --------------------------


@pytest.fixture
def discord_trap() -> Iterator[socket.socket]:
    """A loopback listener standing in for Discord that never answers: a bot that connects shows up in its queue."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        yield listener


def trap_url(trap: socket.socket) -> str:
    return f"http://127.0.0.1:{trap.getsockname()[1]}/api/v10"


def was_contacted(trap: socket.socket) -> bool:
    trap.setblocking(False)
    try:
        connection, _ = trap.accept()
    except BlockingIOError:
        return False
    connection.close()
    return True


def bot_command(tmp_path: Path, *args: str, dotenv: str = "", **variables: str) -> dict[str, Any]:
    """`python bot.py ARGS` in `tmp_path`, with `dotenv` as its .env and only `variables` (and PATH) exported."""
    (tmp_path / ".env").write_text(dotenv)
    return {
        "args": [sys.executable, str(ROOT / "bot.py"), *args],
        "cwd": tmp_path,
        "env": {"PATH": os.environ["PATH"], **variables},
        "capture_output": True,
        "text": True,
    }


def run_bot(tmp_path: Path, *args: str, dotenv: str = "", **variables: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(**bot_command(tmp_path, *args, dotenv=dotenv, **variables), timeout=60)


@pytest.mark.slow
def test_dotenv_alone_gets_the_bot_past_configuration_to_connecting(tmp_path: Path, discord_trap) -> None:
    """With DISCORD_TOKEN and OPENAI_API_KEY only in .env, nothing exported, the bot gets as far as calling Discord."""
    dotenv = f"DISCORD_TOKEN=test-token\nOPENAI_API_KEY=sk-test\nDISCORD_API_BASE_URL={trap_url(discord_trap)}\n"
    command = bot_command(tmp_path, dotenv=dotenv)
    del command["capture_output"], command["text"]
    with subprocess.Popen(**command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) as process:
        try:
            discord_trap.settimeout(60)
            connection, _ = discord_trap.accept()
            connection.close()
        finally:
            process.kill()


def configured(**lines: str) -> str:
    """A .env with a token and an OpenAI key plus `lines`, so each test's problem is the only one."""
    return "".join(
        f"{name}={value}\n" for name, value in {"DISCORD_TOKEN": "t", "OPENAI_API_KEY": "k", **lines}.items()
    )


# A provider requirements.txt does not install (every one the docs name is in it).
COHERE_INSTALLED = importlib.util.find_spec("cohere") is not None
HOSTNAME_IS_A_FILE = Path("/etc/hostname").is_file()


@pytest.mark.slow
@pytest.mark.skipif(COHERE_INSTALLED or not HOSTNAME_IS_A_FILE, reason="needs cohere missing and an /etc/hostname file")
def test_missing_package_key_and_unopenable_archive_are_one_line_each_before_any_network(
    tmp_path: Path, discord_trap
) -> None:
    """A provider package not installed, a provider key not set, an archive under a file: a line each, exit 2."""
    dotenv = configured(
        LLM_MODEL="cohere:command-r",
        USE_LLM_JUDGE="true",
        JUDGE_MODEL="anthropic:claude-haiku-4-5",
        DATABASE_URL="sqlite:////etc/hostname/x.db",
        DISCORD_API_BASE_URL=trap_url(discord_trap),
    )
    result = run_bot(tmp_path, dotenv=dotenv)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "Configuration error: LLM_MODEL=cohere:command-r needs a provider package that is not installed:"
        ' pip install "pydantic-ai-slim[cohere]"',
        "Configuration error: JUDGE_MODEL=anthropic:claude-haiku-4-5 needs ANTHROPIC_API_KEY:"
        " set it in .env or the environment",
        "Configuration error: DATABASE_URL names /etc/hostname/x.db, which cannot be opened:"
        " /etc/hostname is a file, not a folder; point DATABASE_URL elsewhere",
    ]
    assert not was_contacted(discord_trap)


@pytest.mark.slow
def test_unknown_model_and_a_file_that_is_not_sqlite_are_one_line_each_before_any_network(
    tmp_path: Path, discord_trap
) -> None:
    """An unknown model string and a DATABASE_URL naming a file that is not SQLite: a line each, exit 2."""
    (tmp_path / "notes.db").write_text("shopping list\n" * 100)
    dotenv = configured(LLM_MODEL="bogus:model", DATABASE_URL="sqlite:///notes.db")
    result = run_bot(tmp_path, dotenv=dotenv + f"DISCORD_API_BASE_URL={trap_url(discord_trap)}\n")
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "Configuration error: LLM_MODEL is invalid: 'bogus:model' is not a pydantic-ai model string such as"
        " openai:gpt-4.1-mini (for an OpenAI-compatible server, set LLM_BASE_URL and give the model's name there)",
        "Configuration error: DATABASE_URL names notes.db, which cannot be opened as an SQLite archive:"
        " file is not a database",
    ]
    assert not was_contacted(discord_trap)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("url", "says"),
    [
        (
            "postgresql://parley:hunter2@db:port/parley",
            "DATABASE_URL is invalid: Value error, is not a valid Postgres URL",
        ),
        ("postgres://parley:hunter2@db.internal:5432", "DATABASE_URL is invalid: Value error, must be postgresql://"),
        ("postgresql://parley:hunter2@127.0.0.1:9/parley", "DATABASE_URL names Postgres 127.0.0.1:9/parley, which"),
    ],
)
def test_a_malformed_or_unreachable_postgres_url_is_one_line_and_exit_2(
    tmp_path: Path, discord_trap, url: str, says: str
) -> None:
    """A Postgres DATABASE_URL that is malformed or whose server does not answer: one line naming it, exit 2."""
    result = run_bot(tmp_path, dotenv=configured(DATABASE_URL=url, DISCORD_API_BASE_URL=trap_url(discord_trap)))
    assert result.returncode == 2
    assert len(result.stderr.splitlines()) == 1 and says in result.stderr
    assert "hunter2" not in result.stderr + result.stdout
    assert not was_contacted(discord_trap)


# --- The command line, in-process ------------------------------------------------------------------


@pytest.fixture
def in_folder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Run `bot.main` from an empty folder, with no Parley setting or provider key exported."""
    monkeypatch.chdir(tmp_path)
    forget_after_test(monkeypatch, "OPENAI_API_KEY", "LLM_API_KEY", *(name.upper() for name in Settings.model_fields))
    return tmp_path


def test_check_prints_the_settings_that_differ_from_their_defaults_with_secrets_masked(in_folder: Path, capsys) -> None:
    """`--check` validates offline, prints only the settings set otherwise than their defaults (and the providers'
    keys) with secrets masked, ends with the summary line naming the .env it read, exits 0 and creates nothing."""
    (in_folder / ".env").write_text(
        "DISCORD_TOKEN=discord-secret\nOPENAI_API_KEY=sk-openai-secret\nLLM_API_KEY=sk-llm\nMAX_IMAGES=2\n"
        "LLM_MODEL=openai:gpt-4.1-mini\n"
    )
    assert main(["--check"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:-1] == ["DISCORD_TOKEN=********", "LLM_API_KEY=********", "MAX_IMAGES=2", "OPENAI_API_KEY=********"]
    assert not any("secret" in line or "sk-llm" in line for line in lines)
    assert lines[-1] == f"OK, no warnings; next: `python bot.py` (read {in_folder.resolve() / '.env'})"
    assert [path.name for path in in_folder.iterdir()] == [".env"]


def test_check_with_a_problem_exits_2(in_folder: Path, capsys) -> None:
    """`--check` reports the same one-line problems as a start (here the default model's key), and exits 2."""
    (in_folder / ".env").write_text("DISCORD_TOKEN=t\n")
    assert main(["--check"]) == 2
    output = capsys.readouterr()
    env_file = in_folder.resolve() / ".env"
    assert output.out == f"1 error: LLM_MODEL; fix them and run `python bot.py --check` again (read {env_file})\n"
    assert output.err == (
        "Configuration error: LLM_MODEL=openai:gpt-4.1-mini needs OPENAI_API_KEY: set it in .env or the environment\n"
    )


def test_help_lists_the_required_settings(capsys) -> None:
    """`--help` names DISCORD_TOKEN and the provider key as required, and every flag."""
    with pytest.raises(SystemExit) as exit_:
        parse_args(["--help"])
    assert exit_.value.code == 0
    text = capsys.readouterr().out
    assert "required settings" in text and "DISCORD_TOKEN" in text and "OPENAI_API_KEY" in text
    assert all(flag in text for flag in ("--check", "--sync", "--version"))


def test_version_is_the_projects(capsys) -> None:
    """`--version` prints pyproject.toml's version."""
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    with pytest.raises(SystemExit) as exit_:
        parse_args(["--version"])
    assert (exit_.value.code, capsys.readouterr().out) == (0, f"Parley {version}\n")


# --- The start-up summary -----------------------------------------------------------------------


def test_invite_link_asks_for_the_bot_scope_and_only_the_needed_permissions() -> None:
    """The invite carries the client id, the bot scope, View Channels, Send Messages (in threads too), Read History
    and Create Public Threads."""
    permissions = 1 << 10 | 1 << 11 | 1 << 16 | 1 << 35 | 1 << 38
    assert invite_link(42) == f"https://discord.com/oauth2/authorize?client_id=42&scope=bot&permissions={permissions}"


async def test_start_logs_one_summary_line(bot, caplog: pytest.LogCaptureFixture, tmp_path: Path) -> None:
    """Once connected, one INFO line gives the model, judge, archive, mode default and the number of servers."""
    caplog.set_level(logging.INFO, logger="parley")
    await bot.start()
    [line] = [record.getMessage() for record in caplog.records if "connected as" in record.getMessage()]
    assert line.startswith(f"Parley {parley_version()} connected as Parley")
    assert f"to 1 server(s): model {MODEL_NAME}, judge off, archive {tmp_path / 'parley.db'}" in line
    assert line.endswith("mode normal by default") and "discord.com/oauth2" not in line


def test_summary_offers_the_invite_link_when_in_no_server(make_settings) -> None:
    """A bot in no server says where to add it, with the invite link."""
    client = build_client(make_settings(llm_base_url="http://127.0.0.1:9/v1", database_url="", use_llm_judge=True))
    client._connection.application_id = 42  # what login sets from the application's data
    client.profiles.file = ProfilesFile(channels={1: {"mode": "chatty"}})
    summary = client.startup_summary()
    assert "to 0 server(s)" in summary and "judge openai:gpt-4.1-mini, archive off" in summary
    assert "mode normal by default (1 channel(s) set otherwise)" in summary
    assert summary.endswith(f"; add it to a server with {invite_link(42)}")
