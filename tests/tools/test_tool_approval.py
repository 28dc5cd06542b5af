"""Tests for tool approval (tools/approval.py): which calls wait, and what the model reads, with FunctionModel."""

from __future__ import annotations

import asyncio
import json
from collections import deque
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic_ai import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import DeferredToolRequests, ToolDenied
from pydantic_ai.toolsets import FunctionToolset

from agent import build_responder, generate_reply
from conversation import ChannelConversation
from discord_io import DISCORD_MESSAGE_LIMIT
from edge.approval import _PROMPT
from records import MessageRecord
from tests.tools.test_tools import deps
from tools import ChatDeps, Toolbox, tool_config_problem, web_search_toolset
from tools.approval import (
    ARGUMENTS_SHOWN_MAX_CHARS,
    REFUSALS,
    ApprovalRequest,
    ServerApproval,
    Verdict,
    holding,
    read_server_approvals,
    settle,
)
from tools.registry import WEB as WEB_TOOLSET

T0 = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
READ_ONLY = {"readOnlyHint": True}
DESTRUCTIVE = {"readOnlyHint": False, "destructiveHint": True}


@pytest.mark.parametrize(
    ("approval", "tool", "annotations", "waits"),
    [
        (ServerApproval("orders"), "lookup", READ_ONLY, False),
        (ServerApproval("orders"), "cancel", DESTRUCTIVE, True),
        # Additive is still a change; no annotations at all says nothing is read-only (MCP's defaults).
        (ServerApproval("orders"), "create", {"readOnlyHint": False, "destructiveHint": False}, True),
        (ServerApproval("orders"), "cancel", None, True),
        (ServerApproval("orders", "always-ask"), "lookup", READ_ONLY, True),
        (ServerApproval("orders", "always-allowed"), "cancel", DESTRUCTIVE, False),
        (ServerApproval("orders", always_allowed=frozenset({"cancel"})), "cancel", DESTRUCTIVE, False),
        (ServerApproval("orders", "always-ask", frozenset({"cancel"})), "cancel", None, False),
        (ServerApproval("orders", always_allowed=frozenset({"cancel"})), "refund", DESTRUCTIVE, True),
    ],
)
def test_which_calls_wait(approval: ServerApproval, tool: str, annotations: Any, waits: bool) -> None:
    assert approval.requires_approval(tool, annotations) is waits


def test_the_servers_file_gives_each_server_its_approval(tmp_path) -> None:
    """`approval` and `alwaysAllow` beside pydantic-ai's keys; a server without them asks for what is not read-only."""
    path = tmp_path / "mcp.json"
    servers = {
        "orders": {"command": "x", "approval": "always-ask", "alwaysAllow": ["lookup"]},
        "docs": {"url": "https://mcp.example.com/mcp", "approval": "always-allowed"},
        "plain": {"command": "y"},
    }
    path.write_text(json.dumps({"mcpServers": servers}))
    assert read_server_approvals(path) == {
        "orders": ServerApproval("orders", "always-ask", frozenset({"lookup"})),
        "docs": ServerApproval("docs", "always-allowed"),
        "plain": ServerApproval("plain"),
    }


@pytest.mark.parametrize(
    ("entry", "named"),
    [({"approval": "sometimes"}, "mcpServers.orders.approval"), ({"alwaysAllow": "lookup"}, "alwaysAllow")],
)
def test_a_bad_approval_setting_is_one_line_naming_it(make_settings, tmp_path, entry: Any, named: str) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"orders": {"command": "x", **entry}}}))
    problem = tool_config_problem(make_settings(mcp_servers=str(path)))
    assert problem is not None and problem.startswith(f"MCP_SERVERS names {path}, which cannot be used: ")
    assert named in problem and "\n" not in problem


# --- An answer whose tool call waits ---------------------------------------------------------------


class FakeApprover:
    """Gives `verdict` to every request, and keeps them."""

    def __init__(self, verdict: Verdict) -> None:
        self.verdict = verdict
        self.asked: list[ApprovalRequest] = []

    async def ask(self, request: ApprovalRequest) -> Verdict:
        self.asked.append(request)
        return self.verdict


class OrdersModel:
    """Calls `tool` once with order A17, then answers; keeps every tool result it was sent."""

    def __init__(self, *tools: str) -> None:
        self.tools = tools
        self.results: list[str] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returned = [part for part in messages[-1].parts if isinstance(part, ToolReturnPart)]
        if returned:
            self.results += [str(part.content) for part in returned]
            return ModelResponse(parts=[TextPart("done")])
        calls = [ToolCallPart(tool, {"order_id": "A17"}, tool_call_id=f"c{i}") for i, tool in enumerate(self.tools)]
        return ModelResponse(parts=calls)


