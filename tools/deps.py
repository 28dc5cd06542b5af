"""What every tool reads: the answer's `ChatDeps`, never the model's arguments, and the log line of a call."""

import logging
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Protocol

from pydantic_ai import RunContext
from pydantic_ai.images import ImageGenerationResult

from archive import ArchivedMessage, ChannelStats
from archive.knowledge_types import KnowledgeSearch
from memory.store import MemoryStore
from reminders.book import ReminderBook
from tools.approval import Approver
from tools.channel_actions import ServerActionDeps

log = logging.getLogger("parley.tools")


class ImageGrant(Protocol):
    """What an answer may do with images (answering/images.py's `AnswerImages`): where its posts go takes files of
    up to `upload_limit` bytes (0: Parley may not attach files there), and the asker's and the server's images today,
    each one claimed before it is made and counted once it is."""

    @property
    def upload_limit(self) -> int: ...

    async def claim(self) -> str | None:
        """Take one of the day's images for the asker: None, or the one line they are told why not."""
        ...

    def made(self, result: ImageGenerationResult | None) -> None:
        """End the claim: the image `result` counted (its tokens, its model), or None when none was made."""
        ...

    async def any_left(self) -> bool:
        """Whether the asker and the server have an image left today, claiming none."""
        ...


class MessageArchive(Protocol):
    """What the tools need from `archive.Archive`."""

    async def search(
        self, channel_id: int, query: str, *, hours: float | None = None, limit: int = 20
    ) -> Sequence[ArchivedMessage]: ...

    async def recent(
        self, channel_id: int, *, limit: int = 50, hours: float | None = None
    ) -> Sequence[ArchivedMessage]: ...

    async def stats(self, channel_id: int, *, hours: float | None = None) -> ChannelStats: ...

    async def flush(self) -> None: ...


@dataclass
class ChatDeps:
    """Per-answer dependencies; tools read the channel and guild from here, never from the model.

    The names are whatever members and moderators called things; they reach the model only as quoted data.
    """

    bot_name: str
    bot_user_id: int
    guild_id: int
    guild_name: str
    channel_id: int
    channel_name: str
    archive: MessageArchive | None
    requester_id: int
    # Discord's Read Message History for the person asking, in this channel: the tools read for them.
    requester_can_read_history: bool
    # Set when the answer's limits withdraw the tools, to the limit that did (`wind_down_reason`); they stay withdrawn.
    wound_down: str | None = None
    # The remember/recall tools' store (None: they say memory is off), and the message being answered,
    # which a remembered fact records as its source.
    memory: MemoryStore | None = None
    message_id: int = 0
    # The members that message names (@mentions, the author it replies to or asks about): a fact remembered from it
    # may be about one of them, never about a member the model names on its own.
    named_member_ids: frozenset[int] = frozenset()
    # The tool sets this answer may use, by name (tools/registry.py's, and "mcp:<server>"), as the channel's profile
    # says (profiles/channels.py); None: every one that is on.
    offered_toolsets: frozenset[str] | None = None
    # Who approves this answer's tool calls that need it (tools/approval.py); None: such calls are not run.
    approver: Approver | None = None
    # The remind tool's book (None: it says reminders are off), whether the asker has Manage Messages here, which a
    # timed post to the channel needs, and whether they may see the channel and post in it, which any reminder needs.
    reminders: ReminderBook | None = None
    requester_manages_messages: bool = False
    requester_may_post: bool = False
    # The knowledge base `search_knowledge` searches (None: off), and how to find the server's channels whose
    # documents (pins) the asker may read, asked when it runs; None: this one, if they may read its history.
    knowledge: KnowledgeSearch | None = None
    readable_channels: Callable[[], Collection[int]] | None = None
    # The links members gave in what this answer shows (the message it answers, the one it replies to, the
    # conversation's recent messages), as they wrote them: the only ones `read_link` reads.
    links: tuple[str, ...] = ()
    # Asked before each of the answer's model requests with the tokens it has spent so far (counted in the day's
    # ledger only when it ends): a line stops the answer there, the member's or the server's daily budget being
    # reached (admission/spending.py); None: every request goes.
    before_each_call: Callable[[int], Awaitable[str | None]] | None = None
    # The images this answer may make (the image tool, tools/images.py); None: it makes none.
    images: ImageGrant | None = None
    # What the server actions (pin, thread, slowmode, ...) reach in this answer's channel; None: none runs here (a DM,
    # SERVER_ACTIONS off, no archive to keep their audit log).
    server_actions: ServerActionDeps | None = None
    # Nobody is there to approve a tool call (a scheduled prompt's run): only the tools that change nothing are
    # offered (tools/registry.py's `read_only`).
    read_only: bool = False

    def offers(self, toolset: str) -> bool:
        return self.offered_toolsets is None or toolset in self.offered_toolsets


def log_tool_call(ctx: RunContext[ChatDeps], tool: str, kind: str = "") -> None:
    """One INFO line a tool call: which tool, in which channel, for whom (ids only, never arguments)."""
    log.info(
        "%s%s in channel %s for user %s",
        kind,
        tool,
        ctx.deps.channel_id,
        ctx.deps.requester_id,
        extra={"tool": tool, "channel_id": ctx.deps.channel_id, "requester_id": ctx.deps.requester_id},
    )
