"""Tool schemas shaped for a model once, not on every request.

pydantic-ai shapes each tool's JSON schema for the model's provider (OpenAI's strict mode, Gemini's subset, ...) in
`Model.customize_request_parameters`, which runs before every model request: a deep copy and a walk of every
tool's schema, about 0.05 ms a tool on this machine, paid again by every request of every answer, and by each
tool an MCP server adds. A tool's schema is the same object from one run to the next (a function tool's is made
when the agent is built), so its shaped form is kept here and reused while that object is. The walk is a pure
function of the transformer, the schema and `strict`; pydantic/pydantic-ai#6920 asked for it to be memoized, and
2.68 still walks on every request.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import replace
from typing import Any, TypeVar

from pydantic_ai.models import Model, ModelRequestParameters
from pydantic_ai.models import _customize_tool_def as customize_tool_def  # the shaping pydantic-ai does itself
from pydantic_ai.profiles import JsonSchemaTransformer
from pydantic_ai.tools import ToolDefinition

# Schemas kept per model: more than any profile's tools and MCP servers offer at once, so the cache only
# drops what has not been offered for a while (an MCP server listing its tools anew).
KEPT_SCHEMAS = 256

AnyModel = TypeVar("AnyModel", bound=Model)


class ShapedSchemas:
    """Each tool schema as a transformer shapes it, kept while that very schema object is offered."""

    def __init__(self, transformer: type[JsonSchemaTransformer], kept: int = KEPT_SCHEMAS) -> None:
        self.transformer = transformer
        self.kept = kept
        # Keyed by the schema's id and the tool's own `strict`; the schema itself is held, so its id stays its
        # own while kept, and a hit is checked to be that object.
        self._shaped: OrderedDict[tuple[int, bool | None], tuple[dict[str, Any], dict[str, Any], bool | None]] = (
            OrderedDict()
        )

    def __len__(self) -> int:
        return len(self._shaped)

    def shaped(self, tool: ToolDefinition) -> ToolDefinition:
        """`tool` with its schema (and strictness) as pydantic-ai's own shaping gives them."""
        schema = tool.parameters_json_schema
        key = (id(schema), tool.strict)
        found = self._shaped.get(key)
        if found is None or found[0] is not schema:
            done = customize_tool_def(self.transformer, tool)
            found = self._shaped[key] = (schema, done.parameters_json_schema, done.strict)
            if len(self._shaped) > self.kept:
                self._shaped.popitem(last=False)
        else:
            self._shaped.move_to_end(key)
        return replace(tool, parameters_json_schema=found[1], strict=found[2])


def shape_tool_schemas_once(model: AnyModel) -> AnyModel:
    """`model`, its requests' tool schemas shaped once per schema (see the module's docstring); as it was when its
    profile shapes none."""
    transformer = model.profile.get("json_schema_transformer")
    if transformer is None:
        return model
    schemas = ShapedSchemas(transformer)
    customize = model.customize_request_parameters

    def customize_request_parameters(parameters: ModelRequestParameters) -> ModelRequestParameters:
        # pydantic-ai's own method still shapes the rest (an output object), given no tools to walk.
        rest = customize(replace(parameters, function_tools=[], output_tools=[]))
        return replace(
            rest,
            function_tools=[schemas.shaped(tool) for tool in parameters.function_tools],
            output_tools=[schemas.shaped(tool) for tool in parameters.output_tools],
        )

    # On the instance: every provider's model class shapes through this one method, so one override fits them all.
    model.customize_request_parameters = customize_request_parameters  # type: ignore[method-assign, assignment]
    return model
