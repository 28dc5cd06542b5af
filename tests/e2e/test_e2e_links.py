"""End-to-end: a member's link read by the model (issue 47) through the real client, the fake Discord, a fake model
that calls `read_link`, and a web site on loopback (tests/support/link_site.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.fake_discord import ALICE_ID, BOB_ID, BOT_ID, CHANNEL_ID, GUILD_ID, FakeDiscord
from tests.fakes.fake_llm import FakeLLM, Reply, ToolCall, message_text
from tests.support.e2e_support import RunningBot, request_texts, say
from tests.support.link_site import PAGE_TEXT, PDF_TEXT, SECRET_TEXT, STEERING, LinkSite, running_site, site_is_public

# LINKS on, and the site on 127.0.0.1 reachable (LINKS_ALLOW_PRIVATE_ADDRESSES, which real deploys never set).
LINKS_ON = {"links": True, "links_allow_private_addresses": True}


@pytest.fixture
async def site() -> AsyncIterator[LinkSite]:
    async with running_site() as running:
        yield running


class LinkModel:
    """Reads `url` when `read_link` is offered, then answers `answer`; keeps the tool results and what it offered."""

    def __init__(self, url: str, answer: str = "Read it.") -> None:
        self.url, self.answer = url, answer
        self.results: list[str] = []
        self.offered: list[list[str]] = []
        self.requests: list[dict[str, Any]] = []

    def __call__(self, request: dict[str, Any]) -> Reply:
        self.requests.append(request)
        self.offered.append([tool["function"]["name"] for tool in request.get("tools", [])])
        last = request["messages"][-1]
        if last["role"] == "tool":
            self.results.append(message_text(last))
            return self.answer
        return ToolCall("read_link", {"url": self.url}) if "read_link" in self.offered[-1] else "No link tool."


async def reading(bot: RunningBot, llm: FakeLLM, url: str, answer: str = "Read it.", /, **settings: Any) -> LinkModel:
    """Parley started with `settings` over a model that reads `url` and then answers `answer`."""
    model = LinkModel(url, answer)
    llm.handler = model
    await bot.start(**settings)
    return model


async def ask(fake: FakeDiscord, text: str, *, reply_to: int | None = None, asker: int = ALICE_ID) -> str:
    before = len(fake.posts_in(CHANNEL_ID))
    await say(fake, asker, f"<@{BOT_ID}> {text}", reply_to=reply_to)
    await fake.wait_for_posts(before + 1, CHANNEL_ID, timeout=20)
    await fake.wait_for(
        lambda: not fake.bot_messages(CHANNEL_ID)[-1].get("components"), timeout=20, what="the finished answer"
    )
    return str(fake.bot_messages(CHANNEL_ID)[-1]["content"])


async def test_the_pages_text_reaches_the_model_once_quoted_and_is_not_archived(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM, site: LinkSite
) -> None:
    url = site.url("/page.html")
    model = await reading(bot, llm, url, "It says 2.4 ships Friday.", **LINKS_ON)
    client = bot.client
    assert client is not None
    assert await ask(fake, f"what does {url} say?") == "It says 2.4 ships Friday."
    [result] = model.results
    assert result.startswith(f'<linked_page url="{url}" title="Release notes &amp; more" type="text/html"')
    assert result.endswith("</linked_page>") and PAGE_TEXT in result
    sent = "\n".join(request_texts(model.requests[-1]))
    assert sent.count(PAGE_TEXT) == 1
    # The page is the tool's result, never a member's message: the archive holds none of its words.
    assert client.archive is not None
    await client.archive.flush()
    assert list(await client.archive.search(CHANNEL_ID, "exporter")) == []


async def test_a_link_in_the_message_replied_to_is_read(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM, site: LinkSite
) -> None:
    url = site.url("/data.json")
    model = await reading(bot, llm, url, **LINKS_ON)
    linked = fake.add_history(CHANNEL_ID, ALICE_ID, f"the build data is at <{url}>")
    await ask(fake, "summarise that", reply_to=int(linked["id"]))
    [result] = model.results
    assert result.startswith("<linked_page") and '"version": "2.4"' in result


@pytest.mark.slow  # the PDF is read in a worker process
async def test_a_pdf_is_read_within_the_pdf_limits(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM, site: LinkSite
) -> None:
    url = site.url("/doc.pdf")
    model = await reading(bot, llm, url, **LINKS_ON)
    await ask(fake, f"what's in {url}")
    [result] = model.results
    assert 'type="application/pdf"' in result and 'read="1 of 1 pages read"' in result and PDF_TEXT in result


@pytest.mark.parametrize(
    ("path", "settings", "note"),
    [
        pytest.param(
            "/huge", {"links_max_bytes": 2**20}, "Not read: it is over 1.0 MB, the most a link may be.", id="50-mb"
        ),
        pytest.param(
            "/slow", {"links_timeout_seconds": 0.5}, "Not read: it took over 0.5 s to download.", id="slow-body"
        ),
    ],
)
async def test_a_huge_or_slow_body_ends_as_one_line(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM, site: LinkSite, path: str, settings: dict[str, Any], note: str
) -> None:
    url = site.url(path)
    model = await reading(bot, llm, url, "It could not be read.", **LINKS_ON, **settings)
    assert await ask(fake, f"read {url}") == "It could not be read."
    assert model.results == [note]
    assert site.huge_sent < 50 * 2**20


async def test_a_redirect_into_loopback_is_refused(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM, site: LinkSite, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The site, taken for a public one, redirects to a loopback service: private addresses not allowed, the hop is
    refused and the service never asked."""
    site_is_public(monkeypatch)
    url = site.url("/to-secret")
    model = await reading(bot, llm, url, links=True)
    await ask(fake, f"what's at {url}?")
    assert model.results == ["Not read: it leads to a private or local network address, which links may not reach."]
    assert site.secret_requests == 0


