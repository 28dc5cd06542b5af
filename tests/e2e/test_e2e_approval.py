"""End-to-end: an MCP tool that changes things waits for its asker's Approve, on the fake Discord's buttons."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import TextPart

from agent import STOPPED_NOTE as STOPPED_NOTE_OF_ANSWERS
from edge.approval import CLOSING_NOTES, NO_LONGER_WAITING, NOT_YOURS, STOPPED_NOTE
from tests.fakes.fake_discord import ALICE_ID, BOB_ID, BOT_ID, CHANNEL_ID, OTHER_CHANNEL_ID, FakeDiscord
from tests.fakes.fake_llm import FakeLLM, Reply, ToolCall, last_user_text, message_text
from tests.support.e2e_support import RunningBot, assert_ephemeral_one_liner, click, eventually, is_callback
from tools.approval import REFUSALS, Verdict

# Every test starts MCP fixture servers, each a Python process of its own (see tests/conftest.py).
pytestmark = pytest.mark.slow

FIXTURE = Path(__file__).resolve().parents[1] / "fakes" / "mcp_server_fixture.py"
ANSWER = "Here is what the order system said."
CALLBACK_UPDATE_MESSAGE = 7


class ToolModel:
    """Calls `tool` for order A17 when the member asks, then answers; keeps each tool result it is sent."""

    def __init__(self, tool: str) -> None:
        self.tool = tool
        self.results: list[str] = []

    def __call__(self, request: dict[str, Any]) -> Reply:
        last = request["messages"][-1]
        if last["role"] == "tool":
            self.results.append(message_text(last))
            return ANSWER
        return ToolCall(self.tool, {"order_id": "A17"})


def servers_file(tmp_path: Path, **approvals: dict[str, Any]) -> str:
    """An `mcpServers` file running the fixture server once per name, each with the given approval keys."""
    cancelled = {"CANCELLED_ORDERS": str(cancelled_file(tmp_path))}
    entries = {
        name: {"command": sys.executable, "args": [str(FIXTURE)], "env": cancelled, **keys}
        for name, keys in approvals.items()
    }
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": entries}))
    return str(path)


def cancelled_file(tmp_path: Path) -> Path:
    return tmp_path / "cancelled.txt"


def cancelled(tmp_path: Path) -> list[str]:
    """The orders the fixture server's cancel_order has cancelled."""
    path = cancelled_file(tmp_path)
    return path.read_text().split() if path.exists() else []


async def start(bot: RunningBot, **overrides: Any) -> None:
    client = await bot.start(**overrides)
    await asyncio.wait_for(client.toolbox.started(), 60)


def prompts(fake: FakeDiscord) -> list[dict[str, Any]]:
    return [m for m in fake.bot_messages(CHANNEL_ID) if m["content"].startswith("May I run")]


async def the_prompt(fake: FakeDiscord) -> dict[str, Any]:
    """The approval prompt, once posted, as it stands now."""
    await fake.wait_for(lambda: bool(prompts(fake)), timeout=30, what="the approval prompt")
    [prompt] = prompts(fake)
    return prompt


def buttons(message: dict[str, Any]) -> dict[str, str]:
    """The message's buttons: custom id by label."""
    found = [button for row in message.get("components") or [] for button in row.get("components", [])]
    return {button["label"]: button["custom_id"] for button in found}


async def answered(fake: FakeDiscord, count: int = 1) -> None:
    """Wait until `count` answers are posted whole."""

    def answers() -> int:
        return sum(m["content"] == ANSWER for m in fake.bot_messages(CHANNEL_ID))

    await fake.wait_for(lambda: answers() >= count, timeout=30, what=f"{count} answer(s)")


