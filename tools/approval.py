"""Which tool calls wait for the asker's approval, and what the model reads when one was not approved.

Each of Parley's own tools declares it in its entry of the tools' registry (tools/registry.py): one that posts
later or changes anything (`remind`, `remember`) is built with `asks_first` and always waits; one that only reads
(the archive's, `recall`, the knowledge base's, web search) with `reads_only`, and never does. An MCP server's tool
waits unless the server marks it read-only or the deployer's MCP_SERVERS file allows it always (`ServerApproval`).
MCP's tool annotations are hints from the server
(https://modelcontextprotocol.io/specification/2025-11-25/schema#toolannotations): a tool without
`readOnlyHint: true` may change things, and `"approval": "always-ask"` ignores the hint for a server not trusted
to give it honestly.

The waiting is pydantic-ai's: a tool that needs approval is declared with `requires_approval` or raises
`ApprovalRequired` (`ApprovalRequiredToolset`), the run ends with `DeferredToolRequests`, and agent.py resumes it
with the asker's verdicts (`settle`), which an `Approver` collects (edge/approval.py: Approve and Deny buttons),
shown every argument the call runs with, whole (one too long to show whole is refused unasked). A denied call
reaches the model as the tool's result, a refusal it is asked to relay.

While it waits, an answer holds nothing others wait for: the places it holds (its channel's turn, an answer slot:
admission/gatekeeper.py takes them through `holding`) are let go for the wait and taken again, in the order they
were taken, once the asker decided (`stepped_aside`).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol
from unicodedata import category

from pydantic import BaseModel, ConfigDict, Field
from pydantic_ai import RunContext, Tool, ToolDefinition
from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults, ToolApproved, ToolDenied
from pydantic_ai.toolsets import AbstractToolset, ApprovalRequiredToolset

log = logging.getLogger("parley.tools")

# "ask": tools the server does not mark read-only wait; "always-ask": every tool waits, whatever the server says;
# "always-allowed": none does (a server the deployer trusts with whatever the model asks of it).
ApprovalMode = Literal["ask", "always-ask", "always-allowed"]


# --- What each tool declares ------------------------------------------------------------------------

# A tool's registry entry (tools/registry.py) declares whether it waits for the asker: one that posts later or
# changes anything is built with `asks_first` (pydantic-ai's `requires_approval`: its call ends the run as a
# `DeferredToolRequests` approval), one that only reads with `reads_only`; an MCP server's tool by its annotations
# (`ServerApproval`).
# tests/promises/test_promise_approval.py enumerates every tool offered and fails on one declared neither way.
READS_ONLY_KEY = "parley_reads_only"


def asks_first(function: Callable[..., Any], **options: Any) -> Tool[Any]:
    """The tool of `function`, which posts later or changes something: each call waits for the asker's approval."""
    return Tool(function, requires_approval=True, **options)


def reads_only(function: Callable[..., Any], **options: Any) -> Tool[Any]:
    """The tool of `function`, which only reads (for the asker, as far as they may): it runs without asking."""
    return Tool(function, metadata={READS_ONLY_KEY: True}, **options)


def declared_reads_only(tool_def: ToolDefinition) -> bool:
    """Whether the tool declares that it only reads: `reads_only`'s mark, or an MCP server's `readOnlyHint`."""
    metadata = tool_def.metadata or {}
    return bool(metadata.get(READS_ONLY_KEY) or (metadata.get("annotations") or {}).get("readOnlyHint"))


# --- Verdicts --------------------------------------------------------------------------------------


class Verdict(enum.Enum):
    """How an approval request ended."""

    APPROVED = "approved"
    DENIED = "denied"
    TIMED_OUT = "timed out"
    # There was no one to ask (no Discord answer to ask in, or the prompt could not be posted).
    UNASKED = "unasked"
    # Its arguments are too long to show whole in a prompt, so it was not put to the asker.
    TOO_LONG = "too long to show"


# What the model reads as the result of a call that did not run, by verdict.
REFUSALS = {
    Verdict.DENIED: "The person asking denied this call, so it was not run. Do not try it again in this answer;"
    " tell them it was not done.",
    Verdict.TIMED_OUT: "The person asking did not approve this call in time, so it was not run. Do not try it again"
    " in this answer; tell them it was not done and that they can ask again.",
    Verdict.UNASKED: "This call needs the approval of the person asking, which could not be asked for here, so it"
    " was not run. Tell them it was not done.",
    Verdict.TOO_LONG: "This call needs the approval of the person asking, who must see its arguments whole, and they"
    " are too long to show, so it was not run. Tell them it was not done; a shorter call may be approved.",
}
# A deferred call that is not an approval (pydantic-ai's external tools): Parley runs none.
NOT_RUN_HERE = "This tool cannot run here; it was not run."
# The longest arguments a prompt shows, as JSON: within a Discord message beside the prompt's own words. The asker
# approves exactly what runs, so a call with longer arguments is never cut to fit: it is refused unasked.
ARGUMENTS_SHOWN_MAX_CHARS = 1500
# Escaped in the JSON shown (as `\u0060`, the same string to a JSON reader): a backtick could close the prompt's code
# block, and an invisible or direction-changing character (Unicode's control, format and separator categories) could
# hide or reorder what the asker reads (a lone surrogate could not be posted at all).
_HIDING_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


