"""The one registry of Parley's own tools: each declared once, with what the rest of Parley needs to know about it.

A tool's entry gives its name (as the model is offered it), the tool set a channel's profile offers or withholds it
under (profiles/channels.py), the status line a live answer shows while it runs (edge/streaming.py), whether each of
its calls waits for the asker's approval or only reads (approval.py), and where it can run (`offered_here`): a tool
that could only answer "not here" is left out of the request, where every definition costs tokens on every answer.
Its function lives beside the helpers it shares (the archive's, memory's, ...) and becomes a pydantic-ai tool only
through its entry (`ToolEntry.tool`), which gives it its name: nothing else names a tool. The registry imports no
tool, so every layer that needs to know about them (the profiles, the live answer) reads it without loading them.
"""

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic_ai import Tool, ToolDefinition

from archive.knowledge_types import KnowledgeSearch
from tools.approval import asks_first, reads_only
from tools.channel_actions import ServerAction, ServerActionDeps

log = logging.getLogger("parley.tools")

# Tool sets by name, as the profiles and `ChatDeps.offered_toolsets` carry them: each of Parley's own tools is in one,
# and each MCP server's tools are in one of their own, "mcp:<server>".
ARCHIVE = "archive"
MEMORY = "memory"
REMINDERS = "reminders"
KNOWLEDGE = "knowledge"
WEB = "web"
IMAGES = "images"
LINKS = "links"
SERVER_ACTIONS = "server_actions"
MCP_PREFIX = "mcp:"


class RunPlace(Protocol):
    """What decides where a tool can run: the run's deps (tools/deps.py's `ChatDeps`), never the model's words."""

    @property
    def guild_id(self) -> int: ...
    @property
    def channel_id(self) -> int: ...
    @property
    def requester_may_post(self) -> bool: ...
    @property
    def knowledge(self) -> KnowledgeSearch | None: ...
    @property
    def images(self) -> object | None:
        """What the answer may do with images (tools/deps.py's `ImageGrant`); None: it makes none."""
        ...

    @property
    def server_actions(self) -> ServerActionDeps | None: ...


# Whether a tool can run in an answer, asked before each of its model requests.
RunsHere = Callable[[RunPlace], Awaitable[bool]]


async def anywhere(place: RunPlace) -> bool:
    """A tool the settings turned on runs in every answer (it says so itself when, say, the asker may not read)."""
    return True


async def for_who_may_post(place: RunPlace) -> bool:
    """What the tool sets posts in the asker's name: for one who may not see the channel or post in it
    (discord_io.may_post), it could only be refused, after asking them to approve it."""
    return place.requester_may_post


async def where_documents_are(place: RunPlace) -> bool:
    """Only in a server whose knowledge base has documents (or pins): elsewhere the model would search nothing."""
    knowledge = place.knowledge
    if knowledge is None or place.guild_id == 0:
        return False
    try:
        return await knowledge.has_documents(place.guild_id)
    except Exception:
        log.exception("the knowledge base could not be read in channel %s", place.channel_id)
        return False


async def where_images_may_be_made(place: RunPlace) -> bool:
    """Only in an answer that may make images (a member's, where IMAGE_MODEL is set): elsewhere the tool has no
    count to claim one from."""
    return place.images is not None


def unless_turned_off(action: ServerAction) -> RunsHere:
    """A server action runs in a server's channel where the answer reaches Discord, unless the server's admins turned
    it off (`/parley-admin actions`): as the switches stood when the answer began (its tool then checks again)."""

    async def runs_here(place: RunPlace) -> bool:
        deps = place.server_actions
        if deps is None or place.guild_id == 0:
            return False
        try:
            return action not in await deps.off_when_offered(place.guild_id)
        except Exception:
            log.exception("the server actions' switches could not be read in channel %s", place.channel_id)
            return False

    return runs_here


@dataclass(frozen=True)
class ToolEntry:
    """One of Parley's own tools: its name, its tool set, the status line shown while it runs, and whether each call
    waits for the asker's approval (it posts later or changes something) rather than only reading.

    `withholds_itself`: the tool comes in a tool set of its own, which is offered only where the answer's profile
    offers its set (`ChatDeps.offers`), rather than among the agent's tools, which the profile filters (`offered`).
    `runs_here`: whether the tool can run in an answer, from its deps (`offered_here`).
    `read_only`: the tool changes nothing, posts nothing and spends no count: a run nobody is there to approve (a
    scheduled prompt's) is offered these alone (`read_only_tools`), so a new tool is left out until marked so.
    """

    name: str
    toolset: str
    status: str
    asks_first: bool = False
    withholds_itself: bool = False
    runs_here: RunsHere = anywhere
    read_only: bool = False

    def tool(self, function: Callable[..., Any], **options: Any) -> Tool[Any]:
        """The pydantic-ai tool of `function` under this entry's name, declared as asking first or only reading."""
        declared = asks_first if self.asks_first else reads_only
        return declared(function, name=self.name, **options)


