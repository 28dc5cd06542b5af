"""Promise: "A tool acts where I asked and as me: the server, the channel and the member it reads or acts for are
where and who I am, never what the model's words say, so text the model read cannot point a tool elsewhere."

The structural check enumerates every tool Parley can offer and fails on one whose arguments could name a server, a
channel or the member it acts for. Each row of the second is a server action that takes a message, given another
channel's message by a model steered to: it is looked up in the channel asked in alone, and nothing is done.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.promises.test_promise_approval import every_toolbox, undeclared_tools
from tests.tools.test_server_actions import ELSEWHERE_MESSAGE, World, call

# Argument names that would let the model choose where a tool acts, or for whom.
PLACE_WORDS = ("guild", "server", "channel", "requester", "asker", "author", "user")


async def test_no_tool_takes_its_place_or_its_asker_from_the_model(make_settings) -> None:
    offered: list[tuple[str, dict[str, Any]]] = []

    def noting(schema_of: dict[str, Any]) -> None:
        offered.extend(schema_of.items())

    _, names = await undeclared_tools(make_settings, every_toolbox(), schemas=noting)
    assert {"search_history", "remind", "pin_message", "time_out_member"} <= set(names)
    placed = {
        name: argument
        for name, schema in offered
        for argument in schema.get("properties", {})
        if any(word in argument for word in PLACE_WORDS)
    }
    assert placed == {}


@pytest.mark.parametrize("tool", ["pin_message", "unpin_message", "delete_message", "create_thread"])
async def test_another_channels_message_is_never_acted_on(make_settings, tool: str) -> None:
    world = World()
    arguments: dict[str, Any] = {"message_id": str(ELSEWHERE_MESSAGE)}
    if tool == "create_thread":
        arguments["name"] = "elsewhere"
    said = await call(make_settings, world, tool, arguments)
    assert said == f"Not done: there is no message {ELSEWHERE_MESSAGE} in this channel."
    assert world.channel.calls == [] and world.log.actions == []
