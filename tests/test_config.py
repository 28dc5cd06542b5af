"""Tests for settings: defaults, environment parsing and the one-line error messages."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from config import Settings, describe_settings_error
from limits import RoleLimit

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """Run every test from an empty folder (no `.env`) with no Parley variables set."""
    monkeypatch.chdir(tmp_path)
    for name in Settings.model_fields:
        monkeypatch.delenv(name.upper(), raising=False)


# Two role ids as Discord makes them (a snowflake: 17 to 20 digits).
ROLE_A, ROLE_B = 1187034472391798790, 80351110224678912


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
    assert settings.answer_bot_ids == frozenset() and settings.max_bot_exchanges == 3
    assert settings.logfire_token is None and settings.logfire_include_content is False
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
    monkeypatch.setenv("DATABASE_URL", "mysql://db/parley")
    line = error_line()
    assert "DISCORD_TOKEN is empty: set it (it has no default)" in line
    assert "FOLLOWUP_WINDOW_SECONDS is invalid" in line
    assert "DATABASE_URL is invalid" in line and "sqlite:///" in line
    assert "\n" not in line


@pytest.mark.parametrize(
    ("variable", "url"),
    [
        ("DISCORD_API_BASE_URL", "https://discord-proxy.example/api/v10"),
        ("DISCORD_API_BASE_URL", "http://127.0.0.1:8080/api/v10"),
        ("DISCORD_API_BASE_URL", "http://127.8.9.10/api"),
        ("DISCORD_API_BASE_URL", "http://localhost:8080/api/v10"),
        ("DISCORD_API_BASE_URL", "http://[::1]:8080/api/v10"),
        ("DISCORD_GATEWAY_URL", "wss://gateway-proxy.example/"),
        ("DISCORD_GATEWAY_URL", "ws://127.0.0.1:9000/gateway"),
    ],
)
def test_discord_endpoints_over_tls_or_to_this_machine_are_accepted(
    monkeypatch: pytest.MonkeyPatch, variable: str, url: str
) -> None:
    """TLS endpoints anywhere, and plain http/ws ones on a loopback address, are accepted as given."""
    monkeypatch.setenv("DISCORD_TOKEN", "abc")
    monkeypatch.setenv(variable, url)
    assert getattr(Settings(), variable.lower()) == url


@pytest.mark.parametrize(
    ("variable", "url"),
    [
        ("DISCORD_API_BASE_URL", "http://discord-proxy.example/api/v10"),
        ("DISCORD_API_BASE_URL", "http://localhost.evil.example/api"),
        ("DISCORD_API_BASE_URL", "http://10.0.0.5/api"),
        ("DISCORD_API_BASE_URL", "ftp://127.0.0.1/api"),
        ("DISCORD_API_BASE_URL", "wss://discord-proxy.example/api"),
        ("DISCORD_API_BASE_URL", "discord-proxy.example/api"),
        ("DISCORD_GATEWAY_URL", "ws://gateway-proxy.example/"),
        ("DISCORD_GATEWAY_URL", "https://gateway-proxy.example/"),
    ],
)
def test_discord_endpoint_that_would_leak_the_token_is_one_line(
    monkeypatch: pytest.MonkeyPatch, variable: str, url: str
) -> None:
    """Plain http/ws to another host, or any other scheme, is one configuration line naming the variable."""
    monkeypatch.setenv("DISCORD_TOKEN", "abc")
    monkeypatch.setenv(variable, url)
    line = error_line()
    assert line.startswith(f"Configuration error: {variable} is invalid:") and "loopback" in line
    assert "\n" not in line


def test_answer_bot_ids_are_read_comma_separated(monkeypatch: pytest.MonkeyPatch) -> None:
    """ANSWER_BOT_IDS takes ids separated by commas (spaces allowed); empty means none."""
    monkeypatch.setenv("DISCORD_TOKEN", "abc")
    monkeypatch.setenv("ANSWER_BOT_IDS", "1187034472391798790, 80351110224678912,")
    assert Settings().answer_bot_ids == {1187034472391798790, 80351110224678912}
    monkeypatch.setenv("ANSWER_BOT_IDS", "")
    assert Settings().answer_bot_ids == frozenset()


def test_answer_bot_ids_that_are_not_ids_are_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """A name instead of an id in ANSWER_BOT_IDS is one line naming the variable and the bad item."""
    monkeypatch.setenv("DISCORD_TOKEN", "abc")
    monkeypatch.setenv("ANSWER_BOT_IDS", "80351110224678912,helperbot")
    line = error_line()
    assert line.startswith("Configuration error: ANSWER_BOT_IDS is invalid:") and "'helperbot'" in line


ACCESS_SETTINGS = ("ALLOWED_CHANNELS", "BLOCKED_CHANNELS", "ALLOWED_ROLES", "BLOCKED_ROLES", "BLOCKED_MEMBERS")


@pytest.mark.parametrize("variable", ACCESS_SETTINGS)
def test_access_lists_are_ids_read_comma_separated(monkeypatch: pytest.MonkeyPatch, variable: str) -> None:
    """Each access list takes ids separated by commas; unset or empty, it is empty (an empty allow list allows all)."""
    monkeypatch.setenv("DISCORD_TOKEN", "abc")
    assert getattr(Settings(), variable.lower()) == frozenset()
    monkeypatch.setenv(variable, "1187034472391798790, 80351110224678912,")
    assert getattr(Settings(), variable.lower()) == {1187034472391798790, 80351110224678912}


@pytest.mark.parametrize("variable", ACCESS_SETTINGS)
def test_an_access_list_that_is_not_ids_is_one_line_naming_it(monkeypatch: pytest.MonkeyPatch, variable: str) -> None:
    """A channel's name instead of its id is one line naming the variable and the item."""
    monkeypatch.setenv("DISCORD_TOKEN", "abc")
    monkeypatch.setenv(variable, "80351110224678912,#general")
    line = error_line()
    assert line.startswith(f"Configuration error: {variable} is invalid:") and "'#general'" in line
    assert "\n" not in line


