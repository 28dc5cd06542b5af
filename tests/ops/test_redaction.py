"""What Parley shows of itself: credentials in URLs masked (--check, logs), and one log line per record."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import logfire
import pytest

from bot import main
from deciding.decider import log_decision
from ops.observability import configure_logging
from ops.redaction import MASK, mask_credentials, one_line
from records import Decision, MessageRecord

FORGED = "2026-11-25 10:00:00,000 ERROR parley: the bot token is XYZ"


@pytest.mark.parametrize(
    ("shown", "masked"),
    [
        (
            "DATABASE_URL=postgresql://parley:hunter2@db.internal:5432/parley",
            f"DATABASE_URL=postgresql://parley:{MASK}@db.internal:5432/parley",
        ),
        # urllib.parse reads the authority up to its last '@': so does the mask, or "ss@" would show.
        ("postgres://u:p@ss@host/db and more", f"postgres://u:{MASK}@host/db and more"),
        ("clone https://ghp_token123@github.com/o/r.git", f"clone https://{MASK}@github.com/o/r.git"),
        ("(redis://:s3cret@cache:6379/0)", f"(redis://:{MASK}@cache:6379/0)"),
        (
            "postgresql://db/parley?user=parley&password=hunter2&sslmode=require",
            f"postgresql://db/parley?user=parley&password={MASK}&sslmode=require",
        ),
        ("https://api.example/v1?api_key=abc123#top", f"https://api.example/v1?api_key={MASK}#top"),
    ],
)
def test_credentials_in_urls_are_masked(shown: str, masked: str) -> None:
    """A URL's password (or a lone user part, often a token) and secret-looking query parameters are masked;
    the scheme, user, host and path stay, to tell which URL it is."""
    assert mask_credentials(shown) == masked


def test_text_without_credentials_is_unchanged() -> None:
    """URLs without credentials, e-mail addresses and plain text are shown as they are."""
    for text in (
        "https://discord.com/channels/1/2/3",
        "https://medium.com/@someone/a-post",
        "mail alice@example.com",
        "sqlite:///data/parley.db",
        "no url here: user:pass@host",
    ):
        assert mask_credentials(text) == text


def test_one_line_escapes_line_breaks_and_control_characters() -> None:
    """Newlines, carriage returns, escape sequences and Unicode line breaks are written as escapes; tabs, accents
    and emoji stay."""
    assert one_line("Eve\nforged\r\x1b[2Jline\u2028x\x85y") == "Eve\\nforged\\r\\x1b[2Jline\\u2028x\\x85y"
    assert one_line("tab\tcafé 🎉") == "tab\tcafé 🎉"


@pytest.fixture
def console(make_settings, monkeypatch: pytest.MonkeyPatch) -> Iterator[io.StringIO]:
    """What `configure_logging`'s console handler (at INFO, without Logfire) writes; the root logger is restored
    after."""
    monkeypatch.delenv("LOGFIRE_TOKEN", raising=False)
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    monkeypatch.setattr(logfire, "configure", lambda **options: None)
    configure_logging(make_settings(log_level="INFO"))
    [handler] = root.handlers
    assert isinstance(handler, logging.StreamHandler)
    written = io.StringIO()
    handler.setStream(written)
    yield written
    root.handlers[:], root.level = saved


def test_a_newline_in_a_display_name_is_one_log_line(console: io.StringIO) -> None:
    """A member named so as to forge a second log record gets one line, their name's newline escaped."""
    message = MessageRecord(8, 500, 66, f"Eve\n{FORGED}", "hi\r\nthere", datetime.now(UTC))
    log_decision(message, Decision(False, "rate_limited", "limit"))
    lines = console.getvalue().splitlines()
    assert len(lines) == 1
    assert lines[0].endswith(f"by Eve\\n{FORGED}: rate_limited (limit)")


def test_credentials_in_log_records_and_tracebacks_are_masked(console: io.StringIO) -> None:
    """A URL with a password in a record's arguments or in a logged exception's traceback shows no password."""
    log = logging.getLogger("parley")
    log.warning("cannot reach %s", "postgresql://parley:hunter2@db:5432/parley")
    try:
        raise ConnectionError("postgresql://parley:hunter2@db:5432/parley refused the connection")
    except ConnectionError:
        log.exception("archive down")
    err = console.getvalue()
    assert "hunter2" not in err
    assert f"WARNING parley: cannot reach postgresql://parley:{MASK}@db:5432/parley\n" in err
    assert f"\nConnectionError: postgresql://parley:{MASK}@db:5432/parley refused the connection\n" in err
    assert "Traceback (most recent call last):\n" in err  # a traceback keeps its lines


def test_check_never_prints_a_database_password(in_a_clean_folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--check` with a Postgres DATABASE_URL holding a password shows the URL with the password masked."""
    (in_a_clean_folder / ".env").write_text(
        "DISCORD_TOKEN=t\nOPENAI_API_KEY=sk-x\nDATABASE_URL=postgresql://parley:hunter2@db.internal:5432/parley\n"
        "LLM_BASE_URL=https://proxy:pr0xy-secret@llm.example/v1\n"
    )
    assert main(["--check"]) == 0
    output = capsys.readouterr()
    lines = output.out.splitlines()
    assert f"DATABASE_URL=postgresql://parley:{MASK}@db.internal:5432/parley" in lines
    assert f"LLM_BASE_URL=https://proxy:{MASK}@llm.example/v1" in lines
    assert "hunter2" not in output.out + output.err and "pr0xy-secret" not in output.out + output.err
