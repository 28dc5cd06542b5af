"""One answer tail: a whole, a streamed and a regenerated answer leave the same archive rows and model history.

End to end, through the fake Discord: how an answer reaches its posts (one post, edits as it streams, edits of the
previous answer's post) is what differs between the three paths, and only Discord shows it.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart

from bot import Parley
from edge.streaming import REGENERATING
from tests.fakes.fake_discord import ALICE_ID, BOT_ID, CHANNEL_ID, FakeDiscord
from tests.fakes.fake_llm import FakeLLM
from tests.support.e2e_support import RunningBot, assert_ephemeral_one_liner, eventually, say, use_message_command
from upkeep.conversation_snapshots import restore

QUESTION = f"<@{BOT_ID}> which port does staging listen on?"
# As Discord's clean content shows it, which is what is kept.
SHOWN = "@Parley which port does staging listen on?"
ANSWER = "Staging listens on port 8443."
FIRST_DRAFT = "Port 80, I think."


def history_shape(history: list[ModelMessage]) -> list[tuple[str, str]]:
    """The model history as its turns: whose, and the answer's text or whether the question is in the prompt."""
    shape: list[tuple[str, str]] = []
    for message in history:
        if isinstance(message, ModelResponse):
            shape.append(("response", "".join(part.content for part in message.parts if isinstance(part, TextPart))))
        elif isinstance(message, ModelRequest):
            prompt = "".join(str(part.content) for part in message.parts if isinstance(part, UserPromptPart))
            shape.append(("request", "asks the question" if "which port does staging" in prompt else prompt))
    return shape


async def state_after_answer(client: Parley, fake: FakeDiscord) -> dict[str, Any]:
    """What the answer left: the archive's rows of the channel, the conversation it keeps, the live history."""
    archive = client.archive
    assert archive is not None
    await eventually(lambda: [message["content"] for message in fake.bot_messages(CHANNEL_ID)] == [ANSWER])
    conversation = client.manager.get(CHANNEL_ID)
    assert conversation is not None
    # The posts show the answer before the tail has run (a stream's last edit is its end): wait for its turn.
    await eventually(lambda: history_shape(conversation.llm_history)[-1:] == [("response", ANSWER)])
    # An edited post reaches the conversation and the archive in one step, when Discord's edit event arrives.
    await eventually(lambda: [m.content for m in conversation.messages if m.author_id == BOT_ID] == [ANSWER])
    await archive.flush()
    rows = await archive.recent(CHANNEL_ID, limit=10)
    kept = (await archive.stored_conversations())[CHANNEL_ID]
    stored = restore(kept.state)
    [post] = fake.bot_messages(CHANNEL_ID)
    return {
        "archive rows": [(row.author_id, row.content) for row in sorted(rows, key=lambda row: row.message_id)],
        "kept history": history_shape(stored.llm_history),
        "kept messages": [(record.author_id, record.content) for record in stored.messages],
        "kept latest answer": stored.latest_answer is not None and stored.latest_answer.post_ids == (int(post["id"]),),
        "live history": history_shape(conversation.llm_history),
    }


EXPECTED = {
    "archive rows": [(ALICE_ID, SHOWN), (BOT_ID, ANSWER)],
    "kept history": [("request", "asks the question"), ("response", ANSWER)],
    "kept messages": [(ALICE_ID, SHOWN), (BOT_ID, ANSWER)],
    "kept latest answer": True,
    "live history": [("request", "asks the question"), ("response", ANSWER)],
}


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
async def test_whole_and_streamed_answers_end_alike(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM, streamed: bool
) -> None:
    llm.handler = lambda request: ANSWER
    client = await bot.start(stream_answers=streamed)
    await say(fake, ALICE_ID, QUESTION)
    assert await state_after_answer(client, fake) == EXPECTED


async def test_a_regenerated_answer_ends_as_if_it_had_been_the_first(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    answers = iter([FIRST_DRAFT, ANSWER])
    llm.handler = lambda request: next(answers)
    client = await bot.start(stream_answers=True)
    await say(fake, ALICE_ID, QUESTION)
    await fake.wait_for(lambda: [m["content"] for m in fake.bot_messages(CHANNEL_ID)] == [FIRST_DRAFT], what="draft")
    await eventually(lambda: client.streams.latest(CHANNEL_ID) is not None)
    [draft] = fake.bot_messages(CHANNEL_ID)
    calls = await use_message_command(fake, "Regenerate", draft, user_id=ALICE_ID)
    assert assert_ephemeral_one_liner(calls) == REGENERATING
    assert await state_after_answer(client, fake) == EXPECTED