def test_logfire_token_comes_from_the_environment_and_stays_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    """LOGFIRE_TOKEN is read from the environment as a secret that neither repr nor str reveals."""
    monkeypatch.setenv("DISCORD_TOKEN", "abc")
    monkeypatch.setenv("LOGFIRE_TOKEN", "pylf_v1_secret")
    settings = Settings()
    assert settings.logfire_token is not None and settings.logfire_token.get_secret_value() == "pylf_v1_secret"
    assert "pylf_v1_secret" not in repr(settings) + str(settings)


def test_blank_logfire_token_means_no_logfire(monkeypatch: pytest.MonkeyPatch) -> None:
    """LOGFIRE_TOKEN set to nothing (a common .env leftover) is the same as unset."""
    monkeypatch.setenv("DISCORD_TOKEN", "abc")
    monkeypatch.setenv("LOGFIRE_TOKEN", " ")
    assert Settings().logfire_token is None


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


def test_a_fresh_configuration_has_a_daily_server_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 44: with only a token set, a server's tokens a day are capped; 0, set on purpose, still means no limit."""
    monkeypatch.setenv("DISCORD_TOKEN", "abc")
    assert Settings().server_tokens_per_day == 3_000_000
    monkeypatch.setenv("SERVER_TOKENS_PER_DAY", "0")
    assert Settings().server_tokens_per_day == 0


def test_max_answer_posts_defaults_to_four_and_rejects_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    """MAX_ANSWER_POSTS is 4 unless set; 0 is one line naming it (an answer needs at least one post)."""
    monkeypatch.setenv("DISCORD_TOKEN", "abc")
    assert Settings().max_answer_posts == 4
    monkeypatch.setenv("MAX_ANSWER_POSTS", "0")
    line = error_line()
    assert line.startswith("Configuration error: MAX_ANSWER_POSTS is invalid:") and "\n" not in line


