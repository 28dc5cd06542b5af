"""Tests for bot.py's pure parts: the client's mention defaults, logging and the command line."""

from __future__ import annotations

import ast
import logging
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import logfire
import pytest

from admission.bots import BOT_LOOP, BOT_NOT_LISTED, BotGate
from ops.observability import ContentFreeLogfireHandler, configure_logging, warn_about_retired_settings

ROOT = Path(__file__).resolve().parents[1]


def test_no_part_is_handed_the_client_or_calls_back_into_it() -> None:
    """Issue 42: each part the client builds is handed what it uses (the stores, discord.py's calls, other parts),
    never the client to read them from, nor a method of the client's own to call back. The client itself goes only
    where discord.py's API is what is asked of it: its command tree, and the members' lookups and reminders' posts,
    each typed as the few discord.py calls it makes."""
    parley = next(
        node
        for node in ast.parse((ROOT / "bot.py").read_text(encoding="utf-8")).body
        if isinstance(node, ast.ClassDef) and node.name == "Parley"
    )
    own_methods = {
        node.name
        for node in parley.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and not any(ast.unparse(decorator) == "property" for decorator in node.decorator_list)
    }
    handed_self, handed_methods = [], []
    for node in ast.walk(parley):
        if isinstance(node, ast.Call):
            handed = [*node.args, *(keyword.value for keyword in node.keywords)]
        elif isinstance(node, ast.Assign):
            handed = [node.value]
        else:
            continue
        for value in handed:
            if isinstance(value, ast.Name) and value.id == "self":
                handed_self.append(ast.unparse(node.func) if isinstance(node, ast.Call) else ast.unparse(node))
            elif isinstance(value, ast.Attribute) and ast.unparse(value.value) == "self" and value.attr in own_methods:
                handed_methods.append(ast.unparse(node))
    assert sorted(handed_self) == ["ParleyTree", "access_gate", "discord.Client.close", "reminder_scheduler"]
    assert handed_methods == []


def test_client_default_allows_no_mentions(make_settings) -> None:
    """The client's default AllowedMentions pings nobody, for every post not built as a reply."""
    from bot import build_client

    client = build_client(make_settings(llm_base_url="http://127.0.0.1:9/v1", database_url=""))
    assert client.allowed_mentions is not None
    assert client.allowed_mentions.to_dict() == {"parse": []}  # type: ignore[comparison-overlap]  # replied_user false is omitted
    intents = client.intents
    assert intents.guilds and intents.guild_messages and intents.message_content
    assert not intents.members and not intents.presences


@pytest.fixture
def root_logging(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Restore the root logger after `configure_logging`; Logfire itself is stubbed, and its calls recorded."""
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    calls: list[str] = []
    monkeypatch.setattr(logfire, "configure", lambda **options: calls.append("configure"))
    monkeypatch.setattr(logfire, "instrument_pydantic_ai", lambda **options: calls.append("instrument_pydantic_ai"))
    yield calls
    root.handlers[:], root.level = saved[0], saved[1]


def test_without_logfire_token_logs_go_to_the_console_only(make_settings, root_logging, monkeypatch) -> None:
    """With no LOGFIRE_TOKEN nothing is built for Logfire: no model-run spans, no Logfire log handler."""
    monkeypatch.delenv("LOGFIRE_TOKEN", raising=False)
    configure_logging(make_settings(log_level="WARNING"))
    root = logging.getLogger()
    assert [type(handler) for handler in root.handlers] == [logging.StreamHandler]
    assert root.level == logging.WARNING and root_logging == ["configure"]


def test_with_logfire_token_logs_and_model_runs_go_to_logfire(make_settings, root_logging, monkeypatch) -> None:
    """LOGFIRE_TOKEN adds Logfire's log handler and instruments pydantic-ai."""
    monkeypatch.setenv("LOGFIRE_TOKEN", "test-token")
    configure_logging(make_settings())
    handlers = logging.getLogger().handlers
    assert [type(handler) for handler in handlers] == [logging.StreamHandler, ContentFreeLogfireHandler]
    assert root_logging == ["configure", "instrument_pydantic_ai"]


def test_bot_gate_counts_turns_per_channel_until_a_human_speaks() -> None:
    """A listed bot gets `max_exchanges` turns per channel, more after a human message; an unlisted one none."""
    gate = BotGate(frozenset({7}), max_exchanges=2, max_channels=2)
    assert gate.refusal(8, channel_id=1) is BOT_NOT_LISTED
    assert [gate.refusal(7, channel_id=1) for _ in range(3)] == [None, None, BOT_LOOP]
    assert gate.refusal(7, channel_id=2) is None
    gate.human_spoke(1)
    assert gate.refusal(7, channel_id=1) is None


def test_retired_ignore_other_bots_is_named_with_its_replacement(caplog: pytest.LogCaptureFixture) -> None:
    """IGNORE_OTHER_BOTS left in the environment draws a warning that names ANSWER_BOT_IDS; without it, none."""
    warn_about_retired_settings({"DISCORD_TOKEN": "x"})
    assert caplog.records == []
    warn_about_retired_settings({"IGNORE_OTHER_BOTS": "false"})
    [record] = caplog.records
    assert record.levelno == logging.WARNING and "IGNORE_OTHER_BOTS" in record.getMessage()
    assert "ANSWER_BOT_IDS" in record.getMessage()


def run_bot(env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    clean = {key: value for key, value in os.environ.items() if key.upper() not in {"DISCORD_TOKEN"}}
    clean.update(env)
    return subprocess.run(
        [sys.executable, str(ROOT / "bot.py")],
        cwd=tmp_path,
        env=clean,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.slow
def test_a_check_with_one_provider_imports_that_provider_alone(tmp_path: Path) -> None:
    """`python bot.py --check` on Anthropic loads the anthropic SDK and not openai's (half a second of its start)."""
    env = {"DISCORD_TOKEN": "x", "LLM_MODEL": "anthropic:claude-sonnet-4-5", "ANTHROPIC_API_KEY": "sk-ant-test"}
    clean = {key: value for key, value in os.environ.items() if not key.upper().endswith("API_KEY")}
    result = subprocess.run(
        [sys.executable, "-X", "importtime", str(ROOT / "bot.py"), "--check"],
        cwd=tmp_path,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    imported = {line.rpartition("|")[2].strip().partition(".")[0] for line in result.stderr.splitlines()}
    assert "anthropic" in imported
    assert "openai" not in imported


@pytest.mark.slow
def test_missing_token_is_one_line_and_exit_2(tmp_path: Path) -> None:
    """`python bot.py` without DISCORD_TOKEN prints one line naming it and exits 2, no traceback."""
    result = run_bot({}, tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip() == "Configuration error: DISCORD_TOKEN is not set"
    assert "Traceback" not in result.stderr + result.stdout


@pytest.mark.slow
def test_malformed_setting_is_one_line_and_exit_2(tmp_path: Path) -> None:
    """A malformed value is one line naming the variable, exit 2."""
    result = run_bot({"DISCORD_TOKEN": "x", "FOLLOWUP_WINDOW_SECONDS": "a minute"}, tmp_path)
    assert result.returncode == 2
    [line] = result.stderr.strip().splitlines()
    assert re.match(r"Configuration error: FOLLOWUP_WINDOW_SECONDS is invalid: ", line)