async def test_a_destructive_tool_waits_for_the_askers_approve(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM, tmp_path: Path
) -> None:
    """Nothing runs until Alice approves; Bob's Approve is refused privately and changes nothing."""
    model = ToolModel("orders_cancel_order")
    llm.handler = model
    await start(bot, mcp_servers=servers_file(tmp_path, orders={}))
    await fake.send_user_message(CHANNEL_ID, ALICE_ID, f"<@{BOT_ID}> please cancel my order A17")
    prompt = await the_prompt(fake)
    assert "`orders_cancel_order`" in prompt["content"] and '{"order_id": "A17"}' in prompt["content"]
    assert prompt["message_reference"]["message_id"] is not None
    approve = buttons(prompt)["Approve"]
    assert set(buttons(prompt)) == {"Approve", "Deny"}

    refused = await click(fake, prompt, approve, user_id=BOB_ID)
    assert assert_ephemeral_one_liner(refused) == NOT_YOURS
    [prompt] = prompts(fake)
    assert buttons(prompt) and cancelled(tmp_path) == [] and model.results == []

    [call] = await click(fake, prompt, approve, user_id=ALICE_ID)
    assert is_callback(call) and call.body is not None and call.body["type"] == CALLBACK_UPDATE_MESSAGE
    await answered(fake)
    assert cancelled(tmp_path) == ["A17"]
    [result] = model.results
    assert "Order A17: cancelled." in result
    [prompt] = prompts(fake)
    assert prompt["content"].endswith(CLOSING_NOTES[Verdict.APPROVED]) and not buttons(prompt)
    # Decided, the prompt says which tool and how it ended, no longer what it ran with (its words may be a member's).
    assert "`orders_cancel_order`" in prompt["content"] and "A17" not in prompt["content"]


async def test_deny_reaches_the_model_as_a_refusal(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM, tmp_path: Path
) -> None:
    model = ToolModel("orders_cancel_order")
    llm.handler = model
    await start(bot, mcp_servers=servers_file(tmp_path, orders={}))
    await fake.send_user_message(CHANNEL_ID, ALICE_ID, f"<@{BOT_ID}> please cancel my order A17")
    prompt = await the_prompt(fake)
    await click(fake, prompt, buttons(prompt)["Deny"], user_id=ALICE_ID)
    await answered(fake)
    assert model.results == [REFUSALS[Verdict.DENIED]]
    assert cancelled(tmp_path) == []
    [prompt] = prompts(fake)
    assert prompt["content"].endswith(CLOSING_NOTES[Verdict.DENIED]) and not buttons(prompt)


async def test_no_answer_in_time_reaches_the_model_as_a_refusal(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM, tmp_path: Path
) -> None:
    """APPROVAL_TIMEOUT_SECONDS passes without a press: not run, and the prompt says so, its buttons gone."""
    model = ToolModel("orders_cancel_order")
    llm.handler = model
    await start(bot, mcp_servers=servers_file(tmp_path, orders={}), approval_timeout_seconds=0.5)
    await fake.send_user_message(CHANNEL_ID, ALICE_ID, f"<@{BOT_ID}> please cancel my order A17")
    await the_prompt(fake)
    await answered(fake)
    assert model.results == [REFUSALS[Verdict.TIMED_OUT]]
    [prompt] = prompts(fake)
    assert prompt["content"].endswith(CLOSING_NOTES[Verdict.TIMED_OUT]) and not buttons(prompt)
    assert cancelled(tmp_path) == []


async def test_a_press_after_a_restart_is_told_the_request_is_over(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM, tmp_path: Path
) -> None:
    """The buttons outlive the process (their custom id says what they are for); the request does not."""
    llm.handler = ToolModel("orders_cancel_order")
    path = servers_file(tmp_path, orders={})
    await start(bot, mcp_servers=path)
    await fake.send_user_message(CHANNEL_ID, ALICE_ID, f"<@{BOT_ID}> please cancel my order A17")
    prompt = await the_prompt(fake)
    await bot.stop()
    await start(bot, mcp_servers=path)
    late = await click(fake, prompt, buttons(prompt)["Approve"], user_id=ALICE_ID)
    assert assert_ephemeral_one_liner(late) == NO_LONGER_WAITING
    assert cancelled(tmp_path) == []


async def test_read_only_tools_and_always_allowed_servers_run_without_asking(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM, tmp_path: Path
) -> None:
    """orders' lookup is annotated read-only; the trusted server is "always-allowed", so even its cancel runs."""
    model = ToolModel("orders_lookup_order")
    llm.handler = model
    path = servers_file(tmp_path, orders={}, trusted={"approval": "always-allowed"})
    await start(bot, mcp_servers=path)
    await fake.send_user_message(CHANNEL_ID, ALICE_ID, f"<@{BOT_ID}> where is my order A17?")
    await answered(fake)
    model.tool = "trusted_cancel_order"
    await fake.send_user_message(CHANNEL_ID, ALICE_ID, f"<@{BOT_ID}> then cancel it")
    await answered(fake, 2)
    assert "Order A17: shipped" in model.results[0] and "Order A17: cancelled." in model.results[1]
    assert cancelled(tmp_path) == ["A17"]
    assert prompts(fake) == []


