"""Tests for what happens before Parley connects: `.env` and `.env.example`, configuration checks, --check."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from bot import export_dotenv_variables
from config import Settings

ROOT = Path(__file__).resolve().parents[1]
ENV_EXAMPLE = ROOT / ".env.example"


def forget_after_test(monkeypatch: pytest.MonkeyPatch, *names: str) -> None:
    """Unset `names` now and again when the test ends, whatever the code under test puts in os.environ."""
    for name in names:
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)


def default_text(name: str) -> str:
    """A setting's default as .env.example and the README write it; empty when it has none."""
    field = Settings.model_fields[name]
    if field.is_required() or field.default is None:
        return ""
    return str(field.default).lower() if isinstance(field.default, bool) else str(field.default)


# --- Provider keys in .env ---------------------------------------------------------------------


def test_provider_keys_and_logfire_token_in_dotenv_reach_the_environment(monkeypatch, tmp_path: Path) -> None:
    """OPENAI_API_KEY, GROQ_API_KEY and LOGFIRE_TOKEN written only in .env are in os.environ for the providers."""
    forget_after_test(monkeypatch, "OPENAI_API_KEY", "GROQ_API_KEY", "LOGFIRE_TOKEN")
    env_file = tmp_path / ".env"
    env_file.write_text("OPENAI_API_KEY=sk-from-file\nGROQ_API_KEY=gsk-from-file\nLOGFIRE_TOKEN=pylf-from-file\n")
    exported = export_dotenv_variables(env_file)
    assert sorted(exported) == ["GROQ_API_KEY", "LOGFIRE_TOKEN", "OPENAI_API_KEY"]
    assert os.environ["OPENAI_API_KEY"] == "sk-from-file"
    assert os.environ["GROQ_API_KEY"] == "gsk-from-file"
    assert os.environ["LOGFIRE_TOKEN"] == "pylf-from-file"


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


def test_env_example_with_the_token_filled_in_gives_the_defaults(tmp_path: Path) -> None:
    """Copied to .env as the quick start says, with only the token filled in, every setting keeps its default."""
    env_file = tmp_path / ".env"
    shutil.copy(ENV_EXAMPLE, env_file)
    env_file.write_text(env_file.read_text().replace("\nDISCORD_TOKEN=\n", "\nDISCORD_TOKEN=abc\n"))
    settings = Settings(_env_file=env_file)
    assert settings.discord_token.get_secret_value() == "abc"
    for name in Settings.model_fields:
        if name not in {"discord_token", "judge_model"}:
            assert getattr(settings, name) == Settings.model_fields[name].default, name
    assert settings.judge_model == settings.llm_model