async def test_a_page_telling_the_model_to_ping_everyone_is_quoted_and_pings_nobody(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM, site: LinkSite
) -> None:
    """The page's words arrive framed as the page's; an answer that repeats "@everyone" pings only the asker."""
    url = site.url("/steer.html")
    model = await reading(bot, llm, url, "@everyone the page says hi", **LINKS_ON)
    await ask(fake, f"what does {url} say?")
    [result] = model.results
    # In the frame's body, as the page's words.
    assert result.index(">") < result.index(STEERING) < result.index("</linked_page>")
    post = fake.posts_in(CHANNEL_ID)[-1]
    allowed = post.body["allowed_mentions"]
    assert allowed["parse"] == [] and [int(user) for user in allowed.get("users", [])] in ([], [ALICE_ID])


async def test_a_link_no_member_gave_is_not_read(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM, site: LinkSite
) -> None:
    """The model reaches for the secret service's address, which a page named and no member wrote: refused, even with
    private addresses allowed, and the service never asked."""
    model = await reading(bot, llm, f"{site.secret_base}/secret", **LINKS_ON)
    await ask(fake, "what's new?")
    [result] = model.results
    assert result.startswith("Not read: only a link a member wrote in this conversation can be read")
    assert site.secret_requests == 0 and SECRET_TEXT not in result


async def test_a_link_parley_wrote_itself_is_not_read(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM, site: LinkSite
) -> None:
    """Parley's own answer named an address (as a page it read could have had it do): the next answer may not read
    it, since no member gave it."""
    url = site.url("/page.html")
    answers: Iterator[Reply] = iter([f"Try {url}", ToolCall("read_link", {"url": url}), "Could not read it."])
    results: list[str] = []

    def model(request: dict[str, Any]) -> Reply:
        last = request["messages"][-1]
        if last["role"] == "tool":
            results.append(message_text(last))
        return next(answers)

    llm.handler = model
    await bot.start(**LINKS_ON)
    await ask(fake, "where are the release notes?")
    assert await ask(fake, "what do they say?") == "Could not read it."
    assert results == [
        "Not read: only a link a member wrote in this conversation can be read, and none wrote that one."
        " No member gave a link here."
    ]


@pytest.mark.parametrize("withheld", ["opted_out", "erased"])
async def test_a_link_from_a_member_who_opted_out_or_erased_is_not_read(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM, site: LinkSite, withheld: str
) -> None:
    """Alice's message, replied to by Bob, gives a link; she opted out (or erased what she wrote): her words are
    not read, so neither is her link."""
    url = site.url("/page.html")
    model = await reading(bot, llm, url, **LINKS_ON)
    client = bot.client
    assert client is not None
    linked = fake.add_history(CHANNEL_ID, ALICE_ID, f"my notes: {url}")
    if withheld == "opted_out":
        await client.admission.optouts.set(GUILD_ID, ALICE_ID, True)
    else:
        await client.admission.optouts.mark_erased(GUILD_ID, ALICE_ID, int(linked["id"]))
    await ask(fake, "what do her notes say?", reply_to=int(linked["id"]), asker=BOB_ID)
    [result] = model.results
    assert result.startswith("Not read: only a link a member wrote") and PAGE_TEXT not in result


async def test_with_links_off_no_link_tool_is_offered(bot: RunningBot, fake: FakeDiscord, llm: FakeLLM) -> None:
    model = await reading(bot, llm, "https://example.com/")
    assert await ask(fake, "what does https://example.com/ say?") == "No link tool."
    assert "read_link" not in model.offered[0]


@pytest.mark.parametrize(("tools", "offered"), [('["archive"]', False), ('["archive", "links"]', True)])
async def test_a_channel_profile_without_links_offers_no_link_tool(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM, site: LinkSite, tmp_path: Path, tools: str, offered: bool
) -> None:
    """LINKS on, and the channel's profile (PROFILES_FILE) names its tool sets: read_link only where it names links."""
    file = tmp_path / "profiles.toml"
    file.write_text(f"[channels.{CHANNEL_ID}]\ntools = {tools}\n")
    url = site.url("/page.html")
    model = await reading(bot, llm, url, **LINKS_ON, profiles_file=file)
    await ask(fake, f"what does {url} say?")
    assert ("read_link" in model.offered[0]) is offered
