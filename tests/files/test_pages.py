"""The link reader (files/pages.py) against a site on loopback: what it reads, and every way it refuses."""

from __future__ import annotations

import asyncio
import socket
import tracemalloc
from collections.abc import AsyncIterator
from typing import Any

import pytest

from files.pages import FETCHES_AT_ONCE, LinkLimits, LinkReader, Page
from tests.support.link_site import (
    HUGE_BYTES,
    PAGE_TEXT,
    SECRET_TEXT,
    LinkSite,
    running_site,
    site_is_public,
)

LIMITS = LinkLimits(max_bytes=2**20, max_chars=4000, seconds=5, allow_private=True)


@pytest.fixture
async def site() -> AsyncIterator[LinkSite]:
    async with running_site() as running:
        yield running


def reader(**changes: Any) -> LinkReader:
    values = {**LIMITS.__dict__, **changes}
    return LinkReader(LinkLimits(**values))


async def test_an_html_page_is_its_title_and_visible_text(site: LinkSite) -> None:
    page = await reader().read(site.url("/page.html"))
    assert isinstance(page, Page)
    assert page.title == "Release notes & more"
    assert PAGE_TEXT in page.text and "Release 2.4" in page.text
    assert "SCRIPT-TEXT" not in page.text and "color: red" not in page.text
    assert page.media_type == "text/html" and not page.cut


async def test_a_page_longer_than_the_budget_is_cut_and_says_so(site: LinkSite) -> None:
    page = await reader(max_chars=20).read(site.url("/page.html"))
    assert isinstance(page, Page) and page.cut and len(page.text) == 20


async def test_json_is_read_as_text(site: LinkSite) -> None:
    page = await reader().read(site.url("/data.json"))
    assert isinstance(page, Page) and '"version": "2.4"' in page.text and page.media_type == "application/json"


async def test_an_image_is_named_not_read(site: LinkSite) -> None:
    assert await reader(max_bytes=4 * 2**20).read(site.url("/image.png")) == (
        "Not read: it is a 3.0 MB image/png; only pages, text, JSON and PDFs are read."
    )


async def test_a_50_mb_body_stops_at_the_cap_and_is_never_held_whole(site: LinkSite) -> None:
    """Streamed: the reader stops at its 1 MB cap, holding a little more than that at most, and the site could not
    send its 50 MB."""
    tracemalloc.start()
    try:
        note = await reader().read(site.url("/huge"))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert note == "Not read: it is over 1.0 MB, the most a link may be."
    assert peak < 8 * 2**20
    assert site.huge_sent < HUGE_BYTES


async def test_a_slow_body_ends_at_the_time_cap(site: LinkSite) -> None:
    """A byte every 0.1 s passes every per-read timeout; the cap is on the whole download."""
    assert await reader(seconds=0.5).read(site.url("/slow")) == "Not read: it took over 0.5 s to download."


async def test_a_redirect_into_a_private_address_is_refused(site: LinkSite, monkeypatch: pytest.MonkeyPatch) -> None:
    """The site (taken for a public one) redirects to its secret twin on 127.0.0.2: the hop is checked, refused, and
    the twin never asked."""
    site_is_public(monkeypatch)
    note = await reader(allow_private=False).read(site.url("/to-secret"))
    assert note == "Not read: it leads to a private or local network address, which links may not reach."
    assert site.secret_requests == 0


async def test_with_private_addresses_allowed_the_same_redirect_is_followed(site: LinkSite) -> None:
    page = await reader().read(site.url("/to-secret"))
    assert isinstance(page, Page) and page.text == SECRET_TEXT and site.secret_requests == 1


async def test_a_loopback_link_is_refused_without_the_setting(site: LinkSite) -> None:
    note = await reader(allow_private=False).read(site.url("/page.html"))
    assert note == "Not read: it leads to a private or local network address, which links may not reach."


@pytest.mark.parametrize(
    ("url", "note"),
    [
        pytest.param(
            "file:///etc/passwd",
            "Not read: only http:// and https:// links are read, and this one is file://.",
            id="file",
        ),
        pytest.param(
            "gopher://127.0.0.1:70/1",
            "Not read: only http:// and https:// links are read, and this one is gopher://.",
            id="gopher",
        ),
        pytest.param(
            "http://[::1]/",
            "Not read: it leads to a private or local network address, which links may not reach.",
            id="ipv6-loopback",
        ),
        pytest.param(
            "http://0x7f000001/",
            "Not read: it leads to a private or local network address, which links may not reach.",
            id="hex-loopback",
        ),
        pytest.param(
            "http://intranet.example/",
            "Not read: it leads to a private or local network address, which links may not reach.",
            id="name-resolving-to-10.x",
        ),
    ],
)
async def test_what_links_may_not_reach(url: str, note: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Refused before any request: schemes other than http(s), and private addresses however they are written,
    checked on the address the name resolves to."""
    resolve = socket.getaddrinfo

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host == "intranet.example":
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.1.2.3", 0))]
        if isinstance(host, str) and not host.replace(".", "").isdigit() and host not in ("0x7f000001", "::1"):
            raise socket.gaierror("no network in tests")
        return resolve(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    assert await reader(allow_private=False).read(url) == note


async def test_the_cloud_metadata_address_is_refused_even_with_private_addresses_allowed() -> None:
    assert await reader().read("http://169.254.169.254/latest/meta-data/") == (
        "Not read: it leads to a cloud metadata address, which links may never reach."
    )


async def test_a_redirect_loop_ends_in_one_line(site: LinkSite) -> None:
    assert await reader().read(site.url("/loop")) == "Not read: it redirects too many times."


async def test_a_redirect_to_a_file_is_refused(site: LinkSite) -> None:
    assert await reader().read(site.url("/to-file")) == (
        "Not read: it leads to an address that is not http:// or https://."
    )


async def test_links_read_at_once_wait_their_turn(site: LinkSite) -> None:
    """Three answers read slow links at the same moment: two downloads run, the third waits for a slot, so no more
    than two bodies are ever held at once; each ends at its own time cap."""
    pages = reader(seconds=0.3)
    notes = await asyncio.gather(*(pages.read(site.url("/slow")) for _ in range(3)))
    assert notes == ["Not read: it took over 0.3 s to download."] * 3
    first, second, third = sorted(site.slow_requested)
    assert FETCHES_AT_ONCE == 2 and second - first < 0.2 and third - first >= 0.25


async def test_the_domain_lists_hold_on_the_link_and_on_every_redirect(site: LinkSite) -> None:
    assert await reader(blocked_domains=frozenset({"127.0.0.1"})).read(site.url("/page.html")) == (
        "Not read: 127.0.0.1 is blocked on this server."
    )
    assert await reader(allowed_domains=frozenset({"example.com"})).read(site.url("/page.html")) == (
        "Not read: 127.0.0.1 is not among the sites this server allows."
    )
    redirected = await reader(allowed_domains=frozenset({"127.0.0.1"})).read(site.url("/to-secret"))
    assert redirected == "Not read: it leads to a site this server does not allow."
    assert site.secret_requests == 0


async def test_a_missing_page_is_the_sites_answer(site: LinkSite) -> None:
    assert await reader().read(site.url("/nothing")) == "Not read: the site answered 404 Not Found."


@pytest.mark.slow  # the PDF is read in a worker process
async def test_a_pdf_is_read_through_the_bounded_pdf_reader(site: LinkSite) -> None:
    page = await reader().read(site.url("/doc.pdf"))
    assert isinstance(page, Page) and "the quarterly numbers grew" in page.text
    assert page.media_type == "application/pdf" and page.extent == "1 of 1 pages read"
