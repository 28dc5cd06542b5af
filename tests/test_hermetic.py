"""Tests that the suite does not depend on what the developer's shell exports or what their `.env` holds."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import SecretStr

from config import Settings
from tests.conftest import foreign_variables

ROOT = Path(__file__).resolve().parents[1]
HOSTILE = {
    "USE_LLM_JUDGE": "true",
    "CONVERSATION_TIMEOUT_SECONDS": "1",
    "DATABASE_URL": "bogus",
    "LLM_MODEL": "bogus:model",
    "OPENAI_API_KEY": "sk-from-the-shell",
    "LOGFIRE_TOKEN": "from-the-shell",
}
# Tests that read settings from the environment, one of which a hostile shell used to break.
SENSITIVE_TESTS = (
    "tests/test_hermetic.py::test_a_test_sees_no_parley_setting_or_provider_key",
    "tests/test_hermetic.py::test_settings_read_in_a_test_have_their_defaults",
    "tests/test_bot.py::test_missing_token_is_one_line_and_exit_2",
    "tests/e2e/test_e2e.py::test_second_person_joins_with_full_context",
    "tests/ops/test_startup.py::test_env_example_with_the_token_filled_in_gives_the_defaults",
)


def test_a_test_sees_no_parley_setting_or_provider_key() -> None:
    """Inside a test the environment holds no Parley setting and no provider key, and the folder has no .env."""
    assert foreign_variables() == []
    assert not Path(".env").exists()


def test_settings_read_in_a_test_have_their_defaults() -> None:
    """Settings read from the environment in a test have their defaults, whatever the shell exported."""
    settings = Settings(discord_token=SecretStr("t"))
    assert settings.use_llm_judge is False
    assert settings.conversation_timeout_seconds == 120
    assert settings.database_url == "sqlite:///data/parley.db"
    assert settings.llm_model == "openai:gpt-4.1-mini"


@pytest.mark.slow
def test_hostile_shell_and_dotenv_change_nothing(tmp_path: Path) -> None:
    """USE_LLM_JUDGE=true, CONVERSATION_TIMEOUT_SECONDS=1, DATABASE_URL=bogus exported and in .env: the tests pass."""
    (tmp_path / ".env").write_text("".join(f"{name}={value}\n" for name, value in HOSTILE.items()))
    tests = [str(ROOT / test) for test in SENSITIVE_TESTS]
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-c", str(ROOT / "pyproject.toml"), *tests],
        cwd=tmp_path,
        env={**os.environ, **HOSTILE},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-3000:]
    assert f"{len(SENSITIVE_TESTS)} passed" in result.stdout