def orders_toolbox(ran: list[str]) -> Toolbox:
    """An "orders" server's tools as the MCP toolset describes them: `lookup` read-only, `cancel` destructive."""
    toolset: FunctionToolset[ChatDeps] = FunctionToolset()

    def lookup(order_id: str) -> str:
        ran.append(f"lookup {order_id}")
        return f"Order {order_id}: shipped."

    def cancel(order_id: str) -> str:
        ran.append(f"cancel {order_id}")
        return f"Order {order_id}: cancelled."

    toolset.add_function(lookup, name="orders_lookup", metadata={"annotations": READ_ONLY})
    toolset.add_function(cancel, name="orders_cancel", metadata={"annotations": DESTRUCTIVE})
    return Toolbox(toolsets={"mcp:orders": ServerApproval("orders").guard(toolset)})


async def answer(make_settings, model: OrdersModel, approver: FakeApprover | None, ran: list[str]) -> str:
    message = MessageRecord(
        message_id=900, channel_id=500, author_id=7, author="Alice", content="cancel A17", timestamp=T0
    )
    conversation = ChannelConversation(500, T0, T0, deque([message]))
    settings = make_settings()
    responder = build_responder(
        settings, model=FunctionModel(model), archive_enabled=False, memory_enabled=False, toolbox=orders_toolbox(ran)
    )
    reply = await generate_reply(responder, conversation, message, deps(approver=approver))
    return reply.text


async def test_an_approved_call_runs_and_its_result_reaches_the_model(make_settings) -> None:
    model, approver = OrdersModel("orders_cancel"), FakeApprover(Verdict.APPROVED)
    ran: list[str] = []
    assert await answer(make_settings, model, approver, ran) == "done"
    assert approver.asked == [ApprovalRequest("c0", "orders_cancel", '{"order_id": "A17"}')]
    assert ran == ["cancel A17"]
    assert model.results == ["Order A17: cancelled."]


@pytest.mark.parametrize("verdict", [Verdict.DENIED, Verdict.TIMED_OUT, Verdict.UNASKED])
async def test_a_call_not_approved_is_not_run_and_the_model_reads_a_refusal(make_settings, verdict: Verdict) -> None:
    model, approver = OrdersModel("orders_cancel"), FakeApprover(verdict)
    ran: list[str] = []
    assert await answer(make_settings, model, approver, ran) == "done"
    assert ran == []
    assert model.results == [REFUSALS[verdict]]


async def test_without_anyone_to_ask_the_call_is_not_run(make_settings) -> None:
    """An answer with no approver (no Discord answer to ask in) runs nothing that needs approval."""
    model, ran = OrdersModel("orders_cancel"), list[str]()
    assert await answer(make_settings, model, None, ran) == "done"
    assert ran == [] and model.results == [REFUSALS[Verdict.UNASKED]]


async def test_a_read_only_call_runs_without_asking_beside_one_that_waits(make_settings) -> None:
    """Both calls of one response: the read-only one runs at once, the other only on the asker's verdict."""
    model, approver = OrdersModel("orders_lookup", "orders_cancel"), FakeApprover(Verdict.DENIED)
    ran: list[str] = []
    assert await answer(make_settings, model, approver, ran) == "done"
    assert [request.tool_name for request in approver.asked] == ["orders_cancel"]
    assert ran == ["lookup A17"]
    assert sorted(model.results) == sorted(["Order A17: shipped.", REFUSALS[Verdict.DENIED]])


# --- Asking ----------------------------------------------------------------------------------------

CANCEL_A17 = DeferredToolRequests(approvals=[ToolCallPart("orders_cancel", {"order_id": "A17"}, tool_call_id="c0")])


async def test_a_stopped_answer_withdraws_its_requests() -> None:
    """`until` returning first (the member pressed Stop): no results, and the waiting asks are cancelled."""
    asking, stop = asyncio.Event(), asyncio.Event()
    withdrawn: list[str] = []

    class Waiting:
        async def ask(self, request: ApprovalRequest) -> Verdict:
            asking.set()
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                withdrawn.append(request.tool_call_id)
                raise
            return Verdict.APPROVED

    settling = asyncio.create_task(settle(CANCEL_A17, Waiting(), until=stop.wait))
    await asking.wait()
    stop.set()
    assert await settling is None
    assert withdrawn == ["c0"]


async def test_an_approver_that_fails_leaves_the_call_unasked(caplog: pytest.LogCaptureFixture) -> None:
    class Broken:
        async def ask(self, request: ApprovalRequest) -> Verdict:
            raise RuntimeError("no channel")

    results = await settle(CANCEL_A17, Broken(), until=asyncio.Event().wait)
    assert results is not None
    assert results.approvals == {"c0": ToolDenied(REFUSALS[Verdict.UNASKED])}
    assert "asking to approve orders_cancel failed" in caplog.text


