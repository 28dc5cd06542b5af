"""Tests for bot.py's pure parts: splitting long answers, mention safety and the command line."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import discord

from bot import _open_fence, reply_mentions, split_message

ROOT = Path(__file__).resolve().parents[1]


def words(text: str) -> list[str]:
    return text.split()


def test_short_answer_is_one_post() -> None:
    """An answer within the limit is posted as it is."""
    assert split_message("Hello **there**.") == ["Hello **there**."]


def test_long_answer_splits_on_paragraphs_without_losing_text() -> None:
    """Paragraphs are kept whole where they fit, every post is within the limit, and no word is lost."""
    paragraphs = [f"Paragraph {i}. " + "word " * 150 for i in range(12)]
    text = "\n\n".join(paragraphs)
    posts = split_message(text)
    assert len(posts) > 1
    assert all(len(post) <= 2000 for post in posts)
    assert words(" ".join(posts)) == words(text)
    assert all(post.startswith("Paragraph") for post in posts)


def test_single_huge_line_splits_on_sentences_then_words() -> None:
    """A paragraph with no newlines is cut at a sentence end, and a sentence-free blob at a space."""
    sentences = " ".join(f"Sentence number {i} is here." for i in range(200))
    posts = split_message(sentences)
    assert all(len(post) <= 2000 for post in posts)
    assert all(post.endswith(".") for post in posts)
    assert words(" ".join(posts)) == words(sentences)
    blob = "word " * 1000
    assert words(" ".join(split_message(blob))) == words(blob)


def test_unbreakable_text_is_hard_cut() -> None:
    """Text with no boundary at all is cut at the limit, losing nothing."""
    text = "x" * 4500
    posts = split_message(text)
    assert [len(post) for post in posts] == [1996, 1996, 508]
    assert "".join(posts) == text


def test_code_fence_is_closed_and_reopened_across_posts() -> None:
    """No post leaves a code block open: it is closed and reopened with its language."""
    code = "\n".join(f"print({i})  # line {i}" for i in range(300))
    text = f"Here is the script:\n\n```python\n{code}\n```\n\nRun it with python."
    posts = split_message(text)
    assert len(posts) > 1
    for post in posts:
        assert len(post) <= 2000
        assert _open_fence(post) is None, post[-80:]
    assert posts[1].startswith("```python\n")
    code_lines = [line for post in posts for line in post.split("\n") if line.startswith("print(")]
    assert code_lines == code.split("\n")


def test_unclosed_fence_from_the_model_is_closed() -> None:
    """Even a short answer whose code block the model never closed is posted closed."""
    [post] = split_message("Try:\n```bash\nls -la")
    assert post == "Try:\n```bash\nls -la\n```"


def test_reply_mentions_allow_only_the_person_answered() -> None:
    """A reply can ping its addressee, never @everyone, @here or roles."""
    person = discord.Object(id=42)
    allowed = reply_mentions(person).to_dict()
    assert allowed["parse"] == []
    assert allowed["users"] == [42]
    assert allowed.get("roles", []) == []
    assert allowed["replied_user"] is True


def test_client_default_allows_no_mentions(make_settings) -> None:
    """The client's default AllowedMentions pings nobody, for every post not built as a reply."""
    from bot import build_client

    client = build_client(make_settings(llm_base_url="http://127.0.0.1:9/v1", database_url=""))
    assert client.allowed_mentions is not None
    assert client.allowed_mentions.to_dict() == {"parse": []}  # replied_user false is omitted
    intents = client.intents
    assert intents.guilds and intents.guild_messages and intents.message_content
    assert not intents.members and not intents.presences


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


def test_missing_token_is_one_line_and_exit_2(tmp_path: Path) -> None:
    """`python bot.py` without DISCORD_TOKEN prints one line naming it and exits 2, no traceback."""
    result = run_bot({}, tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip() == "Configuration error: DISCORD_TOKEN is not set"
    assert "Traceback" not in result.stderr + result.stdout


def test_malformed_setting_is_one_line_and_exit_2(tmp_path: Path) -> None:
    """A malformed value is one line naming the variable, exit 2."""
    result = run_bot({"DISCORD_TOKEN": "x", "FOLLOWUP_WINDOW_SECONDS": "a minute"}, tmp_path)
    assert result.returncode == 2
    [line] = result.stderr.strip().splitlines()
    assert re.match(r"Configuration error: FOLLOWUP_WINDOW_SECONDS is invalid: ", line)
