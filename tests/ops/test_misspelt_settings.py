"""A variable that reads like a misspelt setting is named, with the setting it likely means (issue 35)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot import main
from config import Settings
from ops.preflight import misspelt_settings


def test_a_typo_names_the_setting_it_likely_means() -> None:
    lines = misspelt_settings(["LLM_MODLE", "OPENAI_API_KEY"], ["PATH", "HOME", "DATABSE_URL", "RAILWAY_ENVIRONMENT"])

    assert lines == [
        "LLM_MODLE (in .env) is not a setting Parley reads: did you mean LLM_MODEL?",
        "DATABSE_URL (in the environment) is not a setting Parley reads: did you mean DATABASE_URL?",
    ]


def test_settings_provider_keys_and_system_variables_are_not_typos() -> None:
    common = ["PATH", "HOME", "HOSTNAME", "PORT", "PYTHONPATH", "LOGFIRE_ENVIRONMENT", "PGPASSWORD", "LINES", "COLUMNS"]
    providers = ["OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GROQ_API_KEY", "GOOGLE_API_KEY", "OPENAI_BASE_URL"]
    settings = [name.upper() for name in Settings.model_fields] + ["llm_model"]

    assert misspelt_settings(settings + providers, common + providers) == []


def test_check_names_llm_model_for_a_misspelt_one_in_env(
    in_a_clean_folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Only an Anthropic key and `LLM_MODLE=anthropic:...`: the run would need OPENAI_API_KEY; --check says why."""
    (in_a_clean_folder / ".env").write_text(
        "DISCORD_TOKEN=t\nANTHROPIC_API_KEY=sk-ant-x\nLLM_MODLE=anthropic:claude-sonnet-4-5\n"
    )

    assert main(["--check"]) == 2

    err = capsys.readouterr().err
    assert "Warning: LLM_MODLE (in .env) is not a setting Parley reads: did you mean LLM_MODEL?" in err
    assert "LLM_MODLE (in the environment)" not in err, "named once, where it was set"
    assert "needs OPENAI_API_KEY" in err


def test_a_typo_is_a_warning_and_an_error_under_strict(
    in_a_clean_folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (in_a_clean_folder / ".env").write_text("DISCORD_TOKEN=t\nOPENAI_API_KEY=sk-x\nLOG_LVL=DEBUG\n")

    assert main(["--check"]) == 0
    warned = capsys.readouterr()
    assert "Warning: LOG_LVL (in .env) is not a setting Parley reads: did you mean LOG_LEVEL?" in warned.err
    assert warned.out.splitlines()[-1].startswith("OK, 1 warning: LOG_LVL; next: `python bot.py`")

    assert main(["--check", "--strict"]) == 2
    refused = capsys.readouterr()
    assert (
        "Configuration error: LOG_LVL (in .env) is not a setting Parley reads: did you mean LOG_LEVEL?" in refused.err
    )
    # Named twice: in .env, and in the environment the first run exported it to.
    assert refused.out.startswith("2 errors: LOG_LVL; fix them and run `python bot.py --check` again")
