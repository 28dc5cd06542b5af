"""`--check` finishes helpfully (issue 44): each problem the start would hit is one line naming the variable and the
fix, an error exits 2, and the run ends with one summary line naming the `.env` it read."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from bot import main
from config import Settings, describe_settings_error
from ops.preflight import (
    archive_problem,
    check_summary,
    configuration_warnings,
    image_model_problem,
    model_problem,
    private_links_warning,
    railway_archive_warning,
    token_problem,
    unknown_image_model_warning,
    unknown_model_warning,
)

ROOT = Path(__file__).resolve().parents[2]
LLM_SERVER = "If it is newer than their lists or fine-tuned, ignore this"


def settings(**values: Any) -> Settings:
    return Settings(_env_file=None, **{"discord_token": "t", **values})


# --- The archive -------------------------------------------------------------------------------


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc")
def test_an_archive_folder_the_start_cannot_create_is_one_line() -> None:
    """Under /proc no folder can be made, whatever the permissions say (root passes them): named, with the fix."""
    assert archive_problem("sqlite:////proc/parley/x.db") == (
        "DATABASE_URL names /proc/parley/x.db, which cannot be opened: this user may not create files in /proc"
        " (No such file or directory); point DATABASE_URL at a writable place"
    )


def test_an_archive_folder_that_can_be_created_passes_and_nothing_is_created(tmp_path: Path) -> None:
    assert archive_problem(f"sqlite:///{tmp_path / 'data' / 'deep' / 'parley.db'}") is None
    assert list(tmp_path.iterdir()) == []


# --- The model ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "meant"),
    [
        ("gpt-4o", "openai:gpt-4o"),
        ("openai/gpt-4o-mini", "openai:gpt-4o-mini"),
        ("claude-3-5-sonnet", "anthropic:claude-3-5-sonnet"),
        ("claude-sonet-4-5", "anthropic:claude-sonnet-4-5"),
    ],
)
def test_a_model_without_its_providers_prefix_gets_that_prefix_as_the_suggestion(name: str, meant: str) -> None:
    """A bare name of a known provider's model, or a slash for the colon: the provider's prefix is suggested, not
    another provider's model that merely looks alike."""
    line = model_problem(settings(), "LLM_MODEL", name)
    assert line == (
        f"LLM_MODEL is invalid: {name!r} is not a pydantic-ai model string such as openai:gpt-4.1-mini;"
        f" did you mean {meant}? (for an OpenAI-compatible server, set LLM_BASE_URL and give the model's name there)"
    )


def test_a_model_its_provider_does_not_list_is_a_warning_with_the_closest_name() -> None:
    """`openai:gpt-9`: OpenAI's lists (pydantic-ai's, genai-prices') lack it; a warning, since they trail releases."""
    line = unknown_model_warning(settings(), "LLM_MODEL", "openai:gpt-9")
    assert line is not None and line.startswith("LLM_MODEL=openai:gpt-9 is not a model pydantic-ai or genai-prices")
    assert "did you mean openai:" in line and line.endswith(LLM_SERVER)


@pytest.mark.parametrize(
    ("name", "base_url"),
    [
        ("openai:gpt-4.1-mini", None),
        ("anthropic:claude-sonnet-4-5", None),
        ("openai:gpt-4o-2024-08-06", None),  # a dated form of a listed model
        ("ollama:my-local-model", None),  # no list offline
        ("my-model", "http://127.0.0.1:8000/v1"),  # LLM_BASE_URL's server alone knows its names
    ],
)
def test_a_listed_model_or_one_with_no_list_offline_is_not_warned_about(name: str, base_url: str | None) -> None:
    values = {"llm_base_url": base_url} if base_url else {}
    assert unknown_model_warning(settings(**values), "LLM_MODEL", name) is None


def test_an_empty_llm_model_is_one_line_naming_it() -> None:
    with pytest.raises(ValidationError) as caught:
        settings(llm_model=" ")
    line = describe_settings_error(caught.value)
    assert line == (
        "Configuration error: LLM_MODEL is empty: set it, or delete the line to use the default (openai:gpt-4.1-mini)"
    )


# --- The token ---------------------------------------------------------------------------------


def test_the_application_id_in_place_of_the_token_is_named_with_the_fix() -> None:
    line = token_problem("1187034472391798790")
    assert line is not None and line.startswith("DISCORD_TOKEN is digits only, as the application id is")
    assert "Reset Token" in line and "three parts joined by dots" in line


def test_a_bot_prefix_on_the_token_is_named_with_the_fix() -> None:
    assert token_problem("Bot MTE4.GhIjKl.mnop") == (
        'DISCORD_TOKEN starts with "Bot ", which Parley adds itself: remove it, keeping the token after it'
    )


def test_a_token_of_three_parts_passes() -> None:
    assert token_problem("MTE4NzAzNDQ3MjM5MTc5ODc5MA.GhIjKl.mnopqrstuvwxyz0123456789") is None


