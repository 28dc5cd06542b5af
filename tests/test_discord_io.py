"""Tests for discord_io.py: splitting answers into posts (it always ends: issue 18), mentions, text made safe."""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import discord
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archive.text import safe_text
from discord_io import (
    MAX_REOPENED_FENCE,
    KnownChannels,
    SplitStep,
    _open_fence,
    reply_mentions,
    split_message,
    split_steps,
    thread_name,
)


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
    allowed = reply_mentions(person).to_dict()  # type: ignore[arg-type]  # any snowflake will do
    assert allowed["parse"] == []
    assert allowed["users"] == [42]
    assert allowed.get("roles", []) == []
    assert allowed["replied_user"] is True


# --- The splitter always ends, within its limits (issue 18) -----------------------------------------

LIMIT = 2000
CUT_ENDING = "\n\n(answer cut)"


def fence_lines(post: str, line_max: int | None = None) -> list[str]:
    """The post's lines that open or close a code block (those no longer than `line_max`, when given)."""
    return [
        line
        for line in post.split("\n")
        if line.lstrip(" \t").startswith("```") and (line_max is None or len(line) <= line_max)
    ]


def fences_fit(text: str, limit: int) -> bool:
    """Whether every ``` in `text` starts a line short enough that the splitter never has to cut it."""
    lines = text.replace("\r\n", "\n").split("\n")
    fenced = [line for line in lines if "```" in line]
    return all(line.lstrip(" \t").startswith("```") and len(line) <= (limit - 60) // 2 for line in fenced)


def non_space(text: str) -> str:
    return "".join(text.split())


def is_subsequence(needle: str, haystack: str) -> bool:
    remaining = iter(haystack)
    return all(char in remaining for char in needle)


def counted_steps(text: str, limit: int) -> list[SplitStep]:
    """Every step the splitter takes on `text`, refusing to wait for more than one per character."""
    steps = split_steps(text, limit)
    taken = list(itertools.islice(steps, len(text) + 2))
    assert next(steps, None) is None, "the splitter was still going after one step per character"
    return taken


ADVERSARIAL_PIECES = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["```", "```python", "```js\n", "```\n", "\n```\n", "  ```", "````", "~~~", "`", "``"]),
    st.integers(0, 5000).map(lambda size: "\n```" + "a" * size + "\n"),  # huge info strings
    st.integers(1, 2500).map(lambda size: "w" * size),  # words of up to 2,500 characters, no spaces
    # Emoji sequences (skin tone, joiner, flag), an accent, astral characters.
    st.sampled_from(["🙂", "👍🏽", "👩\u200d💻", "🇫🇷", "e\u0301", "\U0001f600" * 700, "\U0001d518\U0001d52b "]),
    st.sampled_from(["\n", "\n\n", "\r\n", "\r\n\r\n", " ", ". ", "! ", "? ", "\t"]),
    st.integers(1, 3000).map(lambda size: "\n" * size),  # only newlines
    st.integers(1, 400).map(lambda count: "word " * count),
    st.integers(1, 200).map(lambda count: "Some sentence here. " * count),
)
ADVERSARIAL_TEXT = st.lists(ADVERSARIAL_PIECES, max_size=12).map("".join)
POST_LIMITS = st.one_of(st.just(LIMIT), st.integers(100, LIMIT))
PROPERTY_SETTINGS = settings(max_examples=200, deadline=None, derandomize=True)


