"""A linked page made model input: downloaded within caps, then read by its type (HTML, text, JSON, PDF), or named.

The download is pydantic-ai's SSRF-safe one (`safe_download`, what its `WebFetch` capability's local fetcher runs):
only http(s); every hop's host resolved and checked (private, loopback, link-local, multicast and reserved
addresses refused unless allowed, cloud metadata always), the request sent to the address checked, so a second DNS
answer cannot move it (rebinding); redirects followed by hand, each hop checked again, at most 10; the domain lists
on every hop; the body streamed and dropped once it passes the byte cap. Its `WebFetch` tool itself is not used: its
HTML converter needs markdownify and BeautifulSoup (the `web-fetch` extra, not installed), it hands a PDF or an image
to the model as it came, and its timeout is httpx's per read, which a body trickling a byte at a time never trips.
So this adds a time cap on the whole download, a plain-text reading of HTML with the standard library's parser
(bounded: tags longer than any real one dropped first, and no more read than the model is given), PDFs through the
bounded PDF reader (`files.extraction`), and a name for everything else.

Nothing here runs on the event loop but the download itself: decoding and HTML reading have a thread of their own,
PDFs their worker processes; `FETCHES_AT_ONCE` bounds the bodies in memory at once.
"""

from __future__ import annotations

import asyncio
import codecs
import math
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from html.parser import HTMLParser
from urllib.parse import urlsplit

import httpx2
from pydantic_ai._ssrf import DownloadTooLargeError, safe_download

from files.extraction import PdfReaders
from files.kinds import decode_text
from files.pdf import PdfText
from files.prepared import human_size

# Downloads at once in this process: each holds at most its byte cap in memory; later ones wait their turn.
FETCHES_AT_ONCE = 2
# Characters of an HTML page parsed at most (a page's text is far shorter than its markup, and the model gets less).
HTML_MAX_CHARS = 2_000_000
# A tag longer than this is no real page's: html.parser holds all of a tag's attributes at once, so it goes first.
_LONG_TAG = re.compile(r"<[^<>]{8192,}>")
# Elements whose text is no page text.
_UNREAD = frozenset({"script", "style", "noscript", "template", "svg"})
# Elements after which the text goes on on a new line.
_BLOCKS = frozenset(
    "address article aside blockquote br dd div dl dt figcaption figure footer form h1 h2 h3 h4 h5 h6 header hr li"
    " main nav ol p pre section table td th tr ul".split()
)
TITLE_MAX_CHARS = 200
_FEED_CHARS = 65_536
_SPACES = re.compile(r"[ \t\f\v\r\xa0]+")
_BLANK_LINES = re.compile(r"\n\s*\n+")

# Decoding and reading HTML, off the event loop and off the default executor (DNS lookups use it).
_READERS = ThreadPoolExecutor(max_workers=1, thread_name_prefix="parley-pages")


@dataclass(frozen=True)
class LinkLimits:
    """What one link may take: bytes, characters given to the model, seconds, and where it may lead."""

    max_bytes: int
    max_chars: int
    seconds: float
    allow_private: bool = False
    allowed_domains: frozenset[str] = frozenset()
    blocked_domains: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Page:
    """What was read of a linked page: its text (cut to the limit, `cut` saying so), title and type."""

    url: str
    title: str
    text: str
    media_type: str
    size: int
    cut: bool = False
    # For a PDF: how much of it was read, as the model should be told.
    extent: str | None = None


@dataclass
class LinkReader:
    """Reads linked pages within `limits`: `read` gives the page, or one line saying why it was not read."""

    limits: LinkLimits
    pdfs: PdfReaders = field(default_factory=lambda: PdfReaders(workers=1))
    _fetches: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(FETCHES_AT_ONCE))

    async def read(self, url: str) -> Page | str:
        """The page at `url`, or why it was not read ("Not read: …"); never raises for what the page or site does."""
        refused = self._refused(url)
        if refused is not None:
            return f"Not read: {refused}."
        async with self._fetches:
            try:
                async with asyncio.timeout(self.limits.seconds):
                    response = await self._download(url)
            except TimeoutError:
                return f"Not read: it took over {self.limits.seconds:g} s to download."
            except (ValueError, httpx2.InvalidURL, httpx2.HTTPError) as error:
                return f"Not read: {self._why(error)}."
        return await self._read_body(url, response)

    def _refused(self, url: str) -> str | None:
        """Why `url` is not even asked for: its scheme, or its host on the domain lists (every hop is checked again)."""
        try:
            parts = urlsplit(url)
            host = (parts.hostname or "").rstrip(".")
        except ValueError:
            return "that is not a valid web address"
        if parts.scheme.lower() not in ("http", "https"):
            return f"only http:// and https:// links are read, and this one is {parts.scheme.lower()}://"
        if not host:
            return "the link names no site"
        if host in self.limits.blocked_domains:
            return f"{host} is blocked on this server"
        if self.limits.allowed_domains and host not in self.limits.allowed_domains:
            return f"{host} is not among the sites this server allows"
        return None

    async def _download(self, url: str) -> httpx2.Response:
        limits = self.limits
        return await safe_download(
            url,
            allow_local=limits.allow_private,
            # httpx's timeout is per read; the whole download's is the caller's.
            timeout=max(1, math.ceil(limits.seconds)),
            headers={"Accept": "text/html, text/plain;q=0.9, application/json;q=0.9, application/pdf;q=0.8, */*;q=0.1"},
            allowed_domains=sorted(limits.allowed_domains) or None,
            blocked_domains=sorted(limits.blocked_domains) or None,
            max_bytes=limits.max_bytes,
        )

    def _why(self, error: Exception) -> str:
        """The one line for a failed download, from what pydantic-ai's fetcher raised."""
        if isinstance(error, DownloadTooLargeError):
            return f"it is over {human_size(self.limits.max_bytes)}, the most a link may be"
        if isinstance(error, httpx2.HTTPStatusError):
            return f"the site answered {error.response.status_code} {error.response.reason_phrase}".rstrip()
        if isinstance(error, httpx2.HTTPError | httpx2.InvalidURL):
            return "the site could not be reached"
        message = str(error)
        for says, why in _DOWNLOAD_REFUSALS:
            if says in message:
                return why
        return message.splitlines()[0][:200] if message else type(error).__name__

    async def _read_body(self, url: str, response: httpx2.Response) -> Page | str:
        data = response.content
        media_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
        kind = _kind(media_type, data)
        if kind == "pdf":
            return await self._read_pdf(url, data)
        if kind is None:
            what = media_type or "file of unknown type"
            return f"Not read: it is a {human_size(len(data))} {what}; only pages, text, JSON and PDFs are read."
        loop = asyncio.get_running_loop()
        charset = response.charset_encoding
        title, text, cut = await loop.run_in_executor(_READERS, _read_text, data, charset, kind, self.limits.max_chars)
        return Page(url, title, text, media_type or kind, len(data), cut=cut)

    async def _read_pdf(self, url: str, data: bytes) -> Page | str:
        read = await self.pdfs.read(data)
        if isinstance(read, str):
            return f"Not read: {read}."
        text, cut = _cut(read.text, self.limits.max_chars)
        return Page(url, "", text, "application/pdf", len(data), cut=cut or read.cut_at_chars, extent=_extent(read))


