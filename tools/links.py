"""Reading a link a member gave: `read_link`, over the link reader (files/pages.py), for the links of the answer's deps.

The model names the link; it is read only when a member wrote it in what the answer shows (`ChatDeps.links`), so a
page, a file or the model's own words cannot send Parley to an address no member gave. What the page says reaches the
model as a quoted `<linked_page>`, data like every tool result; what goes wrong is one line it can relay.
"""

# No `from __future__ import annotations`: pydantic-ai reads the tool function's annotations on every request.
from pydantic_ai import RunContext
from pydantic_ai.framing import wrap
from pydantic_ai.toolsets import FunctionToolset

from config import Settings
from files.links import link_key
from files.pages import LinkLimits, LinkReader, Page
from files.prepared import human_size
from prompting.quoting import LINKED_PAGE_TAG
from tools.deps import ChatDeps, log_tool_call
from tools.registry import READ_LINK

# A link is a long attribute value at most this long (members' links are quoted in full up to it).
URL_MAX_CHARS = 2000
# The links named in a refusal, so the model can take the one the member meant.
LINKS_NAMED = 5


def link_reader(settings: Settings) -> LinkReader:
    """The link reader within the LINKS_ settings."""
    return LinkReader(
        LinkLimits(
            max_bytes=settings.links_max_bytes,
            max_chars=settings.links_max_chars,
            seconds=settings.links_timeout_seconds,
            allow_private=settings.links_allow_private_addresses,
            allowed_domains=settings.links_allowed_domains,
            blocked_domains=settings.links_blocked_domains,
        )
    )


def links_toolset(reader: LinkReader) -> FunctionToolset[ChatDeps]:
    """The `read_link` tool over `reader`."""

    async def read_link(ctx: RunContext[ChatDeps], url: str) -> str:
        """Read a web page (or PDF, text, JSON) a member linked in this conversation: its title and text.

        Args:
            url: The link, as a member wrote it in the conversation.
        """
        log_tool_call(ctx, READ_LINK.name)
        given = {link_key(link): link for link in ctx.deps.links}
        link = given.get(link_key(url))
        if link is None:
            return not_given(list(given.values()))
        read = await reader.read(link)
        return format_page(read) if isinstance(read, Page) else read

    toolset: FunctionToolset[ChatDeps] = FunctionToolset()
    toolset.add_tool(READ_LINK.tool(read_link))
    return toolset


def not_given(links: list[str]) -> str:
    """The refusal of a link no member gave, naming those they did."""
    line = "Not read: only a link a member wrote in this conversation can be read, and none wrote that one."
    if not links:
        return line + " No member gave a link here."
    return line + " Links members gave: " + ", ".join(f"<{link}>" for link in links[:LINKS_NAMED])


def format_page(page: Page) -> str:
    """A page as a quoted `<linked_page>`: its address, title, type and size as attributes, its text as the body."""
    cut = f"at {len(page.text):,} characters" if page.cut else None
    return wrap(
        LINKED_PAGE_TAG,
        page.text or "(no text)",
        url=" ".join(page.url.split())[:URL_MAX_CHARS],
        title=page.title or None,
        type=page.media_type,
        size=human_size(page.size),
        read=page.extent,
        cut=cut,
    )
