"""The responder's tools and their dependencies: the channel archive, memory and the server's knowledge base, read
for the member asking, web search, the links members give, and the tools of the deployer's MCP servers.

Every tool takes its channel, guild and member from `ChatDeps`, which the bot fills in per answer, never from
the model's arguments; what a tool returns is quoted data for the model, and a failure is a short line it can
relay, never a failed answer.

Each of Parley's own tools is declared once, in registry.py, which everything else that needs to know about a tool
reads; the modules here hold the tools' functions by concern (archive.py, memory/store.py, web.py, links.py,
mcp.py), what they read (deps.py), the tool sets offered by name (toolbox.py), and which calls wait for the asker's
approval (approval.py).
"""

from tools.archive import ARCHIVE_TOOLS, HISTORY_NOT_PERMITTED, HOURS_MAX
from tools.deps import ChatDeps, MessageArchive, log_tool_call
from tools.errors import ToolConfigError
from tools.images import supports_native_images
from tools.mcp import load_mcp_servers
from tools.memory import MEMORY_TOOLS
from tools.toolbox import Toolbox, build_toolbox, offers, tool_config_problem
from tools.web import supports_native_web_search, web_search_function, web_search_toolset

__all__ = [
    "ARCHIVE_TOOLS",
    "HISTORY_NOT_PERMITTED",
    "HOURS_MAX",
    "MEMORY_TOOLS",
    "ChatDeps",
    "MessageArchive",
    "ToolConfigError",
    "Toolbox",
    "build_toolbox",
    "load_mcp_servers",
    "log_tool_call",
    "offers",
    "supports_native_images",
    "supports_native_web_search",
    "tool_config_problem",
    "web_search_function",
    "web_search_toolset",
]