@pytest.mark.parametrize(
    ("count", "ids", "expected"),
    [
        (None, "0", "SHARD_IDS is invalid: Value error, needs SHARD_COUNT"),
        ("2", "0,2", "SHARD_IDS is invalid: Value error, shard 2 is not below SHARD_COUNT (2)"),
        ("2", "one", "SHARD_IDS is invalid: Value error, must be shard numbers separated by commas"),
        ("0", "", "SHARD_COUNT is invalid"),
    ],
)
def test_bad_shards_are_one_line_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, count: str | None, ids: str, expected: str
) -> None:
    """SHARD_IDS without SHARD_COUNT, a shard past the count, or a count below 1 is one line naming the variable."""
    monkeypatch.setenv("DISCORD_TOKEN", "abc")
    if count is not None:
        monkeypatch.setenv("SHARD_COUNT", count)
    monkeypatch.setenv("SHARD_IDS", ids)
    line = error_line()
    assert expected in line and "\n" not in line


def test_shards_are_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """SHARD_COUNT=4 with SHARD_IDS=2, 3 runs shards 2 and 3 of 4; unset, discord.py decides."""
    monkeypatch.setenv("DISCORD_TOKEN", "abc")
    assert (Settings().shard_count, Settings().shard_ids) == (None, frozenset())
    monkeypatch.setenv("SHARD_COUNT", "4")
    monkeypatch.setenv("SHARD_IDS", "2, 3")
    assert (Settings().shard_count, Settings().shard_ids) == (4, frozenset({2, 3}))


def test_role_limits_are_read_as_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    """ROLE_LIMITS is `role:answers_per_hour:tokens_per_day` rules, comma-separated; unset, there are none."""
    monkeypatch.setenv("DISCORD_TOKEN", "abc")
    assert Settings().role_limits == frozenset()
    monkeypatch.setenv("ROLE_LIMITS", f"{ROLE_A}:10:20000, {ROLE_B}:0.5:0,")
    assert Settings().role_limits == {RoleLimit(ROLE_A, 10, 20000), RoleLimit(ROLE_B, 0.5, 0)}


@pytest.mark.parametrize(
    ("value", "named"),
    [
        (f"{ROLE_A}:10", f"'{ROLE_A}:10' is not one"),
        ("moderators:10:0", "'moderators:10:0' is not one"),
        (f"{ROLE_A}:ten:0", f"'{ROLE_A}:ten:0' is not one"),
        (f"{ROLE_A}:10:-5", f"'{ROLE_A}:10:-5' is not one"),
        (f"{ROLE_A}:-1:0", "answers per hour must be 0 (no limit) or more"),
        (f"{ROLE_A}:nan:0", "answers per hour must be 0 (no limit) or more"),
        (f"{ROLE_A}:1:0,{ROLE_A}:2:0", f"role {ROLE_A} has two rules"),
    ],
)
def test_malformed_role_limits_are_one_line_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, value: str, named: str
) -> None:
    monkeypatch.setenv("DISCORD_TOKEN", "abc")
    monkeypatch.setenv("ROLE_LIMITS", value)
    line = error_line()
    assert line.startswith("Configuration error: ROLE_LIMITS is invalid:") and named in line and "\n" not in line


def test_an_unknown_time_zone_is_named_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISCORD_TOKEN", "abc")
    monkeypatch.setenv("TIMEZONE", "Mars/Olympus")
    assert error_line() == (
        "Configuration error: TIMEZONE is invalid: Value error, 'Mars/Olympus' is not an IANA time zone name,"
        " such as UTC or Europe/Paris"
    )