@dataclass(frozen=True)
class ApprovalRequest:
    """One tool call waiting for the asker: the tool, as the model was offered it, and its arguments as JSON."""

    tool_call_id: str
    tool_name: str
    arguments: str


class Approver(Protocol):
    """Who decides a tool call for an answer: its asker, asked in the answer's channel (edge/approval.py)."""

    async def ask(self, request: ApprovalRequest) -> Verdict: ...


class _ServerEntry(BaseModel):
    """The keys of an `mcpServers` entry Parley reads beside pydantic-ai's (which ignores them)."""

    model_config = ConfigDict(extra="ignore")

    approval: ApprovalMode = "ask"
    # Cline's name for the same list (https://docs.cline.bot/mcp/configuring-mcp-servers).
    always_allow: list[str] = Field(default_factory=list, alias="alwaysAllow")


class _ServersFile(BaseModel):
    model_config = ConfigDict(extra="ignore")

    mcpServers: dict[str, _ServerEntry]


@dataclass(frozen=True)
class ServerApproval:
    """One MCP server's approval setting: its mode, and the tools (by the server's own names) that never wait."""

    server: str
    mode: ApprovalMode = "ask"
    always_allowed: frozenset[str] = frozenset()

    def requires_approval(self, tool_name: str, annotations: Mapping[str, Any] | None) -> bool:
        """Whether a call of the server's tool `tool_name` (its own name, unprefixed) waits for the asker."""
        if self.mode == "always-allowed" or tool_name in self.always_allowed:
            return False
        if self.mode == "always-ask":
            return True
        return not (annotations or {}).get("readOnlyHint", False)

    def guard(self, toolset: AbstractToolset[Any]) -> ApprovalRequiredToolset[Any]:
        """`toolset` (the server's tools, named `<server>_<tool>`), with the calls that need approval deferred."""
        prefix = f"{self.server}_"

        def required(ctx: RunContext[Any], tool_def: ToolDefinition, tool_args: dict[str, Any]) -> bool:
            name = tool_def.name.removeprefix(prefix)
            return self.requires_approval(name, (tool_def.metadata or {}).get("annotations"))

        return ApprovalRequiredToolset(toolset, approval_required_func=required)


def read_server_approvals(path: str | Path) -> dict[str, ServerApproval]:
    """Each server's approval setting in the `mcpServers` file at `path` (a server without one: "ask").

    Raises:
        OSError: the file cannot be read.
        ValueError: it is not JSON, or an `approval` or `alwaysAllow` value is not one Parley takes (a pydantic
            ValidationError, which names the server and the key).
    """
    servers = _ServersFile.model_validate_json(Path(path).read_bytes()).mcpServers
    return {
        name: ServerApproval(name, entry.approval, frozenset(entry.always_allow)) for name, entry in servers.items()
    }


def approval_requests(requests: DeferredToolRequests) -> list[ApprovalRequest]:
    """The calls in `requests` that wait for approval, each with every argument it runs with, as JSON to show."""
    return [
        ApprovalRequest(call.tool_call_id, call.tool_name, shown_arguments(call.args_as_dict()))
        for call in requests.approvals
    ]


async def settle(
    requests: DeferredToolRequests, approver: Approver | None, *, until: Callable[[], Awaitable[object]] | None = None
) -> DeferredToolResults | None:
    """The results that resume a run ended by `requests`: each approval as the asker decided it (all asked at once),
    a refusal for the model where it was not approved. None if `until()` returns first (the answer was stopped):
    the requests still waiting are then withdrawn."""
    requested = approval_requests(requests)
    verdicts = await _verdicts(requested, approver, until)
    if verdicts is None:
        return None
    approvals: dict[str, bool | ToolApproved | ToolDenied] = {
        call_id: ToolApproved() if verdict is Verdict.APPROVED else ToolDenied(REFUSALS[verdict])
        for call_id, verdict in verdicts.items()
    }
    calls: dict[str, Any] = {call.tool_call_id: NOT_RUN_HERE for call in requests.calls}
    return requests.build_results(approvals=approvals, calls=calls)


