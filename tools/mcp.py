"""The tools of the deployer's MCP servers (MCP_SERVERS), which can never fail an answer."""

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError
from pydantic_ai import RunContext
from pydantic_ai.exceptions import ToolFailed
from pydantic_ai.framing import wrap
from pydantic_ai.toolsets import AbstractToolset, ToolsetTool, WrapperToolset
from pydantic_core import to_json

from ops.packages import missing_package_fix
from prompting.quoting import TOOL_RESULT_TAG, cap_text, inline
from tools.approval import ServerApproval, read_server_approvals
from tools.deps import ChatDeps, log_tool_call
from tools.errors import ToolConfigError

log = logging.getLogger("parley.tools")


TOOL_RESULT_MAX_CHARS = 4000
# Starting a stdio server is starting a program (a Python one imports for a few seconds on a busy machine).
MCP_START_TIMEOUT_SECONDS = 30.0
MCP_STOP_TIMEOUT_SECONDS = 10.0


@dataclass
class ServerState:
    """An MCP server's state, shared by the copies pydantic-ai makes of its toolset for each run."""

    up: bool = False
    problem: str = "not started"
    # Set once the server is up or has failed to start.
    settled: asyncio.Event = field(default_factory=asyncio.Event)
    stopping: asyncio.Event = field(default_factory=asyncio.Event)
    task: "asyncio.Task[None] | None" = None


@dataclass
class McpServer(WrapperToolset[ChatDeps]):
    """One MCP server's tools, which can never fail an answer.

    A server that does not start or dies later is one logged line, and its tools are then absent; a call
    that fails or outlasts `timeout_seconds` is a short error the model reads; results are quoted data.
    The bot starts and stops the server (`start`, `stop`), not each run.
    """

    name: str = ""
    timeout_seconds: float = 30.0
    state: ServerState = field(default_factory=ServerState)
    # Which of its tools' calls wait for the asker's approval (MCP_SERVERS' `approval` and `alwaysAllow`); None:
    # those the server does not mark read-only.
    approval: ServerApproval | None = None

    def start(self) -> None:
        """Start the server in the background: Parley answers meanwhile, and its tools appear once it is up."""
        self.state.task = asyncio.create_task(self._serve(), name=f"mcp-server-{self.name}")

    async def _serve(self) -> None:
        # One task enters and leaves the MCP client's context: its task groups must exit where they began.
        state = self.state
        failure: Exception | None = None
        try:
            async with self.wrapped:
                state.up, state.problem = True, ""
                state.settled.set()
                log.info("MCP server %s is up", self.name)
                await state.stopping.wait()
        except Exception as error:  # noqa: BLE001 - an outside program: Parley goes on without it
            failure = error
        finally:
            # Also when the client's task group cancelled this task because the server went away.
            state.up = False
            if not state.stopping.is_set():
                self._down("stopped answering" if state.settled.is_set() else "did not start", failure)
            state.settled.set()

    async def stop(self) -> None:
        self.state.stopping.set()
        task = self.state.task
        if task is None:
            return
        _, pending = await asyncio.wait({task}, timeout=MCP_STOP_TIMEOUT_SECONDS)
        if pending:
            log.warning("MCP server %s did not stop within %g seconds", self.name, MCP_STOP_TIMEOUT_SECONDS)
            task.cancel()

    async def __aenter__(self) -> "McpServer":
        return self

    async def __aexit__(self, *args: Any) -> bool | None:
        return None

    def guarded(self) -> AbstractToolset[ChatDeps]:
        """The server's tools, those that need the asker's approval waiting for it (tools/approval.py)."""
        # Outside this wrapper, whose call_tool would take pydantic-ai's ApprovalRequired for a failed call.
        return (self.approval or ServerApproval(self.name)).guard(self)

    def describe(self) -> str:
        if self.state.up:
            return f"{self.name} up"
        return f"{self.name} down ({self.state.problem})" if self.state.settled.is_set() else f"{self.name} starting"

    async def get_tools(self, ctx: RunContext[ChatDeps]) -> dict[str, ToolsetTool[ChatDeps]]:
        if not self.state.up:
            return {}
        try:
            return await self.wrapped.get_tools(ctx)
        except Exception as error:  # noqa: BLE001 - an outside program: the answer goes on without it
            self._down("stopped answering", error)
            return {}

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[ChatDeps], tool: ToolsetTool[ChatDeps]
    ) -> str:
        if not self.state.up:
            raise ToolFailed(f"The {self.name} service is not available now.")
        log_tool_call(ctx, name, "MCP tool ")
        try:
            async with asyncio.timeout(self.timeout_seconds):
                result = await self.wrapped.call_tool(name, tool_args, ctx, tool)
        except TimeoutError:
            log.warning("MCP tool %s timed out after %g seconds", name, self.timeout_seconds)
            raise ToolFailed(f"{name} took longer than {self.timeout_seconds:g} seconds and was stopped.") from None
        except ToolFailed as failed:
            # The server's own words about its failure: quoted like its results.
            raise ToolFailed(self._framed(name, failed.message, error=True)) from None
        except Exception as error:  # noqa: BLE001 - an outside program: the answer goes on without it
            self._down("stopped answering", error, quote_message=False)
            raise ToolFailed(f"The {self.name} service stopped answering.") from None
        return self._framed(name, result)

    def _framed(self, tool: str, result: Any, *, error: bool = False) -> str:
        text = result if isinstance(result, str) else to_json(result, fallback=str).decode()
        return wrap(
            TOOL_RESULT_TAG,
            cap_text(text, TOOL_RESULT_MAX_CHARS),
            service=inline(self.name),
            tool=tool,
            error="true" if error else None,
        )

    def _down(self, what: str, error: Exception | None, *, quote_message: bool = True) -> None:
        """Mark the server down and log it, once. A failed call's message is left out: it may echo the arguments."""
        if self.state.problem in ("did not start", "stopped answering"):
            return
        self.state.up, self.state.problem = False, what
        cause = ""
        if error is not None:
            cause = f" ({type(error).__name__}: {_one_line(error)})" if quote_message else f" ({type(error).__name__})"
        log.warning("MCP server %s %s%s; answering without its tools", self.name, what, cause)


