"""Web search: Parley's own (DuckDuckGo or Tavily, as WEB_SEARCH says), or the model provider's."""

# No `from __future__ import annotations`: pydantic-ai reads the tool functions' annotations on every request.
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, cast

from pydantic_ai import RunContext, ToolDefinition
from pydantic_ai.capabilities import WebSearch
from pydantic_ai.framing import close_tag, open_tag, wrap
from pydantic_ai.messages import ModelRequest, ModelResponse, ToolCallPart, UserPromptPart
from pydantic_ai.models import Model
from pydantic_ai.native_tools import WebSearchTool
from pydantic_ai.toolsets import FunctionToolset

from config import Settings
from ops.packages import missing_package_fix
from prompting.quoting import WEB_RESULT_TAG, WEB_RESULTS_TAG, cap_text, inline
from tools.deps import ChatDeps, log_tool_call
from tools.errors import ToolConfigError
from tools.registry import SEARCH_WEB

log = logging.getLogger("parley.tools")


WEB_RESULTS_MAX = 5
WEB_SNIPPET_MAX_CHARS = 500

# A search backend: the query in, results as pydantic-ai's common search tools return them
# (a title, `url` or `href`, and `content` or `body`).
WebSearchFunction = Callable[[str], Awaitable[Sequence[Mapping[str, Any]]]]


def web_search_function(settings: Settings) -> WebSearchFunction:
    """The search WEB_SEARCH names, from pydantic-ai's common tools (requirements.txt installs their clients)."""
    try:
        if settings.web_search == "tavily":
            from pydantic_ai.common_tools.tavily import tavily_search_tool

            assert settings.tavily_api_key is not None  # Settings refuses tavily without it
            key = settings.tavily_api_key.get_secret_value()
            return cast(WebSearchFunction, tavily_search_tool(key, max_results=WEB_RESULTS_MAX).function)
        from pydantic_ai.common_tools.duckduckgo import duckduckgo_search_tool

        return cast(WebSearchFunction, duckduckgo_search_tool(max_results=WEB_RESULTS_MAX).function)
    except ImportError as error:
        raise ToolConfigError(
            f"WEB_SEARCH={settings.web_search} needs a package that is not installed: {missing_package_fix(error)}"
        ) from None


def web_search_toolset(search: WebSearchFunction, max_calls: int) -> FunctionToolset[ChatDeps]:
    """The `search_web` tool over `search`: offered until the answer has made `max_calls` searches."""

    async def search_web(ctx: RunContext[ChatDeps], query: str) -> str:
        """Search the web. Cite the pages you use as <https://…> links.

        Args:
            query: What to search for, as you would type it into a search engine.
        """
        if _searches_so_far(ctx, up_to_this_call=True) > max_calls:
            return f"No more web searches in this answer (at most {max_calls}): answer with what you found."
        log_tool_call(ctx, SEARCH_WEB.name)
        try:
            results = await search(query)
        except Exception as error:  # noqa: BLE001 - an outside service: any failure is a line for the model
            # The type alone: a search client's message can quote the query, which the model wrote from members' words.
            log.warning("%s failed in channel %s: %s", SEARCH_WEB.name, ctx.deps.channel_id, type(error).__name__)
            return "The web search failed just now; answer without it, and say so if it matters."
        return format_web_results(query, results)

    async def within_the_cap(ctx: RunContext[ChatDeps], tool_def: ToolDefinition) -> ToolDefinition | None:
        return tool_def if _searches_so_far(ctx, up_to_this_call=False) < max_calls else None

    toolset: FunctionToolset[ChatDeps] = FunctionToolset()
    toolset.add_tool(SEARCH_WEB.tool(search_web, prepare=within_the_cap))
    return toolset


def _searches_so_far(ctx: RunContext[ChatDeps], *, up_to_this_call: bool) -> int:
    """This answer's `search_web` calls: all of them, or those up to and including the one running now.

    The answer's are those since its prompt, not the run's: a run resumed after a tool call's approval is a new
    run of the same answer (agent.py).
    """
    count = 0
    messages = ctx.messages
    prompted = [i for i, message in enumerate(messages) if isinstance(message, ModelRequest) and _prompts(message)]
    for message in messages[prompted[-1] if prompted else 0 :]:
        if not isinstance(message, ModelResponse):
            continue
        for part in message.parts:
            if isinstance(part, ToolCallPart) and part.tool_name == SEARCH_WEB.name:
                count += 1
                if up_to_this_call and part.tool_call_id == ctx.tool_call_id:
                    return count
    return count


def _prompts(request: ModelRequest) -> bool:
    return any(isinstance(part, UserPromptPart) for part in request.parts)


def format_web_results(query: str, results: Sequence[Mapping[str, Any]]) -> str:
    """Search results as a quoted `<web_results>`: each page's address and title as attributes, its snippet capped."""
    lines = [open_tag(WEB_RESULTS_TAG, query=inline(query))]
    lines += [
        wrap(
            WEB_RESULT_TAG,
            cap_text(str(result.get("content") or result.get("body") or ""), WEB_SNIPPET_MAX_CHARS),
            url=inline(str(result.get("url") or result.get("href") or "")),
            title=inline(str(result.get("title") or "")),
        )
        for result in results[:WEB_RESULTS_MAX]
    ]
    if not results:
        lines.append("No results.")
    lines.append(close_tag(WEB_RESULTS_TAG))
    return "\n".join(lines)


def supports_native_web_search(model: Model) -> bool:
    """Whether `model`'s provider runs web search itself (OpenAI Responses, Anthropic, Google, Groq, ...)."""
    return WebSearchTool in model.profile.get("supported_native_tools", frozenset())


def native_web_search(max_calls: int) -> WebSearch[ChatDeps]:
    """The provider's own web search, capped at `max_calls` searches where the provider takes a cap (Anthropic).

    A channel's profile may run a model whose provider has no search of its own (MODELS): that run goes
    without, rather than failing on pydantic-ai's UserError for an unsupported native tool.
    """
    capped = WebSearchTool(max_uses=max_calls)

    def offered_tool(ctx: RunContext[ChatDeps]) -> WebSearchTool | None:
        model = _searching_model(ctx)
        if model is None:
            return None
        # OpenAI, Google and Groq take no cap: they decide how often to search within one request.
        return WebSearchTool() if model.unsupported_native_tool_settings(capped) else capped

    return WebSearch(native=offered_tool)


def native_web_search_offered(ctx: RunContext[ChatDeps]) -> bool:
    return _searching_model(ctx) is not None


def _searching_model(ctx: RunContext[ChatDeps]) -> Model | None:
    """The run's model, when its profile offers web search and its provider searches itself."""
    model = ctx.model
    if ctx.deps.offers(SEARCH_WEB.toolset) and isinstance(model, Model) and supports_native_web_search(model):
        return model
    return None