async def test_a_resumed_run_keeps_the_answers_web_search_cap(make_settings) -> None:
    """The run resumed after the approval is the same answer: a search made before it still counts."""
    offered: list[list[str]] = []
    script = iter(
        [
            ModelResponse(parts=[ToolCallPart("search_web", {"query": "order A17"}, tool_call_id="s0")]),
            ModelResponse(parts=[ToolCallPart("orders_cancel", {"order_id": "A17"}, tool_call_id="c0")]),
        ]
    )

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        offered.append([tool.name for tool in info.function_tools])
        return next(script, ModelResponse(parts=[TextPart("done")]))

    async def search(query: str) -> list[dict[str, Any]]:
        return [{"title": "A17", "url": "https://example.com/a17", "content": "shipped"}]

    ran: list[str] = []
    toolbox = orders_toolbox(ran)
    toolbox.toolsets[WEB_TOOLSET] = web_search_toolset(search, max_calls=1)
    message = MessageRecord(message_id=900, channel_id=500, author_id=7, author="Alice", content="A17?", timestamp=T0)
    responder = build_responder(
        make_settings(), model=FunctionModel(model), archive_enabled=False, memory_enabled=False, toolbox=toolbox
    )
    approved = deps(approver=FakeApprover(Verdict.APPROVED))
    reply = await generate_reply(responder, ChannelConversation(500, T0, T0, deque([message])), message, approved)
    assert reply.text == "done" and ran == ["cancel A17"]
    assert "search_web" in offered[0]
    assert "search_web" not in offered[1] and "search_web" not in offered[2]


# --- What the asker is shown -----------------------------------------------------------------------


async def test_a_long_first_argument_cannot_push_the_recipient_out_of_the_prompt(make_settings) -> None:
    """Hole 8: the asker approves exactly what will run. A call whose arguments do not fit the prompt whole is refused
    unasked; one that fits is shown whole, every argument, as the JSON of what runs."""
    sent: list[dict[str, str]] = []
    toolset: FunctionToolset[ChatDeps] = FunctionToolset()

    def send(body: str, to: str) -> str:
        sent.append({"body": body, "to": to})
        return "sent"

    toolset.add_function(send, name="mail_send", metadata={"annotations": DESTRUCTIVE})
    toolbox = Toolbox(toolsets={"mcp:mail": ServerApproval("mail").guard(toolset)})
    for body in ("see you at 9", "x" * 1500):
        arguments = {"body": body, "to": "mallory@example.com"}

        def model(messages: list[ModelMessage], info: AgentInfo, arguments: Any = arguments) -> ModelResponse:
            if any(isinstance(part, ToolReturnPart) for part in messages[-1].parts):
                return ModelResponse(parts=[TextPart("done")])
            return ModelResponse(parts=[ToolCallPart("mail_send", arguments, tool_call_id="m0")])

        approver = FakeApprover(Verdict.APPROVED)
        message = MessageRecord(
            message_id=900, channel_id=500, author_id=7, author="Alice", content="mail", timestamp=T0
        )
        responder = build_responder(
            make_settings(), model=FunctionModel(model), archive_enabled=False, memory_enabled=False, toolbox=toolbox
        )
        conversation = ChannelConversation(500, T0, T0, deque([message]))
        await generate_reply(responder, conversation, message, deps(approver=approver))
        shown = [_parsed(request.arguments) for request in approver.asked]
        ran = [call for call in sent if call["body"] == body]
        seen = "the recipient" if "mallory@example.com" in str(shown) else "no recipient"
        assert ran == shown, f"{len(ran)} call(s) to mallory@example.com ran; the prompt showed {seen}"
    assert sent == [{"body": "see you at 9", "to": "mallory@example.com"}]


def _parsed(shown: str) -> Any:
    """The arguments a prompt shows, as JSON; as the text itself where it is not JSON (it was cut)."""
    try:
        return json.loads(shown)
    except json.JSONDecodeError:
        return shown


async def test_a_wait_for_approval_lets_go_of_what_the_answer_holds_and_takes_it_again() -> None:
    """The channel's turn and an answer slot, held through `holding`: another answer takes both while the asker
    decides; once they did, the waiting answer holds both again before it goes on, in the order it took them."""
    turn, slot = asyncio.Lock(), asyncio.Semaphore(1)
    asking, decided = asyncio.Event(), asyncio.Event()
    others: list[str] = []

    class Deciding:
        async def ask(self, request: ApprovalRequest) -> Verdict:
            asking.set()
            await decided.wait()
            return Verdict.APPROVED

    async def answer() -> bool:
        async with holding(turn), holding(slot):
            results = await settle(CANCEL_A17, Deciding())
            return results is not None and turn.locked() and slot.locked()

    async def other_answer() -> None:
        async with turn, slot:
            others.append("answered")

    waiting = asyncio.create_task(answer())
    await asking.wait()
    await asyncio.wait_for(other_answer(), 5)
    decided.set()
    assert await waiting and others == ["answered"]
    assert not turn.locked() and not slot.locked()


def test_the_longest_arguments_shown_fit_one_discord_message() -> None:
    """Arguments up to ARGUMENTS_SHOWN_MAX_CHARS are shown whole in one post, beside a 64-character tool name (the
    longest a provider takes) and a mention."""
    prompt = _PROMPT.format(
        mention=f"<@{2**63}> ", tool="t" * 64, arguments="a" * ARGUMENTS_SHOWN_MAX_CHARS, seconds="900"
    )
    assert len(prompt) <= DISCORD_MESSAGE_LIMIT