async def test_stopping_the_answer_ends_the_wait(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM, tmp_path: Path
) -> None:
    """Stop on the streamed answer's status withdraws the prompt: not run, and the answer ends stopped."""
    model = ToolModel("orders_cancel_order")
    llm.handler = model
    await start(bot, mcp_servers=servers_file(tmp_path, orders={}))
    await fake.send_user_message(CHANNEL_ID, ALICE_ID, f"<@{BOT_ID}> please cancel my order A17")
    await the_prompt(fake)

    def status() -> dict[str, Any] | None:
        return next((m for m in fake.bot_messages(CHANNEL_ID) if "Stop" in buttons(m)), None)

    await fake.wait_for(lambda: status() is not None, timeout=30, what="the answer's Stop button")
    stopping = status()
    assert stopping is not None
    client = bot.client
    assert client is not None
    await eventually(lambda: client.streams.live_on(int(stopping["id"])) is not None)
    await click(fake, stopping, buttons(stopping)["Stop"], user_id=ALICE_ID)
    await fake.wait_for(
        lambda: prompts(fake)[0]["content"].endswith(STOPPED_NOTE), timeout=30, what="the closed prompt"
    )
    await fake.wait_for(lambda: status() is None, timeout=30, what="the stopped answer")
    assert not buttons(prompts(fake)[0])
    [answer] = [m for m in fake.bot_messages(CHANNEL_ID) if m["id"] == stopping["id"]]
    assert answer["content"] == STOPPED_NOTE_OF_ANSWERS
    assert model.results == [] and cancelled(tmp_path) == []


class OrdersAndChat(ToolModel):
    """Calls `tool` when the new message asks to cancel; answers anything else at once with PLAIN."""

    def __call__(self, request: dict[str, Any]) -> Reply:
        prompt = last_user_text(request)
        if request["messages"][-1]["role"] != "tool" and "cancel" not in prompt[prompt.rindex("<new_message") :]:
            return PLAIN
        return super().__call__(request)


PLAIN = "Plain answer."


async def test_a_waiting_prompt_holds_neither_an_answer_slot_nor_the_channels_turn(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM, tmp_path: Path
) -> None:
    """Hole 9: while Alice's prompt waits, Bob is answered, in her channel and in another, with one answer slot in
    all; after her Approve her answer comes once, and the conversation keeps Bob's turn before hers."""
    model = OrdersAndChat("orders_cancel_order")
    llm.handler = model
    await start(bot, mcp_servers=servers_file(tmp_path, orders={}), max_concurrent_answers=1, stream_answers=False)
    await fake.send_user_message(CHANNEL_ID, ALICE_ID, f"<@{BOT_ID}> please cancel my order A17")
    prompt = await the_prompt(fake)
    await fake.send_user_message(OTHER_CHANNEL_ID, BOB_ID, f"<@{BOT_ID}> what time is it?")
    await fake.wait_for(
        lambda: any(m["content"] == PLAIN for m in fake.bot_messages(OTHER_CHANNEL_ID)),
        timeout=10,
        what="Bob's answer in another channel while Alice's prompt waits",
    )
    await fake.send_user_message(CHANNEL_ID, BOB_ID, f"<@{BOT_ID}> and what day is it?")
    await fake.wait_for(
        lambda: any(m["content"] == PLAIN for m in fake.bot_messages(CHANNEL_ID)),
        timeout=10,
        what="Bob's answer in Alice's channel while her prompt waits",
    )
    assert buttons(prompts(fake)[0]) and cancelled(tmp_path) == []

    await click(fake, prompt, buttons(prompt)["Approve"], user_id=ALICE_ID)
    await answered(fake)
    assert cancelled(tmp_path) == ["A17"]
    said = [m["content"] for m in fake.bot_messages(CHANNEL_ID) if m["content"] in (PLAIN, ANSWER)]
    assert said == [PLAIN, ANSWER]
    client = bot.client
    assert client is not None

    def kept() -> list[str]:
        conversation = client.manager.get(CHANNEL_ID)
        history = [] if conversation is None else conversation.llm_history
        texts = [part.content for message in history for part in message.parts if isinstance(part, TextPart)]
        return [text for text in texts if text in (PLAIN, ANSWER)]

    await eventually(lambda: kept() == [PLAIN, ANSWER])
