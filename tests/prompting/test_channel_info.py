"""Where the bot is (`<channel_info>`) is said once a conversation, not in every prompt (prompting/context.py), and
every request the model is sent tells it, whatever the history's cut or summary left out."""

from __future__ import annotations

from collections import deque
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic_ai import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from agent import build_responder, generate_reply
from config import Settings
from conversation import ChannelConversation
from prompting.context import build_prompt, prompt_texts, summary_turn
from records import MessageRecord
from tools import ChatDeps

BOT, ALICE, CHANNEL, GUILD = 1, 10, 500, 42
T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
INFO = (
    f'<channel_info server="Guild" server_id="{GUILD}" channel="general" channel_id="{CHANNEL}" your_name="Parley"'
    f' your_user_id="{BOT}"></channel_info>'
)
# Long enough that a few turns pass a small budget.
PADDING = " and some more words about it" * 6


def deps(**changes: Any) -> ChatDeps:
    return replace(ChatDeps("Parley", BOT, GUILD, "Guild", CHANNEL, "general", None, ALICE, True), **changes)


def question(number: int) -> MessageRecord:
    return MessageRecord(
        1000 + number, CHANNEL, ALICE, "alice", f"turn {number}{PADDING}", T0 + timedelta(seconds=number)
    )


class Requests:
    """A FunctionModel answering every prompt, keeping the user prompts of each request it is sent."""

    def __init__(self) -> None:
        self.prompts: list[list[str]] = []
        self.model = FunctionModel(self.respond)

    def respond(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.prompts.append(list(prompt_texts(messages)))
        return ModelResponse(parts=[TextPart(f"an answer{PADDING}")])


async def converse(turns: int, budget: int = 4000, chat: ChatDeps | None = None, **later: Any) -> Requests:
    """`turns` answers in one conversation; the answers after the first with `later`'s changes to the deps."""
    requests = Requests()
    values: dict[str, Any] = {"discord_token": "x", "llm_model": "test", "history_token_budget": budget}
    settings = Settings(_env_file=None, **values)
    responder = build_responder(settings, model=requests.model, archive_enabled=False)
    conversation = ChannelConversation(CHANNEL, T0, T0, deque())
    for number in range(1, turns + 1):
        message = question(number)
        conversation.messages.append(message)
        asked = deps() if number == 1 else deps(**later)
        reply = await generate_reply(responder, conversation, message, asked)
        conversation.llm_history = reply.messages
        conversation.prompted_through = message.message_id
    return requests


async def test_a_conversation_is_told_where_it_is_once() -> None:
    requests = await converse(3)

    first, *_, third = requests.prompts
    assert first[0].startswith(INFO)
    assert third[0].startswith(INFO) and "<channel_info" not in "".join(third[1:])


async def test_a_renamed_channel_is_told_again() -> None:
    requests = await converse(2, channel_name="release")

    assert requests.prompts[1][-1].startswith(INFO.replace('channel="general"', 'channel="release"'))


async def test_a_history_cut_to_its_budget_still_tells_where_it_is() -> None:
    """The cut takes the first turn, which told it: the first turn kept tells it instead, once."""
    requests = await converse(12, budget=600)

    assert any("turn 1 and" not in prompts[0] for prompts in requests.prompts)  # the first turn was cut
    for prompts in requests.prompts:
        assert "".join(prompts).count("<channel_info") == 1 and prompts[0].startswith(INFO)


def test_a_history_whose_first_turns_were_summarised_is_told_again() -> None:
    message = question(9)
    conversation = ChannelConversation(CHANNEL, T0, T0, deque([message]))
    conversation.llm_history = [summary_turn("alice asked about turns 1-8", None)]

    assert build_prompt(conversation, message, deps()).startswith(INFO)
