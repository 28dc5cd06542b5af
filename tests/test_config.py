"""Tests for settings: defaults, environment parsing and the one-line error messages."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from config import Settings, describe_settings_error


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """Run every test from an empty folder (no `.env`) with no Parley variables set."""
    monkeypatch.chdir(tmp_path)
    for name in Settings.model_fields:
        monkeypatch.delenv(name.upper(), raising=False)


def error_line() -> str:
    with pytest.raises(ValidationError) as caught:
        Settings()
    return describe_settings_error(caught.value)


def test_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    """With only a token set, every other knob has its documented default."""
    monkeypatch.setenv("DISCORD_TOKEN", "abc")
    settings = Settings()
    assert settings.conversation_timeout_seconds == 120
    assert settings.database_url == "sqlite:///data/parley.db"
    assert settings.archive_enabled
    assert settings.judge_model == settings.llm_model
    assert settings.use_llm_judge is False
    assert settings.ignore_other_bots is True
    assert settings.llm_base_url is None


def test_token_is_secret_and_never_printed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The token is a SecretStr: neither repr nor str of the settings reveals it."""
    monkeypatch.setenv("DISCORD_TOKEN", "super-secret-token")
    monkeypatch.setenv("LLM_API_KEY", "sk-very-secret")
    settings = Settings()
    assert settings.discord_token.get_secret_value() == "super-secret-token"
    for text in (repr(settings), str(settings)):
        assert "super-secret-token" not in text and "sk-very-secret" not in text


def test_environment_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    """Variables are read case-insensitively from the environment and parsed to their types."""
    monkeypatch.setenv("DISCORD_TOKEN", "abc")
    monkeypatch.setenv("CONVERSATION_TIMEOUT_SECONDS", "300")
    monkeypatch.setenv("USE_LLM_JUDGE", "true")
    monkeypatch.setenv("JUDGE_MODEL", "openai:gpt-4.1-nano")
    monkeypatch.setenv("DATABASE_URL", "")
    settings = Settings()
    assert settings.conversation_timeout_seconds == 300
    assert settings.use_llm_judge and settings.judge_model == "openai:gpt-4.1-nano"
    assert not settings.archive_enabled


def test_dotenv_file_is_read(tmp_path) -> None:
    """A `.env` file in the working folder supplies settings."""
    (tmp_path / ".env").write_text("DISCORD_TOKEN=from-file\nLLM_MODEL=anthropic:claude-sonnet-4-5\n")
    settings = Settings()
    assert settings.discord_token.get_secret_value() == "from-file"
    assert settings.llm_model == "anthropic:claude-sonnet-4-5"


def test_missing_token_names_the_variable() -> None:
    """A missing token is one line naming DISCORD_TOKEN."""
    line = error_line()
    assert line == "Configuration error: DISCORD_TOKEN is not set"


def test_malformed_number_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    """A value of the wrong type is one line naming the variable and the problem."""
    monkeypatch.setenv("DISCORD_TOKEN", "abc")
    monkeypatch.setenv("CONVERSATION_TIMEOUT_SECONDS", "soon")
    line = error_line()
    assert line.startswith("Configuration error: CONVERSATION_TIMEOUT_SECONDS is invalid:")
    assert "\n" not in line


def test_out_of_range_and_bad_url_are_reported_together(monkeypatch: pytest.MonkeyPatch) -> None:
    """Several problems come out on the same single line."""
    monkeypatch.setenv("DISCORD_TOKEN", " ")
    monkeypatch.setenv("FOLLOWUP_WINDOW_SECONDS", "-5")
    monkeypatch.setenv("DATABASE_URL", "postgres://db/parley")
    line = error_line()
    assert "DISCORD_TOKEN is invalid" in line
    assert "FOLLOWUP_WINDOW_SECONDS is invalid" in line
    assert "DATABASE_URL is invalid" in line and "sqlite:///" in line
    assert "\n" not in line


def test_admission_limits_default_and_reject_nonsense(monkeypatch: pytest.MonkeyPatch) -> None:
    """The limits have their documented defaults; a queue of 0 or a negative rate is one line naming each variable."""
    monkeypatch.setenv("DISCORD_TOKEN", "abc")
    settings = Settings()
    assert (settings.member_answers_per_hour, settings.member_answer_burst) == (30, 5)
    assert (settings.channel_queue_limit, settings.max_concurrent_answers, settings.judge_calls_per_minute) == (5, 8, 6)
    monkeypatch.setenv("CHANNEL_QUEUE_LIMIT", "0")
    monkeypatch.setenv("MEMBER_ANSWERS_PER_HOUR", "-1")
    line = error_line()
    assert "\n" not in line
    assert "CHANNEL_QUEUE_LIMIT is invalid" in line and "MEMBER_ANSWERS_PER_HOUR is invalid" in line


def test_max_answer_posts_defaults_to_four_and_rejects_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    """MAX_ANSWER_POSTS is 4 unless set; 0 is one line naming it (an answer needs at least one post)."""
    monkeypatch.setenv("DISCORD_TOKEN", "abc")
    assert Settings().max_answer_posts == 4
    monkeypatch.setenv("MAX_ANSWER_POSTS", "0")
    line = error_line()
    assert line.startswith("Configuration error: MAX_ANSWER_POSTS is invalid:") and "\n" not in line