def load_mcp_servers(path: str, timeout_seconds: float) -> list[McpServer]:
    """The servers of the `mcpServers` JSON file at `path`, through pydantic-ai's loader; none started.

    Raises:
        ToolConfigError: the file is missing, unreadable or malformed, or the MCP client is not installed.
    """
    try:
        from pydantic_ai.mcp import MCPToolset, load_mcp_toolsets
    except ImportError as error:
        raise ToolConfigError(
            f"MCP_SERVERS ({path}) needs a package that is not installed: {missing_package_fix(error)}"
        ) from None
    try:
        loaded = load_mcp_toolsets(path)
        approvals = read_server_approvals(path)
    except (OSError, ValueError) as error:
        raise ToolConfigError(f"MCP_SERVERS names {path}, which cannot be used: {_one_line(error)}") from None
    servers = []
    for prefixed in loaded:
        toolset = prefixed.wrapped  # type: ignore[attr-defined]
        name = toolset.id
        # Rebuilt on the loader's transport for a start-up allowance and for tool errors Parley frames itself.
        rebuilt = MCPToolset(
            toolset.client.transport, id=name, init_timeout=MCP_START_TIMEOUT_SECONDS, tool_error_behavior="failed"
        )
        approval = approvals.get(name)
        servers.append(McpServer(rebuilt.prefixed(name), name=name, timeout_seconds=timeout_seconds, approval=approval))
    return servers


def _one_line(error: Exception) -> str:
    if isinstance(error, ValidationError):
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        return f"{where}: {first['msg']}" if where else first["msg"]
    return " ".join(str(error).split())
