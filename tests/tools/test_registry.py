"""The tools' one registry (tools/registry.py): each tool's name is written there only, every tool offered has its
own status line, and the tools the model is offered keep their names, descriptions, schemas and order, and the
instructions about them their words (the prompt's cacheable prefix)."""

from __future__ import annotations

import ast
import hashlib
import json
from collections.abc import Collection
from dataclasses import replace
from pathlib import Path
from typing import Any

from pydantic_ai import ModelMessage, ModelResponse, TextPart, ToolDefinition
from pydantic_ai.images import ImageGenerator, TestImageGenerationModel
from pydantic_ai.models.function import AgentInfo, FunctionModel

from agent import build_responder, generate_reply
from archive.knowledge import KnowledgeHit
from edge.streaming import tool_status
from tests.support.agent_test_support import ALICE, conversation_of, deps, msg
from tests.tools.test_images import Grant
from tests.tools.test_server_actions import World
from tools import build_toolbox
from tools.channel_actions import ServerActionDeps
from tools.registry import OTHER_STATUS, TOOLS, read_only_tools

# Every tool Parley declares itself, in the order the model is offered them.
OFFERED_NAMES = [
    "search_history",
    "get_recent_messages",
    "get_channel_stats",
    "remember",
    "recall",
    "remind",
    "search_knowledge",
    "search_web",
]
# With IMAGE_MODEL set, the image tool follows them (tools/images.py).
OFFERED_WITH_IMAGES = [*OFFERED_NAMES, "generate_image"]
# Declared too, and offered only with its setting on (LINKS): tests/tools/test_links_tool.py checks where it is offered.
OFFERED_WITH_THEIR_SETTING = ["read_link"]
# With SERVER_ACTIONS on, where a profile offers them: after Parley's other tools, which keep their place.
SERVER_ACTION_NAMES = [
    "pin_message",
    "unpin_message",
    "create_thread",
    "set_slowmode",
    "delete_message",
    "time_out_member",
]
# The sha256 of those tools' definitions as the model reads them (name, description, parameters, strictness) and of
# the instructions: a change here changes the cached prefix of every prompt.
OFFERED_DIGEST = "9e291c5b5fe194d17a5aef0a1c5794a69ff5cd3be7e5a1a0a2249cdea00376db"


class KnowledgeWithDocuments:
    async def has_documents(self, guild_id: int) -> bool:
        return True

    async def search(
        self, guild_id: int, query: str, *, limit: int = 5, channel_ids: Collection[int]
    ) -> list[KnowledgeHit]:
        return []


def server_action_deps() -> ServerActionDeps:
    return World().action_deps()


async def no_results(query: str) -> list[dict[str, Any]]:
    return []


async def offered_prefix(
    make_settings, *, images: bool = False, server_actions: bool = False
) -> tuple[list[dict[str, Any]], str | None]:
    """The tool definitions and instructions of an answer's first request, every tool of Parley's own offered (the
    image tool with `images`, the server actions with `server_actions`)."""
    settings = make_settings(
        web_search="duckduckgo",
        image_model="openai:gpt-image-1" if images else None,
        server_actions=server_actions,
    )
    offered: list[AgentInfo] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        offered.append(info)
        return ModelResponse(parts=[TextPart("done")])

    toolbox = build_toolbox(settings, web_search=no_results, images=ImageGenerator(TestImageGenerationModel()))
    responder = build_responder(
        settings, model=FunctionModel(model), archive_enabled=True, memory_enabled=True, toolbox=toolbox
    )
    message = msg(ALICE, "Alice", "?")
    # Alice may post here (so `remind` is offered) and the server has documents (so `search_knowledge` is); her answer
    # may make images when they are on.
    chat = replace(deps(), knowledge=KnowledgeWithDocuments(), images=Grant() if images else None)
    if server_actions:
        chat = replace(chat, server_actions=server_action_deps())
    await generate_reply(responder, conversation_of(message), message, chat)
    definitions = [
        {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters_json_schema,
            "strict": tool.strict,
        }
        for tool in offered[0].function_tools
    ]
    return definitions, offered[0].instructions


async def test_the_model_is_offered_the_same_tools_in_the_same_order(make_settings) -> None:
    definitions, instructions = await offered_prefix(make_settings)

    assert [definition["name"] for definition in definitions] == OFFERED_NAMES
    prefix = {"tools": definitions, "instructions": instructions}
    digest = hashlib.sha256(json.dumps(prefix, sort_keys=True).encode()).hexdigest()
    assert digest == OFFERED_DIGEST


