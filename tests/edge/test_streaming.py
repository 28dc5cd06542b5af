"""The responder's streaming side (agent.generate_reply with a listener, regenerate_reply) and the channel pacer."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest
from pydantic_ai import CancellationToken, ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel

from agent import STOPPED_NOTE, ReplyFailed, build_responder, generate_reply, regenerate_reply
from conversation import ConversationManager
from edge.streaming import ChannelPacer, tool_status
from tests.support.agent_test_support import ALICE, conversation_of, deps, msg, user_texts


@dataclass
class Listener:
    """An `agent.AnswerListener` that notes what it is told, and can stop the answer after some text."""

    stop_after: str | None = None
    cancellation: CancellationToken = field(default_factory=CancellationToken)
    outgrown: bool = False
    texts: list[str] = field(default_factory=list)
    tools: list[str] = field(default_factory=list)

    def text_so_far(self, text: str) -> None:
        self.texts.append(text)
        if self.stop_after is not None and self.stop_after in text:
            self.cancellation.cancel()

    def tool_called(self, tool_name: str) -> None:
        self.tools.append(tool_name)

    async def stopped(self) -> None:
        await asyncio.Event().wait()  # stopped by its cancellation only, never while a tool call waits


def streamed(*words: str) -> FunctionModel:
    """A model that streams `words`, one a chunk."""

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        for word in words:
            yield word
            await asyncio.sleep(0)

    return FunctionModel(stream_function=stream)


async def test_listener_is_told_the_text_as_it_grows(make_settings) -> None:
    """The listener hears each response's text so far; the reply is the whole answer, as without streaming."""
    question = msg(ALICE, "Alice", "hello?")
    agent = build_responder(make_settings(database_url=""), model=streamed("Hello ", "there. ", "How are you?"))
    listener = Listener()
    reply = await generate_reply(agent, conversation_of(question), question, deps(), listener=listener)
    assert listener.texts == ["Hello ", "Hello there. ", "Hello there. How are you?"]
    assert reply.text == "Hello there. How are you?" and not reply.stopped


async def test_tool_calls_are_announced(make_settings) -> None:
    """A tool call mid-answer reaches the listener by name, and the text after it starts afresh."""
    calls = 0

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | dict[int, DeltaToolCall]]:
        nonlocal calls
        calls += 1
        if calls == 1:
            yield {0: DeltaToolCall(name="get_channel_stats", json_args="{}")}
        else:
            yield "Nobody spoke."

    agent = build_responder(make_settings(), model=FunctionModel(stream_function=stream), archive_enabled=True)
    question = msg(ALICE, "Alice", "who talks most?")
    listener = Listener()
    reply = await generate_reply(agent, conversation_of(question), question, deps(), listener=listener)
    assert listener.tools == ["get_channel_stats"] and listener.texts[-1] == "Nobody spoke."
    assert reply.text == "Nobody spoke."
    assert tool_status("get_channel_stats") == "*counting the channel's messages…*"


async def test_stopping_keeps_the_partial_answer_marked(make_settings) -> None:
    """A stopped answer is what was written, marked "(stopped)", and the history keeps it so."""
    question = msg(ALICE, "Alice", "tell me a story")
    words = ["Once ", "upon ", "a ", "time ", *["more "] * 50]
    agent = build_responder(make_settings(database_url=""), model=streamed(*words))
    listener = Listener(stop_after="time")
    reply = await generate_reply(agent, conversation_of(question), question, deps(), listener=listener)
    assert reply.stopped and reply.text.startswith("Once upon a time") and reply.text.endswith(STOPPED_NOTE)
    last = reply.messages[-1]
    assert isinstance(last, ModelResponse) and last.parts == [TextPart(reply.text)]


async def test_a_run_cancelled_by_no_one_is_a_failure(make_settings) -> None:
    """Without a listener that asked for it, a cancelled run is a failed answer, not a stopped one."""

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        yield "Hel"
        raise TimeoutError

    question = msg(ALICE, "Alice", "hello?")
    agent = build_responder(make_settings(database_url=""), model=FunctionModel(stream_function=stream))
    with pytest.raises(ReplyFailed):
        await generate_reply(agent, conversation_of(question), question, deps(), listener=Listener())


async def test_regenerate_asks_the_last_prompt_again_in_place_of_the_last_turn(make_settings) -> None:
    """Regenerating sends the last turn's prompt with the history before it; the new history ends with the new
    answer and holds the old one nowhere."""
    settings = make_settings(database_url="")
    first, second = msg(ALICE, "Alice", "first question", 0), msg(ALICE, "Alice", "second question", 1)
    agent = build_responder(settings, model=FunctionModel(lambda m, i: ModelResponse(parts=[TextPart("one")])))
    conversation = conversation_of(first)
    reply = await generate_reply(agent, conversation, first, deps())
    conversation.llm_history = reply.messages
    conversation.messages.append(second)
    reply = await generate_reply(agent, conversation, second, deps())
    conversation.llm_history = reply.messages

    seen: list[list[ModelMessage]] = []

    def again(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(messages)
        return ModelResponse(parts=[TextPart("two")])

    agent = build_responder(settings, model=FunctionModel(again))
    regenerated = await regenerate_reply(agent, conversation, deps())
    assert user_texts(seen[0]) == user_texts(conversation.llm_history)
    assert regenerated.text == "two"
    answers = [p.content for m in regenerated.messages for p in m.parts if isinstance(p, TextPart)]
    assert answers == ["one", "two"]
    assert not any(isinstance(p, ToolCallPart) for m in regenerated.messages for p in m.parts)


async def test_regenerate_without_an_answer_fails(make_settings) -> None:
    """A conversation with no answered prompt has nothing to regenerate."""
    settings = make_settings(database_url="")
    agent = build_responder(settings, model=streamed("x"))
    with pytest.raises(ReplyFailed):
        await regenerate_reply(agent, conversation_of(), deps())


def test_replacing_the_last_turn_adds_no_turn() -> None:
    """The manager stores a regenerated history as the conversation's, without counting a new bot turn."""
    manager = ConversationManager(120)
    conversation = manager.start(7)
    manager.record_bot_response(7, [ModelResponse(parts=[TextPart("old")])], 1)
    regenerated: list[ModelMessage] = [ModelResponse(parts=[TextPart("new")])]
    manager.replace_last_bot_turn(7, regenerated)
    assert conversation.bot_turns == 1
    assert conversation.llm_history == regenerated


async def test_pacer_spaces_a_channels_writes_but_not_other_channels() -> None:
    """Two writes in a channel are an interval apart; a write in another channel does not wait for them."""
    pacer = ChannelPacer(0.2)
    loop = asyncio.get_running_loop()
    await pacer.wait(1)
    start = loop.time()
    await pacer.wait(2)
    other = loop.time()
    await pacer.wait(1)
    assert loop.time() - start >= 0.19
    assert other - start < 0.19