def test_the_time_zone_reads_members_times(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISCORD_TOKEN", "abc")
    assert Settings().zone.key == "UTC"
    monkeypatch.setenv("TIMEZONE", "Europe/Paris")
    assert Settings().zone.key == "Europe/Paris"


def test_the_support_desks_settings_default_and_a_hand_off_before_the_wait_is_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The desk waits 2 minutes and hands a forum post off after an hour, to no role unless SUPPORT_STAFF_ROLE names
    one; a hand-off due before the wait is over (the post would never be looked up) is one line naming the fix."""
    monkeypatch.setenv("DISCORD_TOKEN", "abc")
    defaults = Settings()
    assert (defaults.support_wait_seconds, defaults.support_handoff_minutes, defaults.support_staff_role) == (
        120,
        60,
        None,
    )
    monkeypatch.setenv("SUPPORT_WAIT_SECONDS", "600")
    monkeypatch.setenv("SUPPORT_HANDOFF_MINUTES", "5")
    assert error_line() == (
        "Configuration error: SUPPORT_HANDOFF_MINUTES is invalid: Value error, must be at least SUPPORT_WAIT_SECONDS"
        " (600 s) in minutes: 10 or more"
    )
    monkeypatch.setenv("SUPPORT_WAIT_SECONDS", "-1")
    line = error_line()
    assert line.startswith("Configuration error: SUPPORT_WAIT_SECONDS is invalid:") and "\n" not in line


def test_check_with_a_hand_off_before_the_wait_exits_2_in_one_line(
    tmp_path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`python bot.py --check` (its main, in this process) with SUPPORT_HANDOFF_MINUTES below the wait: exit 2, one
    line naming the variable and the fix."""
    from bot import main

    dotenv = "DISCORD_TOKEN=t\nOPENAI_API_KEY=k\nSUPPORT_WAIT_SECONDS=600\nSUPPORT_HANDOFF_MINUTES=5\n"
    (tmp_path / ".env").write_text(dotenv)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert main(["--check"]) == 2
    output = capsys.readouterr()
    assert output.out.startswith("1 error: SUPPORT_HANDOFF_MINUTES; fix them") and output.err.count("\n") == 1
    assert "must be at least SUPPORT_WAIT_SECONDS (600 s) in minutes: 10 or more" in output.err


# --- Every setting that holds Discord ids takes snowflakes only -------------------------------

# The variable, and how a value with `id` in it is written.
ID_SETTINGS = [
    pytest.param("ANSWER_BOT_IDS", "{id}", id="ANSWER_BOT_IDS"),
    *(pytest.param(variable, "{id}", id=variable) for variable in ACCESS_SETTINGS),
    pytest.param("ROLE_LIMITS", "{id}:10:20000", id="ROLE_LIMITS"),
    pytest.param("GUILD_ID", "{id}", id="GUILD_ID"),
    pytest.param("ALLOWED_SERVERS", "{id}", id="ALLOWED_SERVERS"),
    pytest.param("SUPPORT_STAFF_ROLE", "{id}", id="SUPPORT_STAFF_ROLE"),
]
NOT_SNOWFLAKES = [
    pytest.param("99999999999999999999999", id="past-2**64"),
    pytest.param("18446744073709551616", id="2**64"),
    pytest.param("0", id="zero"),
    pytest.param("4000", id="too-short"),
    pytest.param("8035111022467891", id="16-digits"),
]


@pytest.mark.parametrize(("variable", "shape"), ID_SETTINGS)
@pytest.mark.parametrize("bad", NOT_SNOWFLAKES)
def test_an_id_setting_takes_discord_snowflakes_only(
    monkeypatch: pytest.MonkeyPatch, variable: str, shape: str, bad: str
) -> None:
    """A number that is no Discord id (0, past 2**64, shorter than any id Discord has made) is one line naming the
    variable, the value and what an id looks like."""
    monkeypatch.setenv("DISCORD_TOKEN", "abc")
    monkeypatch.setenv(variable, shape.format(id=bad))
    line = error_line()
    assert line.startswith(f"Configuration error: {variable} is invalid:"), line
    assert repr(bad) in line and "Discord id" in line and "Copy ID" in line and "\n" not in line


@pytest.mark.parametrize(("variable", "shape"), ID_SETTINGS)
def test_an_id_setting_takes_the_smallest_and_largest_snowflakes(
    monkeypatch: pytest.MonkeyPatch, variable: str, shape: str
) -> None:
    monkeypatch.setenv("DISCORD_TOKEN", "abc")
    for good in ("10000000000000000", str(2**64 - 1)):
        monkeypatch.setenv(variable, shape.format(id=good))
        Settings()


@pytest.mark.parametrize(("variable", "shape"), ID_SETTINGS)
def test_check_with_an_id_that_is_no_snowflake_exits_2_in_one_line(
    tmp_path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], variable: str, shape: str
) -> None:
    """`python bot.py --check` (its main, in this process) with a bad id: exit 2, one line naming the variable."""
    from bot import main

    (tmp_path / ".env").write_text(f"DISCORD_TOKEN=t\nOPENAI_API_KEY=k\n{variable}={shape.format(id='0')}\n")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert main(["--check"]) == 2
    output = capsys.readouterr()
    assert output.out.startswith(f"1 error: {variable}; fix them") and output.err.count("\n") == 1
    assert output.err.startswith(f"Configuration error: {variable} is invalid:") and "Discord id" in output.err