# Strings in Parley's source that are a tool's name by coincidence, by file: they name something else.
HOMONYMS = {
    ("archive/stores.py", "remember"): "the archive's write that stores a memory",
    ("commands/remind.py", "remind"): "the /remind slash command",
}
ROOT = Path(__file__).resolve().parents[2]
# Not Parley's own code: the tests, benches and evaluations call tools by name as the model would, and hidden
# folders hold the virtual environment and CI's scripts.
NOT_SOURCE = {"tests", "bench", "eval"}


def names_in_strings(path: Path) -> set[str]:
    """The registered tool names that some string in `path` is, whole (`__all__`'s, which name functions, aside)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    exported = {
        id(element)
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and any(getattr(target, "id", "") == "__all__" for target in node.targets)
        for element in ast.walk(node.value)
    }
    registered = {entry.name for entry in TOOLS}
    return {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and node.value in registered and id(node) not in exported
    }


def _outside_the_source(parts: tuple[str, ...]) -> bool:
    return bool(NOT_SOURCE & set(parts)) or any(part.startswith(".") for part in parts)


def test_no_tool_is_named_by_string_outside_the_registry() -> None:
    registry = ROOT / "tools" / "registry.py"
    named = {
        (path.relative_to(ROOT).as_posix(), name)
        for path in ROOT.rglob("*.py")
        if path != registry and not _outside_the_source(path.relative_to(ROOT).parts)
        for name in names_in_strings(path)
    }

    assert named == set(HOMONYMS)


def test_each_tool_is_registered_once() -> None:
    names = [entry.name for entry in TOOLS]

    assert len(names) == len(set(names))
    assert sorted(names) == sorted([*OFFERED_WITH_IMAGES, *OFFERED_WITH_THEIR_SETTING, *SERVER_ACTION_NAMES])


async def test_the_image_tool_follows_the_others_when_images_are_on(make_settings) -> None:
    definitions, instructions = await offered_prefix(make_settings, images=True)

    assert [definition["name"] for definition in definitions] == OFFERED_WITH_IMAGES
    assert instructions is not None and "`generate_image` makes an image" in instructions


async def test_the_server_actions_come_after_parleys_other_tools_which_keep_their_definitions(make_settings) -> None:
    """After the agent's own tools (the toolbox's, web search and MCP, come after those), leaving every other
    definition as it was."""
    without, _ = await offered_prefix(make_settings)
    definitions, _ = await offered_prefix(make_settings, server_actions=True)

    own = OFFERED_NAMES[: OFFERED_NAMES.index("search_web")]
    assert [definition["name"] for definition in definitions] == [*own, *SERVER_ACTION_NAMES, "search_web"]
    assert [definition for definition in definitions if definition["name"] not in SERVER_ACTION_NAMES] == without


async def test_every_tool_offered_has_its_own_status_line(make_settings) -> None:
    definitions, _ = await offered_prefix(make_settings, images=True)

    statuses = {definition["name"]: tool_status(definition["name"]) for definition in definitions}
    assert all(status != f"*{OTHER_STATUS}*" and status.strip("*") for status in statuses.values()), statuses
    assert len(set(statuses.values())) == len(statuses)
    assert statuses["search_knowledge"] == "*searching the server's documents…*"
    assert statuses["remind"] == "*setting a reminder…*"
    assert statuses["search_web"] == "*searching the web…*"
    assert statuses["generate_image"] == "*drawing…*"


async def test_every_server_action_has_its_own_status_line(make_settings) -> None:
    definitions, _ = await offered_prefix(make_settings, server_actions=True)

    statuses = {tool_status(definition["name"]) for definition in definitions}
    assert len(statuses) == len(definitions) and f"*{OTHER_STATUS}*" not in statuses


def test_a_run_nobody_can_approve_in_is_offered_only_the_tools_that_change_nothing() -> None:
    """A scheduled prompt's run: the read-only tools, in their order; a tool that asks first, makes an image, or is
    not Parley's own (an MCP server's: nobody knows what it changes) is left out."""
    names = [entry.name for entry in TOOLS] + ["weather_forecast"]
    kept = [tool.name for tool in read_only_tools([ToolDefinition(name=name) for name in names])]
    assert kept == [
        "search_history", "get_recent_messages", "get_channel_stats", "search_knowledge", "search_web", "read_link",
    ]  # fmt: skip
    assert not any(entry.asks_first and entry.read_only for entry in TOOLS)