# --- Railway -----------------------------------------------------------------------------------


def test_on_railway_an_archive_without_a_volume_is_a_warning(tmp_path: Path) -> None:
    line = railway_archive_warning("sqlite:////app/data/parley.db", {"RAILWAY_ENVIRONMENT": "production"})
    assert line == (
        "DATABASE_URL names /app/data/parley.db, and this Railway service has no volume, so every redeploy loses the"
        " archive: attach a volume (mount path /data) and set DATABASE_URL=sqlite:////data/parley.db"
    )


def test_on_railway_an_archive_outside_the_volume_is_a_warning() -> None:
    railway = {"RAILWAY_ENVIRONMENT": "production", "RAILWAY_VOLUME_MOUNT_PATH": "/data"}
    line = railway_archive_warning("sqlite:////app/data/parley.db", railway)
    assert line == (
        "DATABASE_URL names /app/data/parley.db, outside the Railway volume at /data, so every redeploy loses the"
        " archive: set DATABASE_URL=sqlite:////data/parley.db"
    )
    assert railway_archive_warning("sqlite:////data/parley.db", railway) is None


@pytest.mark.parametrize(
    ("url", "environ"),
    [
        ("sqlite:///data/parley.db", {}),  # not on Railway
        ("postgresql://parley@db:5432/parley", {"RAILWAY_ENVIRONMENT": "production"}),
        ("", {"RAILWAY_ENVIRONMENT": "production"}),  # no archive
    ],
)
def test_off_railway_or_without_a_sqlite_archive_nothing_is_said(url: str, environ: dict[str, str]) -> None:
    assert railway_archive_warning(url, environ) is None


# --- The summary -------------------------------------------------------------------------------


def test_the_summary_names_the_errors_and_warnings_and_the_next_step(tmp_path: Path) -> None:
    env_file = tmp_path / ".env"
    env_file.write_text("DISCORD_TOKEN=t\n")
    assert check_summary([], ["LLM_MODEL"], env_file) == (
        f"OK, 1 warning: LLM_MODEL; next: `python bot.py` (read {env_file.resolve()})"
    )
    assert check_summary(["DATABASE_URL", "LLM_MODEL"], ["LLM_MODLE"], env_file) == (
        "2 errors: DATABASE_URL, LLM_MODEL; 1 warning: LLM_MODLE; fix them and run `python bot.py --check` again"
        f" (read {env_file.resolve()})"
    )


def test_the_summary_says_when_no_env_was_found(in_a_clean_folder: Path) -> None:
    assert check_summary([], [], ".env") == f"OK, no warnings; next: `python bot.py` (no .env found in {Path.cwd()})"