@PROPERTY_SETTINGS
@given(text=ADVERSARIAL_TEXT, limit=POST_LIMITS)
def test_splitter_ends_within_limit_with_fences_balanced(text: str, limit: int) -> None:
    """On any text: at most one step per input character, each consuming input, every post within the
    limit and not blank, code fences balanced in every post, and no visible character lost or reordered."""
    steps = counted_steps(text, limit)
    assert len(steps) <= len(text) + 1
    remaining = [step.remaining for step in steps]
    assert remaining == sorted(set(remaining), reverse=True) and remaining[-1:] in ([], [0])
    posts = [step.post for step in steps if step.post is not None]
    assert all(len(post) <= limit and post.strip() for post in posts)
    assert all(len(fence_lines(post, limit // 2)) % 2 == 0 for post in posts)
    if fences_fit(text, limit):
        assert all(len(fence_lines(post)) % 2 == 0 for post in posts)
    assert is_subsequence(non_space(text), non_space("".join(posts)))
    # What the splitter adds is fence lines only: a reopening one (at most 32 characters) and a closing ``` a post.
    assert len(non_space("".join(posts))) - len(non_space(text)) <= len(posts) * (MAX_REOPENED_FENCE + 3)
    assert split_message(text, limit) == posts


@PROPERTY_SETTINGS
@given(text=ADVERSARIAL_TEXT, limit=POST_LIMITS)
def test_splitter_steps_are_never_tiny(text: str, limit: int) -> None:
    """Each step but the last consumes over a quarter of a post's room, so a long text is few posts."""
    quarter_room = (limit - len("\n```") - MAX_REOPENED_FENCE - 1) // 4
    assert len(counted_steps(text, limit)) <= len(text) // (quarter_room + 1) + 1


@PROPERTY_SETTINGS
@given(text=ADVERSARIAL_TEXT, limit=POST_LIMITS, max_posts=st.integers(1, 5))
def test_post_cap_holds_and_says_so(text: str, limit: int, max_posts: int) -> None:
    """With a post cap the answer is at most that many posts, the same ones up to the last, which ends
    "(answer cut)" after its fences are closed whenever text was left out."""
    everything = split_message(text, limit)
    capped = split_message(text, limit, max_posts=max_posts)
    assert len(capped) == min(len(everything), max_posts)
    assert all(len(post) <= limit for post in capped)
    if len(everything) <= max_posts:
        assert capped == everything
        return
    assert capped[:-1] == everything[: max_posts - 1]
    assert capped[-1].endswith(CUT_ENDING)
    assert len(fence_lines(capped[-1].removesuffix(CUT_ENDING), limit // 2)) % 2 == 0


def test_issue_info_string_of_1993_characters_ends() -> None:
    """The answer that froze the bot (a fence whose info string fills a post) is posted, "hi" included."""
    text = "```" + "a" * 1993 + "\nhi"
    posts = split_message(text)
    assert 1 <= len(posts) <= 4
    assert all(len(post) <= LIMIT for post in posts)
    assert non_space("".join(posts)) == non_space(text)


def test_issue_info_string_of_1990_characters_is_few_posts() -> None:
    """A 1,990-character info string gave 2,001 posts; now its block is a handful, every line kept."""
    code = "\n".join(f"print({i})" for i in range(300))
    text = "```" + "a" * 1990 + "\n" + code + "\n```"
    posts = split_message(text)
    assert len(posts) <= 4
    assert all(len(post) <= LIMIT for post in posts)
    kept = [line for post in posts for line in post.split("\n") if line.startswith("print(")]
    assert kept == code.split("\n")


def test_long_info_string_reopens_a_bare_fence() -> None:
    """A code block cut across posts reopens with its language, or bare when the info string is long."""
    code = "\n".join(f"x = {i}" for i in range(400))
    short = split_message(f"```python\n{code}\n```")
    assert len(short) > 1 and all(post.startswith("```python\n") for post in short)
    odd = "```" + "k" * 200
    long = split_message(f"{odd}\n{code}\n```")
    assert len(long) > 1 and long[0].startswith(odd) and all(post.startswith("```\n") for post in long[1:])
    assert all(len(fence_lines(post)) % 2 == 0 for post in short + long)


def test_answer_of_112000_characters_is_cut_at_four_posts() -> None:
    """A 112,000-character answer (57 posts before) is four, the last ending "(answer cut)"."""
    paragraph = "This is a long answer that goes on. " * 20
    code = "```python\n" + "\n".join(f"value_{i} = {i}" for i in range(60)) + "\n```"
    text = "\n\n".join([paragraph, code] * 80)[:112_000]
    assert len(text) == 112_000
    posts = split_message(text, max_posts=4)
    assert len(posts) == 4
    assert all(len(post) <= LIMIT for post in posts)
    assert posts[-1].endswith("(answer cut)")
    assert len(fence_lines(posts[-1])) % 2 == 0


def test_cut_marker_closes_an_open_code_block_first() -> None:
    """When the cut falls inside a code block, the block is closed before "(answer cut)"."""
    text = "```bash\n" + "\n".join(f"echo {i}" for i in range(2000)) + "\n```"
    [post] = split_message(text, max_posts=1)
    assert post.endswith("\n```" + CUT_ENDING) and len(post) <= LIMIT
    assert len(fence_lines(post)) == 2


def test_whitespace_only_text_is_no_post() -> None:
    """Blank text (newlines, spaces, CRLF) makes no post: Discord refuses empty messages."""
    assert split_message("\n" * 5000) == []
    assert split_message(" \r\n" * 3000) == []


def test_safe_text_replaces_lone_surrogates_and_drops_nul() -> None:
    """Lone surrogates become U+FFFD and NUL disappears; emoji, accents and plain text are untouched."""
    assert safe_text("a\ud800b\udfffc\x00d") == "a\ufffdb\ufffdcd"
    assert safe_text("nul\x00 in ascii") == "nul in ascii"
    for text in ("plain", "café 🎉 ok", "日本語", ""):
        assert safe_text(text) == text


@given(st.text(alphabet=st.characters(codec=None, exclude_categories=())))
def test_safe_text_always_encodes(text: str) -> None:
    """Whatever comes in, the result encodes as UTF-8 and holds no NUL."""
    cleaned = safe_text(text)
    cleaned.encode("utf-8")
    assert "\x00" not in cleaned


@pytest.mark.parametrize(
    ("question", "name"),
    [
        ("@Parley how do I list files?", "how do I list files?"),
        ("@Parley, @Parley   what\nis   ext4?", "what is ext4?"),
        ("@Parley", "Question from alice"),
        ("@Parley " + "word " * 40, ("word " * 20)[:99].rstrip() + "…"),
        ("bad \x00 surrogate \ud800 here", "bad surrogate \ufffd here"),
    ],
)
def test_thread_name_comes_from_the_question(question: str, name: str) -> None:
    """A thread is named from the question, on one line, without the mention of Parley, within 100 characters."""
    made = thread_name(question, "alice", "Parley")
    assert made == name and len(made) <= 100


def test_known_channels_say_a_channel_s_server_from_discord_py_s_cache_alone() -> None:
    """A channel in the cache is in its server and follows its own profile; one the process does not know is in
    server 0 (as DMs are), its server unknown to the profiles."""
    cached = {10: SimpleNamespace(id=10, guild=SimpleNamespace(id=5))}
    known = KnownChannels(cached.get)
    assert (known.server_of(10), known.profile_place(10)) == (5, (5, 10))
    assert (known.server_of(11), known.profile_place(11)) == (0, (None, 11))