async def _verdicts(
    requested: list[ApprovalRequest], approver: Approver | None, until: Callable[[], Awaitable[object]] | None
) -> dict[str, Verdict] | None:
    """Each request's verdict by its call's id, those shown whole asked all at once; None if `until()` returns first."""
    verdicts = {request.tool_call_id: Verdict.TOO_LONG for request in requested if not _shown_whole(request)}
    asked = [request for request in requested if request.tool_call_id not in verdicts]
    if approver is None:
        verdicts.update((request.tool_call_id, Verdict.UNASKED) for request in asked)
    else:
        # The asker may take minutes: the answers waiting behind this one go first meanwhile.
        async with stepped_aside():
            asking = asyncio.gather(*(approver.ask(request) for request in asked), return_exceptions=True)
            decided = await _first_of(asking, until)
        if decided is None:
            return None
        verdicts.update(
            (request.tool_call_id, _verdict(request, outcome)) for request, outcome in zip(asked, decided, strict=True)
        )
    return verdicts


async def _first_of(
    asking: asyncio.Future[list[Verdict | BaseException]], until: Callable[[], Awaitable[object]] | None
) -> list[Verdict | BaseException] | None:
    """The verdicts, or None if `until()` returns first; the wait that lost is cancelled (its prompts then close)."""
    if until is None:
        return await asking
    stop: asyncio.Future[Any] = asyncio.ensure_future(until())
    try:
        done, _ = await asyncio.wait((asking, stop), return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiting in (asking, stop):
            waiting.cancel()
        # The cancelled asks close their prompts before the answer goes on.
        await asyncio.gather(asking, stop, return_exceptions=True)
    return asking.result() if asking in done else None


def _verdict(request: ApprovalRequest, outcome: Verdict | BaseException) -> Verdict:
    """An approver's failure leaves the call unasked, and so not run: it never fails the answer."""
    if isinstance(outcome, Verdict):
        return outcome
    log.error("asking to approve %s failed", request.tool_name, exc_info=outcome)
    return Verdict.UNASKED


def shown_arguments(arguments: Mapping[str, Any]) -> str:
    """`arguments` as the JSON a prompt shows: every one, whole, with what could hide part of it escaped."""
    text = json.dumps(arguments, ensure_ascii=False, default=str)
    return "".join(_escaped(char) if char == "`" or category(char) in _HIDING_CATEGORIES else char for char in text)


def _escaped(char: str) -> str:
    """`char` as JSON escapes it: one `\\uXXXX`, or a surrogate pair's two beyond the Basic Multilingual Plane."""
    units = char.encode("utf-16-be", "surrogatepass")
    return "".join(f"\\u{int.from_bytes(units[i : i + 2]):04x}" for i in range(0, len(units), 2))


def _shown_whole(request: ApprovalRequest) -> bool:
    return len(request.arguments) <= ARGUMENTS_SHOWN_MAX_CHARS


# --- What a waiting answer lets go -----------------------------------------------------------------


class Held:
    """One place an answer holds that others wait for: a lock or a semaphore, taken and let go of through here."""

    def __init__(self, lock: asyncio.Lock | asyncio.Semaphore) -> None:
        self._lock = lock
        self.held = False

    async def take(self) -> None:
        await self._lock.acquire()
        self.held = True

    def let_go(self) -> None:
        if self.held:
            self.held = False
            self._lock.release()


# The places the running answer (this task, and the tasks it starts) holds, in the order it took them.
_HELD: ContextVar[tuple[Held, ...]] = ContextVar("parley_held_places", default=())


@contextlib.asynccontextmanager
async def holding(lock: asyncio.Lock | asyncio.Semaphore, *, let_go_for_approval: bool = True) -> AsyncIterator[None]:
    """Hold `lock` for the body: a place that a wait for the asker's approval inside it lets go of meanwhile, unless
    not `let_go_for_approval`."""
    place = Held(lock)
    await place.take()
    token = _HELD.set((*_HELD.get(), place) if let_go_for_approval else _HELD.get())
    try:
        yield
    finally:
        _HELD.reset(token)
        place.let_go()


@contextlib.asynccontextmanager
async def stepped_aside() -> AsyncIterator[None]:
    """Let go of every place held for the body, then take them again in the order they were first taken (as every
    answer takes them, so no two answers wait on each other)."""
    places = [place for place in _HELD.get() if place.held]
    for place in reversed(places):
        place.let_go()
    try:
        yield
    finally:
        for place in places:
            await place.take()
