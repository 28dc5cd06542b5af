"""The links in members' messages (files/links.py): found as Discord and markdown write them, each once."""

from __future__ import annotations

from files.links import LINKS_PER_MESSAGE, given_links, link_key, links_in


def test_links_are_found_however_a_message_wraps_them() -> None:
    text = (
        "see <https://a.example/x>, [the notes](https://b.example/notes?v=2) and https://c.example/page. "
        "also `file:///etc/passwd` and gopher://d.example/1!"
    )
    assert links_in(text) == [
        "https://a.example/x",
        "https://b.example/notes?v=2",
        "https://c.example/page",
        "file:///etc/passwd",
        "gopher://d.example/1",
    ]


def test_a_message_gives_each_link_once_and_only_so_many() -> None:
    assert links_in("https://a.example https://a.example") == ["https://a.example"]
    many = " ".join(f"https://a.example/{n}" for n in range(LINKS_PER_MESSAGE + 5))
    assert len(links_in(many)) == LINKS_PER_MESSAGE


def test_two_spellings_of_a_link_are_one_and_the_members_is_kept() -> None:
    assert link_key("HTTPS://Example.COM") == link_key("https://example.com/#top") == "https://example.com/"
    assert link_key("https://example.com/a?b=1") != link_key("https://example.com/a?b=2")
    assert given_links(["read HTTPS://Example.COM/x", "and https://example.com/x"]) == {
        "https://example.com/x": "HTTPS://Example.COM/x"
    }