def test_check_with_an_unlisted_model_passes_with_one_warning(
    in_a_clean_folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`openai:gpt-9` is a warning: exit 0, the line on stderr, the summary counting it."""
    (in_a_clean_folder / ".env").write_text("DISCORD_TOKEN=a.b.c\nOPENAI_API_KEY=k\nLLM_MODEL=openai:gpt-9\n")
    assert main(["--check"]) == 0
    output = capsys.readouterr()
    [warning] = output.err.splitlines()
    assert warning.startswith("Warning: LLM_MODEL=openai:gpt-9 is not a model") and warning.endswith(LLM_SERVER)
    assert output.out.splitlines() == [
        "DISCORD_TOKEN=********",
        "LLM_MODEL=openai:gpt-9",
        "OPENAI_API_KEY=********",
        f"OK, 1 warning: LLM_MODEL; next: `python bot.py` (read {in_a_clean_folder.resolve() / '.env'})",
    ]


# --- The image model ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "line"),
    [
        (
            {"image_model": "anthropic:claude-sonnet-4-5"},
            "IMAGE_MODEL=anthropic:claude-sonnet-4-5: anthropic has no images API pydantic-ai calls; use one of openai,"
            " google, google-cloud, xai (such as openai:gpt-image-1), or native",
        ),
        (
            {"image_model": "native", "llm_model": "openai-chat:gpt-4.1-mini"},
            "IMAGE_MODEL=native needs a model whose provider draws images itself (OpenAI Responses, Google), and"
            " LLM_MODEL openai-chat:gpt-4.1-mini has none: name an image model instead, such as openai:gpt-image-1",
        ),
        (
            {"image_model": "google:gemini-3-pro-image"},
            "IMAGE_MODEL=google:gemini-3-pro-image needs GOOGLE_API_KEY: set it in .env or the environment",
        ),
    ],
)
def test_an_image_model_that_cannot_draw_is_one_line_naming_the_fix(
    values: dict[str, str], line: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    assert image_model_problem(settings(**values)) == line


@pytest.mark.parametrize("name", ["openai:gpt-image-1", "openai:gpt-image-2", "native"])
def test_an_image_model_that_can_draw_passes(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    assert image_model_problem(settings(image_model=name)) is None
    assert unknown_image_model_warning(settings(image_model=name)) is None


def test_an_image_model_pydantic_ai_does_not_know_is_a_warning_with_the_closest_name() -> None:
    line = unknown_image_model_warning(settings(image_model="openai:gpt-imag-2"))
    assert line == (
        "IMAGE_MODEL=openai:gpt-imag-2 is not an image model pydantic-ai knows; did you mean openai:gpt-image-2?"
        " If it is newer than its list, ignore this"
    )


@pytest.mark.parametrize(
    ("values", "line"),
    [
        (
            {"image_model": "gpt-image-1"},
            "Configuration error: IMAGE_MODEL is invalid: Value error, 'gpt-image-1' needs its provider, as in"
            " openai:gpt-image-1, or is native",
        ),
        (
            {"images_per_member_per_day": "-1"},
            "Configuration error: IMAGES_PER_MEMBER_PER_DAY is invalid: Input should be greater than or equal to 0",
        ),
        (
            {"images_per_server_per_day": "many"},
            "Configuration error: IMAGES_PER_SERVER_PER_DAY is invalid: Input should be a valid integer, unable to"
            " parse string as an integer",
        ),
    ],
)
def test_bad_image_settings_are_one_line_naming_the_variable(values: dict[str, str], line: str) -> None:
    with pytest.raises(ValidationError) as raised:
        settings(**values)
    assert describe_settings_error(raised.value) == line


def test_check_with_an_image_model_of_no_images_api_exits_2(
    in_a_clean_folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (in_a_clean_folder / ".env").write_text(
        "DISCORD_TOKEN=a.b.c\nOPENAI_API_KEY=k\nLLM_MODEL=openai:gpt-4o\nIMAGE_MODEL=anthropic:claude-sonnet-4-5\n"
    )
    assert main(["--check"]) == 2
    [error] = capsys.readouterr().err.splitlines()
    assert error.startswith("Configuration error: IMAGE_MODEL=anthropic:claude-sonnet-4-5: anthropic has no")


# --- As a deployer runs it ---------------------------------------------------------------------


def check_in(folder: Path, dotenv: str, **variables: str) -> subprocess.CompletedProcess[str]:
    """`python bot.py --check` in `folder` with `dotenv` as its .env and only `variables` (and PATH) exported."""
    (folder / ".env").write_text(dotenv)
    return subprocess.run(
        [sys.executable, str(ROOT / "bot.py"), "--check"],
        cwd=folder,
        env={"PATH": os.environ["PATH"], **variables},
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc")
def test_bot_py_check_ends_with_the_summary_and_exits_2_on_errors(tmp_path: Path) -> None:
    """Three errors: one line each on stderr, then the summary naming them and the .env, exit 2; fixed, with a
    Railway warning left, exit 0 and the summary saying what is next."""
    broken = "DISCORD_TOKEN=Bot a.b.c\nOPENAI_API_KEY=k\nLLM_MODEL=gpt-4o\nDATABASE_URL=sqlite:////proc/parley/x.db\n"
    done = check_in(tmp_path, broken)
    assert done.returncode == 2
    assert [line.split(":", 2)[1].split()[0] for line in done.stderr.splitlines()] == [
        "DISCORD_TOKEN",
        "LLM_MODEL",
        "DATABASE_URL",
    ]
    assert all(line.startswith("Configuration error: ") for line in done.stderr.splitlines())
    assert done.stdout.splitlines() == [
        "3 errors: DISCORD_TOKEN, LLM_MODEL, DATABASE_URL; fix them and run `python bot.py --check` again"
        f" (read {tmp_path.resolve() / '.env'})"
    ]
    fixed = "DISCORD_TOKEN=a.b.c\nOPENAI_API_KEY=k\nLLM_MODEL=openai:gpt-4o\n"
    done = check_in(tmp_path, fixed, RAILWAY_ENVIRONMENT="production")
    assert done.returncode == 0
    assert done.stderr.startswith("Warning: DATABASE_URL names ") and "no volume" in done.stderr
    assert done.stdout.splitlines()[-1] == (
        f"OK, 1 warning: DATABASE_URL; next: `python bot.py` (read {tmp_path.resolve() / '.env'})"
    )


# --- Links ------------------------------------------------------------------------------------


def test_links_reaching_private_addresses_is_a_warning_naming_the_setting() -> None:
    """LINKS_ALLOW_PRIVATE_ADDRESSES is for tests; --check says so in one line, and says nothing when it is off."""
    line = private_links_warning(settings(links_allow_private_addresses=True))
    assert line is not None and line.startswith("LINKS_ALLOW_PRIVATE_ADDRESSES is on") and "\n" not in line
    assert line in configuration_warnings(settings(links_allow_private_addresses=True), {})
    assert private_links_warning(settings(links=True)) is None
