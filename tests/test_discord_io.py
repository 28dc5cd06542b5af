"""Tests for discord_io.py: splitting long answers into posts and mention safety."""

from __future__ import annotations

import discord

from discord_io import _open_fence, reply_mentions, split_message


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