# What pydantic-ai's fetcher says of a link it refuses, and the line the model is given for it.
_DOWNLOAD_REFUSALS = (
    ("private/internal IP", "it leads to a private or local network address, which links may not reach"),
    ("cloud metadata", "it leads to a cloud metadata address, which links may never reach"),
    ("protocol", "it leads to an address that is not http:// or https://"),
    ("Too many redirects", "it redirects too many times"),
    ("Redirect response missing Location", "it redirects nowhere"),
    ("not in the allowed domains", "it leads to a site this server does not allow"),
    ("is blocked", "it leads to a site blocked on this server"),
    ("DNS resolution failed", "its site's name could not be found"),
    ("no hostname", "the link names no site"),
    ("content-encoding", "the site sent it in an encoding that cannot be read within the cap"),
)


def _kind(media_type: str, data: bytes) -> str | None:
    """How a body is read ("html", "text", "json", "pdf"), or None: it is named, not read."""
    if media_type == "application/pdf" or (not media_type and data.startswith(b"%PDF-")):
        return "pdf"
    if media_type in ("text/html", "application/xhtml+xml"):
        return "html"
    if media_type == "application/json" or media_type.endswith("+json"):
        return "json"
    if media_type.startswith("text/"):
        return "text"
    if not media_type and decode_text(data[:8192]) is not None:
        return "html" if data.lstrip()[:1] == b"<" else "text"
    return None


def _read_text(data: bytes, charset: str | None, kind: str, max_chars: int) -> tuple[str, str, bool]:
    """(title, text, cut) of a textual body: HTML's text read off its markup, any other as it is."""
    text = _decoded(data, charset)
    if kind != "html":
        cleaned, cut = _cut(text.strip(), max_chars)
        return "", cleaned, cut
    reader = _TextOfHtml(max_chars)
    markup = _LONG_TAG.sub(" ", text[:HTML_MAX_CHARS])
    for start in range(0, len(markup), _FEED_CHARS):
        reader.feed(markup[start : start + _FEED_CHARS])
        if reader.enough:
            break
    reader.close()
    cleaned, cut = _cut(reader.text(), max_chars)
    return reader.title, cleaned, cut or reader.enough or len(text) > HTML_MAX_CHARS


def _decoded(data: bytes, charset: str | None) -> str:
    """The body as text in the charset the server named, when that is a text encoding; else UTF-8."""
    encoding = "utf-8"
    if charset:
        try:
            # Some registered codecs are no text encoding (rot_13, base64): a server naming one gets UTF-8.
            if codecs.lookup(charset)._is_text_encoding:
                encoding = charset
        except LookupError:
            pass
    return data.decode(encoding, errors="replace")


def _cut(text: str, max_chars: int) -> tuple[str, bool]:
    return (text, False) if len(text) <= max_chars else (text[:max_chars], True)


def _extent(read: PdfText) -> str:
    return f"{read.pages_read} of {read.pages} pages read"


class _TextOfHtml(HTMLParser):
    """A page's title and visible text, line by line; stops collecting once it has more than the model is given."""

    def __init__(self, max_chars: int) -> None:
        super().__init__(convert_charrefs=True)
        self.max_chars = max_chars
        self.title = ""
        self._parts: list[str] = []
        self._length = 0
        self._unread_depth = 0
        self._in_title = False

    @property
    def enough(self) -> bool:
        return self._length > self.max_chars

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _UNREAD:
            self._unread_depth += 1
        elif tag == "title":
            self._in_title = True
        if tag in _BLOCKS:
            self._parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in _UNREAD:
            self._unread_depth = max(0, self._unread_depth - 1)
        elif tag == "title":
            self._in_title = False
        if tag in _BLOCKS:
            self._parts.append("\n")

    def handle_data(self, data: str) -> None:
        if self._in_title and not self.title:
            self.title = " ".join(data.split())[:TITLE_MAX_CHARS]
        if self._unread_depth or self._in_title or self.enough:
            return
        self._parts.append(data)
        self._length += len(data)

    def text(self) -> str:
        lines = (_SPACES.sub(" ", line).strip() for line in "".join(self._parts).split("\n"))
        return _BLANK_LINES.sub("\n\n", "\n".join(line for line in lines if line)).strip()
