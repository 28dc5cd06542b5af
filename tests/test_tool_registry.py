"""The tools' one registry (tools/registry.py): the tools the model is offered keep their names, descriptions,
schemas and order, and the instructions about them their words (the prompt's cacheable prefix)."""

from __future__ import annotations

import hashlib
import json
from collections import deque
from datetime import UTC, datetime
from typing import Any

from pydantic_ai import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from agent import build_responder, generate_reply
from conversation import ChannelConversation
from records import MessageRecord
from tools import ChatDeps, build_toolbox

T0 = datetime(2026, 11, 28, 0, 0, tzinfo=UTC)
GUILD, CHANNEL, ALICE = 42, 500, 10

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
# The sha256 of those tools' definitions as the model reads them (name, description, parameters, strictness) and of
# the instructions: a change here changes the cached prefix of every prompt.
OFFERED_DIGEST = "cae1a9023910f830df7ea22c6bbda42245fb0fe7416d211ed11e0f99f49dea20"


class KnowledgeWithDocuments:
    async def has_documents(self, guild_id: int) -> bool:
        return True

    async def search(self, guild_id: int, query: str, *, limit: int, channel_ids: Any) -> list[Any]:
        return []


async def no_results(query: str) -> list[dict[str, Any]]:
    return []


async def offered_prefix(make_settings) -> tuple[list[dict[str, Any]], str | None]:
    """The tool definitions and instructions of an answer's first request, every tool of Parley's own offered."""
    settings = make_settings(web_search="duckduckgo")
    offered: list[AgentInfo] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        offered.append(info)
        return ModelResponse(parts=[TextPart("done")])

    toolbox = build_toolbox(settings, web_search=no_results)
    responder = build_responder(
        settings, model=FunctionModel(model), archive_enabled=True, memory_enabled=True, toolbox=toolbox
    )
    message = MessageRecord(
        message_id=900, channel_id=CHANNEL, author_id=ALICE, author="Alice", content="?", timestamp=T0
    )
    conversation = ChannelConversation(CHANNEL, T0, T0, deque([message]))
    deps = ChatDeps(
        bot_name="Parley",
        bot_user_id=1,
        guild_id=GUILD,
        guild_name="Guild",
        channel_id=CHANNEL,
        channel_name="general",
        archive=None,
        requester_id=ALICE,
        requester_can_read_history=True,
        requester_may_post=True,
        knowledge=KnowledgeWithDocuments(),  # type: ignore[arg-type]
    )
    await generate_reply(responder, conversation, message, deps)
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