@pytest.mark.slow
def test_bot_py_check_with_an_id_past_2_64_exits_2_in_one_line(tmp_path) -> None:
    """The issue's case, as a deployer runs it: `python bot.py --check` in its own process, no traceback."""
    (tmp_path / ".env").write_text("DISCORD_TOKEN=t\nOPENAI_API_KEY=k\nALLOWED_CHANNELS=99999999999999999999999\n")
    done = subprocess.run(
        [sys.executable, str(ROOT / "bot.py"), "--check"],
        cwd=tmp_path,
        env={"PATH": os.environ["PATH"]},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and done.stdout.startswith("1 error: ALLOWED_CHANNELS; fix them")
    [line] = done.stderr.splitlines()
    assert line.startswith("Configuration error: ALLOWED_CHANNELS is invalid:") and "Discord id" in line


# --- The links' settings (issue 47) ------------------------------------------------------------


@pytest.mark.parametrize(
    ("variable", "value", "says"),
    [
        ("LINKS_ALLOWED_DOMAINS", "https://example.com", "'https://example.com' is not a host name"),
        ("LINKS_BLOCKED_DOMAINS", "example.com, *.evil.test", "'*.evil.test' is not a host name"),
        ("LINKS_MAX_CHARS", "10", "greater than or equal to 500"),
        ("LINKS_MAX_BYTES", "100", "greater than or equal to 1024"),
        ("LINKS_TIMEOUT_SECONDS", "0", "greater than 0"),
        ("LINKS", "sometimes", "valid boolean"),
    ],
)
def test_check_with_a_bad_links_setting_exits_2_in_one_line(
    tmp_path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], variable: str, value: str, says: str
) -> None:
    from bot import main

    (tmp_path / ".env").write_text(f"DISCORD_TOKEN=t\nOPENAI_API_KEY=k\n{variable}={value}\n")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert main(["--check"]) == 2
    output = capsys.readouterr()
    assert output.err.count("\n") == 1 and "Traceback" not in output.err
    assert output.err.startswith(f"Configuration error: {variable} is invalid:") and says in output.err


def test_the_domain_lists_are_host_names_in_lower_case(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISCORD_TOKEN", "abc")
    monkeypatch.setenv("LINKS_BLOCKED_DOMAINS", "Example.COM., www.example.com")
    assert Settings().links_blocked_domains == frozenset({"example.com", "www.example.com"})