SEARCH_HISTORY = ToolEntry("search_history", ARCHIVE, "searching the channel's history…", read_only=True)
GET_RECENT_MESSAGES = ToolEntry(
    "get_recent_messages", ARCHIVE, "reading the channel's recent messages…", read_only=True
)
GET_CHANNEL_STATS = ToolEntry("get_channel_stats", ARCHIVE, "counting the channel's messages…", read_only=True)
# A remembered fact steers later answers and is kept in the asker's name: they approve each one.
REMEMBER = ToolEntry("remember", MEMORY, "making a note of that…", asks_first=True)
RECALL = ToolEntry("recall", MEMORY, "looking through what I was told…")
# It posts later, in the asker's name: they approve each call, every argument shown.
REMIND = ToolEntry("remind", REMINDERS, "setting a reminder…", asks_first=True, runs_here=for_who_may_post)
SEARCH_KNOWLEDGE = ToolEntry(
    "search_knowledge", KNOWLEDGE, "searching the server's documents…", runs_here=where_documents_are, read_only=True
)
# Built for the search backend and cap the settings name (tools/web.py), in the toolbox's tool set "web".
SEARCH_WEB = ToolEntry("search_web", WEB, "searching the web…", withholds_itself=True, read_only=True)
# IMAGE_MODEL's tool, in the toolbox's image capability (tools/images.py): counted per member and server a day.
GENERATE_IMAGE = ToolEntry("generate_image", IMAGES, "drawing…", runs_here=where_images_may_be_made)
# Built over the link reader LINKS turns on (tools/links.py), in the toolbox's tool set "links". Offered in every answer
# it is on for, links given or not: a tool that comes and goes would change the request's cached prefix.
READ_LINK = ToolEntry("read_link", LINKS, "reading the link…", withholds_itself=True, read_only=True)
# Each changes the server in the asker's name: they approve each call, every argument shown, and it runs only if they
# hold the permission it takes there (tools/channel_actions.py's NEEDS), checked as it runs.
PIN_MESSAGE = ToolEntry(
    "pin_message", SERVER_ACTIONS, "pinning the message…", asks_first=True, runs_here=unless_turned_off("pin")
)
UNPIN_MESSAGE = ToolEntry(
    "unpin_message", SERVER_ACTIONS, "unpinning the message…", asks_first=True, runs_here=unless_turned_off("unpin")
)
CREATE_THREAD = ToolEntry(
    "create_thread", SERVER_ACTIONS, "making a thread…", asks_first=True, runs_here=unless_turned_off("thread")
)
SET_SLOWMODE = ToolEntry(
    "set_slowmode", SERVER_ACTIONS, "setting slowmode…", asks_first=True, runs_here=unless_turned_off("slowmode")
)
DELETE_MESSAGE = ToolEntry(
    "delete_message", SERVER_ACTIONS, "deleting the message…", asks_first=True, runs_here=unless_turned_off("delete")
)
TIME_OUT_MEMBER = ToolEntry(
    "time_out_member", SERVER_ACTIONS, "timing the member out…", asks_first=True, runs_here=unless_turned_off("timeout")
)

TOOLS = (
    SEARCH_HISTORY,
    GET_RECENT_MESSAGES,
    GET_CHANNEL_STATS,
    REMEMBER,
    RECALL,
    REMIND,
    SEARCH_KNOWLEDGE,
    SEARCH_WEB,
    GENERATE_IMAGE,
    READ_LINK,
    PIN_MESSAGE,
    UNPIN_MESSAGE,
    CREATE_THREAD,
    SET_SLOWMODE,
    DELETE_MESSAGE,
    TIME_OUT_MEMBER,
)
# The tool sets a profile may name besides an MCP server's, in the order the profiles list them.
TOOL_SETS = tuple(dict.fromkeys(entry.toolset for entry in TOOLS))
# The status of a tool Parley does not declare: an MCP server's.
OTHER_STATUS = "looking something up…"

_BY_NAME = {entry.name: entry for entry in TOOLS}


def status_line(tool_name: str) -> str:
    """What a live answer shows while the tool `tool_name` runs."""
    entry = _BY_NAME.get(tool_name)
    return OTHER_STATUS if entry is None else entry.status


def filtered_toolset(tool_name: str) -> str | None:
    """The tool set whose absence from a profile withholds the tool `tool_name` from the agent's tools
    (profiles/channels.py); None for a tool whose tool set withholds itself, or that Parley does not declare (an MCP
    server's)."""
    entry = _BY_NAME.get(tool_name)
    return None if entry is None or entry.withholds_itself else entry.toolset


async def offered_here(place: RunPlace, tool_defs: list[ToolDefinition]) -> list[ToolDefinition]:
    """The tools of `tool_defs` that can run in the answer at `place`, in the order given: one left out moves none of
    the others, so the request's cacheable prefix holds wherever the same tools are offered. A tool Parley does not
    declare (an MCP server's) is its tool set's to offer."""
    entries = [_BY_NAME.get(tool_def.name) for tool_def in tool_defs]
    return [
        tool_def
        for tool_def, entry in zip(tool_defs, entries, strict=True)
        if entry is None or await entry.runs_here(place)
    ]


def read_only_tools(tool_defs: list[ToolDefinition]) -> list[ToolDefinition]:
    """The tools of `tool_defs` marked read-only, in the order given; a tool Parley does not declare (an MCP server's)
    is not known to change nothing, so it is left out."""
    return [
        tool_def for tool_def in tool_defs if (entry := _BY_NAME.get(tool_def.name)) is not None and entry.read_only
    ]
