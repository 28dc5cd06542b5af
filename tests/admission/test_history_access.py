"""What a member without Read Message History is shown of a channel: the private view of its conversation, as the
model receives it (a FunctionModel) for an answer and for Regenerate."""

from __future__ import annotations

from pydantic_ai import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from admission.history_access import private_view, regenerated_view, visible_to
from agent import build_responder, generate_reply
from tests.support.agent_test_support import BOB, BOT, CAROL, conversation_of, deps, msg, user_texts


def secretive_channel():
    """Carol's secret, Bob's greeting, Parley's replies to Carol and to Bob, then Bob's question."""
    secret = msg(CAROL, "Carol", "the vault combination is 1-2-3-4", 0)
    hello = msg(BOB, "Bob", "hello all", 1)
    to_carol = msg(BOT, "Parley", "noted, 1-2-3-4", 2, reply_to_author_id=CAROL)
    to_bob = msg(BOT, "Parley", "hi Bob", 3, reply_to_author_id=BOB)
    question = msg(BOB, "Bob", "what did carol say?", 4)
    return [secret, hello, to_carol, to_bob, question]


def turn(question: str, answer: str) -> list[ModelMessage]:
    return [ModelRequest(parts=[UserPromptPart(question)]), ModelResponse(parts=[TextPart(answer)])]


def test_visible_to_keeps_the_askers_messages_and_parleys_replies_to_them() -> None:
    secret, hello, to_carol, to_bob, question = secretive_channel()
    assert visible_to([secret, hello, to_carol, to_bob, question], BOB, BOT) == [hello, to_bob, question]


async def test_a_private_answer_shows_the_model_nothing_of_the_others(make_settings) -> None:
    """Answering Bob from the private view, the model receives his messages and Parley's reply to him, and none of
    Carol's message, Parley's reply to her, the model history or the earlier conversations' summaries."""
    settings = make_settings(database_url="")
    messages = secretive_channel()
    shared = conversation_of(*messages, llm_history=[ModelResponse(parts=[TextPart("the history says 1-2-3-4")])])
    shared.earlier_conversations = "Carol's summary: 1-2-3-4"
    seen: list[list[ModelMessage]] = []

    def answer(received: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(received)
        return ModelResponse(parts=[TextPart("I can't tell you")])

    agent = build_responder(settings, model=FunctionModel(answer))
    view = private_view(shared, BOB, BOT)
    reply = await generate_reply(agent, view, messages[-1], deps(can_read_history=False))
    [prompt] = user_texts(seen[0])
    assert "1-2-3-4" not in str(seen[0])
    assert "hello all" in prompt and "hi Bob" in prompt and "what did carol say?" in prompt
    assert user_texts(reply.messages) == [prompt]  # the new turn alone, to go after the shared history
    assert shared.llm_history and shared.earlier_conversations and len(shared.messages) == 5  # unchanged


def test_regenerate_for_a_private_answer_shows_only_its_own_turn() -> None:
    """Regenerating Bob's private answer shows the model his last turn alone and keeps the history before it;
    for a member who may read the history, the whole conversation is shown and nothing is kept apart."""
    messages = secretive_channel()
    shared_turn = turn("what is the combination?", "the shared answer: 1-2-3-4")
    bobs_turn = turn("what did carol say?", "Bob's private answer")
    conversation = conversation_of(*messages, llm_history=[*shared_turn, *bobs_turn])
    shown, earlier = regenerated_view(conversation, BOB, BOT, reads_history=False)
    assert earlier == shared_turn
    assert shown.llm_history == bobs_turn
    assert "1-2-3-4" not in str(list(shown.messages))

    shown, earlier = regenerated_view(conversation, BOB, BOT, reads_history=True)
    assert shown is conversation and earlier == []
