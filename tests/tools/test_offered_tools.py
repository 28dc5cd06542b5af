"""A request carries only the tools that can run in its answer (tools/registry.py's `runs_here`), in one order: the
definitions the model reads, captured from its requests with FunctionModel."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace
from typing import Any

from pydantic_ai import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolDefinition, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from agent import Reply, build_responder, generate_reply
from archive.knowledge import KnowledgeHit
from tests.support.agent_test_support import ALICE, conversation_of, deps, msg
from tests.tools.test_registry import OFFERED_NAMES as EVERY_TOOL
from tests.tools.test_registry import no_results
from tools import ChatDeps, build_toolbox


class Knowledge:
    """A server's knowledge base, with documents or without."""

    def __init__(self, documents: bool) -> None:
        self.documents = documents

    async def has_documents(self, guild_id: int) -> bool:
        return self.documents

    async def search(
        self, guild_id: int, query: str, *, limit: int = 5, channel_ids: Collection[int]
    ) -> list[KnowledgeHit]:
        return []


async def offered_tools(
    make_settings: Any, chat: ChatDeps, *, web_search: str = "duckduckgo", reminders: bool = True
) -> list[ToolDefinition]:
    """The tool definitions of an answer's first request, with the archive and memory on."""
    settings = make_settings(web_search=web_search)
    offered: list[AgentInfo] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        offered.append(info)
        return ModelResponse(parts=[TextPart("done")])

    toolbox = build_toolbox(settings, web_search=no_results)
    responder = build_responder(
        settings,
        model=FunctionModel(model),
        archive_enabled=True,
        memory_enabled=True,
        reminders_enabled=reminders,
        toolbox=toolbox,
    )
    message = msg(ALICE, "Alice", "?")
    await generate_reply(responder, conversation_of(message), message, chat)
    return offered[0].function_tools


def names(tool_defs: list[ToolDefinition]) -> list[str]:
    return [tool.name for tool in tool_defs]


async def test_a_server_with_documents_is_offered_search_knowledge(make_settings) -> None:
    offered = await offered_tools(make_settings, replace(deps(), knowledge=Knowledge(documents=True)))

    assert names(offered) == EVERY_TOOL


async def test_a_server_without_documents_is_not_offered_search_knowledge(make_settings) -> None:
    for knowledge in (Knowledge(documents=False), None):
        offered = await offered_tools(make_settings, replace(deps(), knowledge=knowledge))

        assert "search_knowledge" not in names(offered)


async def test_reminders_off_or_an_asker_who_may_not_post_gets_no_remind(make_settings) -> None:
    with_documents = replace(deps(), knowledge=Knowledge(documents=True))

    off = await offered_tools(make_settings, with_documents, reminders=False)
    may_not_post = await offered_tools(make_settings, replace(with_documents, requester_may_post=False))

    assert "remind" not in names(off) and "remind" not in names(may_not_post)


async def test_web_search_unconfigured_offers_no_search_web(make_settings) -> None:
    offered = await offered_tools(make_settings, replace(deps(), knowledge=Knowledge(documents=True)), web_search="off")

    assert names(offered) == [name for name in EVERY_TOOL if name != "search_web"]


async def test_the_tools_offered_keep_their_order_and_definitions_whatever_is_left_out(make_settings) -> None:
    every = await offered_tools(make_settings, replace(deps(), knowledge=Knowledge(documents=True)))
    fewer = await offered_tools(
        make_settings, replace(deps(), knowledge=Knowledge(documents=False), requester_may_post=False)
    )

    assert names(fewer) == [name for name in EVERY_TOOL if name not in ("remind", "search_knowledge")]
    # The same definitions, byte for byte, in the same relative order: the prefix a provider caches holds.
    assert fewer == [tool for tool in every if tool.name in names(fewer)]


async def test_a_call_of_a_tool_not_offered_is_retried_as_unknown(make_settings) -> None:
    """A model that calls `search_knowledge` where there are no documents gets pydantic-ai's unknown-tool retry,
    then answers: the answer does not fail, and nothing is searched."""
    searched: list[str] = []

    class Searched(Knowledge):
        async def search(self, guild_id: int, query: str, **options: Any) -> list[KnowledgeHit]:
            searched.append(query)
            return []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart("search_knowledge", {"query": "rules"})])
        return ModelResponse(parts=[TextPart("The server has no documents on that.")])

    settings = make_settings()
    responder = build_responder(settings, model=FunctionModel(model), archive_enabled=True, memory_enabled=True)
    message = msg(ALICE, "Alice", "what are the rules?")
    chat = replace(deps(), knowledge=Searched(documents=False))
    reply: Reply = await generate_reply(responder, conversation_of(message), message, chat)

    [told] = [part for turn in reply.messages for part in turn.parts if isinstance(part, ToolReturnPart)]
    assert reply.text == "The server has no documents on that."
    assert told.tool_name == "search_knowledge" and told.retry is not None and told.retry.cause == "unknown_tool"
    assert str(told.content).startswith("Unknown tool name: 'search_knowledge'")
    assert searched == []
