"""providers/tool_schemas.py: a tool's schema shaped for the model once, the requests unchanged on the wire."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from openai import AsyncOpenAI
from pydantic_ai import Tool
from pydantic_ai.models import Model, ModelRequestParameters
from pydantic_ai.models import _customize_tool_def as customize_tool_def
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.models.test import TestModel
from pydantic_ai.output import OutputObjectDefinition
from pydantic_ai.profiles import JsonSchemaTransformer
from pydantic_ai.profiles.openai import OpenAIJsonSchemaTransformer
from pydantic_ai.providers.openai_compatible import OpenAICompatibleProvider
from pydantic_ai.tools import ToolDefinition

from providers import tool_schemas
from providers.models import OPENAI_COMPATIBLE_SERVER, build_model
from providers.tool_schemas import ShapedSchemas, shape_tool_schemas_once
from tests.support.agent_test_support import request_bodies


def find_messages(query: str, limit: int = 10, author: str | None = None) -> str:
    """Search the channel's messages."""
    return query


def set_reminder(what: str, when: str) -> str:
    """Remind the member of something."""
    return what


TOOLS = [Tool(find_messages).tool_def, Tool(set_reminder).tool_def]


class CountedWalks(OpenAIJsonSchemaTransformer):
    """OpenAI's transformer, counting the schemas it walks."""

    walks = 0

    def walk(self) -> Any:
        CountedWalks.walks += 1
        return super().walk()


def openai_model(client: AsyncOpenAI | None = None) -> OpenAIChatModel:
    client = client or AsyncOpenAI(base_url="http://llm.test/v1", api_key="k")
    return OpenAIChatModel(
        "local-model", provider=OpenAICompatibleProvider(OPENAI_COMPATIBLE_SERVER, openai_client=client)
    )


def test_the_parameters_are_pydantic_ais_own():
    """Tools (each tool's own `strict` kept, or inferred as pydantic-ai infers it) and an output object come out as
    the model's own method shapes them, the second time as the first."""
    strict_tool = replace(TOOLS[1], name="strict_reminder", strict=True)
    output_object = OutputObjectDefinition(json_schema=TOOLS[1].parameters_json_schema, name="reminder")
    parameters = ModelRequestParameters(
        function_tools=[*TOOLS, strict_tool],
        output_tools=[replace(TOOLS[0], name="final")],
        output_object=output_object,
    )
    expected = openai_model().customize_request_parameters(parameters)
    model = shape_tool_schemas_once(openai_model())
    for _ in range(2):
        assert model.customize_request_parameters(parameters) == expected
    assert [tool.strict for tool in expected.function_tools] == [False, True, True]


def test_each_schema_is_walked_once_while_it_is_offered():
    CountedWalks.walks = 0
    schemas = ShapedSchemas(CountedWalks)
    first = [schemas.shaped(tool) for tool in TOOLS]
    again = [schemas.shaped(tool) for tool in TOOLS]
    assert CountedWalks.walks == 2 and again == first
    # The same tool, strict by its own say: shaped on its own, not given the inferred strictness.
    strict = schemas.shaped(replace(TOOLS[0], strict=True))
    assert CountedWalks.walks == 3 and strict.strict is True


def test_an_equal_schema_in_a_new_object_is_shaped_anew_and_a_changed_one_is_not_confused():
    CountedWalks.walks = 0
    schemas = ShapedSchemas(CountedWalks)
    tool = TOOLS[0]
    schemas.shaped(tool)
    copy = replace(tool, parameters_json_schema=dict(tool.parameters_json_schema))
    assert schemas.shaped(copy) == schemas.shaped(tool)
    assert CountedWalks.walks == 2
    narrower = {**tool.parameters_json_schema, "required": ["query", "limit"]}
    shaped = schemas.shaped(replace(tool, parameters_json_schema=narrower))
    assert shaped.parameters_json_schema["required"] == ["query", "limit"]
    assert schemas.shaped(tool).parameters_json_schema["required"] == ["query"]


def test_the_kept_schemas_are_bounded_oldest_offered_dropped_first():
    CountedWalks.walks = 0
    schemas = ShapedSchemas(CountedWalks, kept=2)
    third = Tool(lambda note: note, name="note", description="Keep a note.").tool_def
    schemas.shaped(TOOLS[0])
    schemas.shaped(TOOLS[1])
    schemas.shaped(TOOLS[0])  # offered again: TOOLS[1] is now the oldest
    schemas.shaped(third)
    assert len(schemas) == 2 and CountedWalks.walks == 3
    schemas.shaped(TOOLS[0])
    assert CountedWalks.walks == 3
    schemas.shaped(TOOLS[1])
    assert CountedWalks.walks == 4


def test_a_model_that_shapes_no_schemas_is_left_as_it_was():
    model = TestModel()
    assert shape_tool_schemas_once(model) is model
    assert "customize_request_parameters" not in vars(model)


def test_every_model_parley_builds_shapes_its_schemas_once(make_settings):
    for model in (
        build_model(make_settings(llm_base_url="http://h/v1")),
        build_model(make_settings(llm_model="openai:gpt-4.1-mini", llm_api_key="k")),
        build_model(make_settings(llm_model="anthropic:claude-sonnet-4-5", llm_api_key="k")),
    ):
        assert isinstance(model, Model) and "customize_request_parameters" in vars(model)


async def test_an_answer_sends_the_same_bytes_with_the_schemas_shaped_once(make_settings, monkeypatch):
    """An answer's two requests (a tool call, then the answer; the tools in both, the second shaped from what the
    first kept) send what pydantic-ai's own shaping sends, byte for byte."""
    stock = await request_bodies(AsyncOpenAI, make_settings, question_id=4242)
    shapings: list[str] = []

    def counted(transformer: type[JsonSchemaTransformer], tool: ToolDefinition) -> ToolDefinition:
        shapings.append(tool.name)
        return customize_tool_def(transformer, tool)

    monkeypatch.setattr(tool_schemas, "customize_tool_def", counted)
    shaped = await request_bodies(AsyncOpenAI, make_settings, question_id=4242, made=shape_tool_schemas_once)
    tools = json.loads(stock[1])["tools"]
    assert len(stock) == 2 and len(tools) > 1 and any("strict" in tool["function"] for tool in tools)
    assert shaped == stock
    # The same schema objects in both requests: each tool's was shaped for the first only.
    assert sorted(shapings) == sorted(tool["function"]["name"] for tool in tools)
