"""End-to-end: the support desk's answers carry Solved and Not helpful (helpdesk/feedback.py), the asker's press is
kept and `/parley-admin support report` counts it, with the unanswered questions listed by topic with links.

The desk itself (which unaddressed questions it answers) is built beside this; here a question is made the desk's by
setting `Question.support` where a question is built, as the desk does, and its decision is noted through the
decision log, as the desk notes it.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import replace
from typing import Any

import pytest

from answering import asked
from bot import Parley
from commands.support_report import NO_ARCHIVE, NOT_PERMITTED, REPORT_TITLE
from edge.asking import Question
from helpdesk.feedback import NOT_KEPT, NOT_YOURS, THANKS
from helpdesk.question import SUPPORT_ANSWERED, SUPPORT_NOT_SURE, SupportAnswer
from records import Decision, MessageRecord
from tests.e2e.test_e2e_privacy import erase
from tests.fakes.fake_discord import ALICE_ID, BOB_ID, BOT_ID, CHANNEL_ID, GUILD_ID, OTHER_CHANNEL_ID, FakeDiscord
from tests.fakes.fake_discord_state import InteractionCall
from tests.fakes.fake_llm import FakeLLM
from tests.support.e2e_support import (
    MEMBER,
    MODERATOR,
    RunningBot,
    assert_ephemeral_one_liner,
    calls_for,
    click,
    command_payload,
    eventually,
    option,
    reply_text,
    say,
    token_of,
    use_top_command,
)

ANSWER = "Run `pip install parley` and start it with `python bot.py`."
# The question the desk takes, by its words; anything else is an ordinary @mention.
DESK_TAKES = "install"


def made_the_desks(question: Question, client: Parley) -> Question:
    """`question` as the desk would hand it on when it takes it: with `support` set, its decision noted."""
    if DESK_TAKES not in question.record.content:
        return question
    support = SupportAnswer(question.id, question.asker_id, question.guild_id, question.channel_id, "install.md",
                            "Installing", 0.9)  # fmt: skip
    client.decision_log.note(question.record, Decision(True, SUPPORT_ANSWERED, "support", 0.9))
    return replace(question, support=support)


@pytest.fixture
def desk(monkeypatch: pytest.MonkeyPatch, bot: RunningBot) -> None:
    """Questions asked by message or by /ask whose text names DESK_TAKES are the desk's."""
    by_message = Question.of_message.__func__  # type: ignore[attr-defined]
    by_command = asked._question

    def of_message(cls: type[Question], message: Any, record: MessageRecord) -> Question:
        assert bot.client is not None
        return made_the_desks(by_message(cls, message, record), bot.client)

    def of_command(interaction: Any, record: MessageRecord) -> Question:
        assert bot.client is not None
        return made_the_desks(by_command(interaction, record), bot.client)

    monkeypatch.setattr(Question, "of_message", classmethod(of_message))
    monkeypatch.setattr(asked, "_question", of_command)


def buttons(message: dict[str, Any]) -> dict[str, str]:
    """A message's buttons: custom id by label."""
    found = [button for row in message.get("components") or [] for button in row.get("components", [])]
    return {button["label"]: button["custom_id"] for button in found}


def said(fake: FakeDiscord, calls: list[InteractionCall]) -> str:
    """All the bot has said so far for the interaction `calls` began with."""
    return reply_text(calls_for(fake, calls))


def forged(post: dict[str, Any], custom_id: str) -> tuple[dict[str, Any], str]:
    """`post` as a forged interaction shows it, with a button of `custom_id`; and that custom id."""
    button = {"type": 2, "style": 1, "label": "Solved", "custom_id": custom_id}
    return {**post, "components": [{"type": 1, "components": [button]}]}, custom_id


async def answered(fake: FakeDiscord, question: str, *, who: int = ALICE_ID) -> dict[str, Any]:
    """`who` asks Parley `question` in #general; its answer's last post once it carries the feedback buttons."""
    await say(fake, who, f"<@{BOT_ID}> {question}")
    await fake.wait_for(lambda: any(buttons(m) for m in fake.bot_messages(CHANNEL_ID)), what="the feedback buttons")
    return next(m for m in fake.bot_messages(CHANNEL_ID) if buttons(m))


async def report(fake: FakeDiscord, *, permissions: Any = MODERATOR, user_id: int = BOB_ID) -> str:
    """`/parley-admin support report` as `user_id`; what it answered, once it has."""
    payload = command_payload(fake, "support", user_id=user_id, permissions=permissions)
    payload["data"]["options"] = [
        {
            "type": 2,
            "name": "support",
            "options": [{"type": 1, "name": "report", "options": [option("period", "week")]}],
        }
    ]
    token = payload["token"]

    def calls() -> list[InteractionCall]:
        return [call for call in fake.interaction_calls if f"/{token}" in call.path]

    await fake.dispatch("INTERACTION_CREATE", payload)
    await fake.wait_for(lambda: bool(reply_text(calls())), what="the support report")
    return reply_text(calls())


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
async def test_a_support_answer_carries_the_buttons_and_counts_only_the_askers_press(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM, desk: None, streamed: bool
) -> None:
    llm.handler = lambda request: ANSWER
    client = await bot.start(stream_answers=streamed)
    post = await answered(fake, "how do I install it?")
    assert post["content"] == ANSWER and list(buttons(post)) == ["Solved", "Not helpful"]

    stranger = await click(fake, post, buttons(post)["Solved"], user_id=BOB_ID)
    assert assert_ephemeral_one_liner(stranger) == NOT_YOURS
    await client.archive.flush()
    assert "Marked solved: **0**" in await report(fake)

    solved = await click(fake, post, buttons(post)["Solved"], user_id=ALICE_ID)
    await eventually(lambda: THANKS["solved"] in said(fake, solved))
    shown = await report(fake)
    assert "Questions asked: **1**" in shown and "Answered from the documents: **1**" in shown
    assert "Marked solved: **1**" in shown

    changed = await click(fake, post, buttons(post)["Not helpful"], user_id=ALICE_ID)  # she changes her mind
    await eventually(lambda: THANKS["not_helpful"] in said(fake, changed))
    shown = await report(fake)
    assert "Marked solved: **0**" in shown and "Marked not helpful: **1**" in shown


async def test_an_ordinary_answer_has_no_buttons(bot: RunningBot, fake: FakeDiscord, llm: FakeLLM, desk: None) -> None:
    llm.handler = lambda request: ANSWER
    await bot.start()
    await say(fake, ALICE_ID, f"<@{BOT_ID}> what is the weather?")
    await fake.wait_for_posts(1, CHANNEL_ID)
    await asyncio.sleep(0)
    assert [buttons(m) for m in fake.bot_messages(CHANNEL_ID)] == [{}]


async def test_an_ask_answer_carries_them_too(bot: RunningBot, fake: FakeDiscord, llm: FakeLLM, desk: None) -> None:
    llm.handler = lambda request: ANSWER
    await bot.start()
    token = token_of((await use_top_command(fake, "ask", [option("question", "how do I install it?")]))[0])

    def response_buttons() -> list[str]:
        with contextlib.suppress(KeyError):  # not made yet
            return list(buttons(fake.original_response(token)))
        return []

    await fake.wait_for(lambda: bool(response_buttons()), what="the /ask answer's buttons")
    assert response_buttons() == ["Solved", "Not helpful"]


async def test_the_buttons_count_after_a_restart(bot: RunningBot, fake: FakeDiscord, llm: FakeLLM, desk: None) -> None:
    llm.handler = lambda request: ANSWER
    await bot.start()
    post = await answered(fake, "how do I install it?")
    await bot.stop()
    client = await bot.start()

    pressed = await click(fake, post, buttons(post)["Solved"], user_id=ALICE_ID)
    await eventually(lambda: THANKS["solved"] in said(fake, pressed))
    kept = await client.archive.feedback(int(post["message_reference"]["message_id"]))
    assert kept is not None and kept.verdict == "solved"


async def test_a_forged_button_records_nothing(bot: RunningBot, fake: FakeDiscord, llm: FakeLLM, desk: None) -> None:
    llm.handler = lambda request: ANSWER
    client = await bot.start()
    post = await answered(fake, "how do I install it?")
    question = int(post["message_reference"]["message_id"])

    # Bob puts his own id in place of Alice's, then presses a button of a question that is no answer's (discord.py
    # dispatches a press only to a button the message has: the forged message says it has it).
    as_him = await click(fake, *forged(post, f"parley:feedback:solved:{question}:{BOB_ID}"), user_id=BOB_ID)
    other = await click(fake, *forged(post, f"parley:feedback:solved:{question + 1}:{BOB_ID}"), user_id=BOB_ID)
    await eventually(lambda: NOT_KEPT in said(fake, as_him) and NOT_KEPT in said(fake, other))
    kept = await client.archive.feedback(question)
    assert kept is not None and kept.verdict == ""


async def test_the_report_lists_unanswered_questions_with_links_and_refuses_members(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    fake.keep_private(OTHER_CHANNEL_ID, readers=[ALICE_ID])  # Bob, who runs the report, may not read it
    client = await bot.start()
    questions = (
        (CHANNEL_ID, "How do I reset my password?"),
        (CHANNEL_ID, "I forgot my password, how can I change it?"),
        (CHANNEL_ID, "Where are the logs?"),
        (OTHER_CHANNEL_ID, "Where is the secret roadmap?"),
    )
    links = []
    for channel_id, text in questions:
        message = await fake.send_user_message(channel_id, ALICE_ID, text)
        links.append(f"https://discord.com/channels/{GUILD_ID}/{channel_id}/{message['id']}")
        record = MessageRecord(int(message["id"]), channel_id, ALICE_ID, "alice", text, client.manager.clock())
        client.decision_log.note(record, Decision(False, SUPPORT_NOT_SURE, "support", 0.2))
    # The report finds a server's decisions through the channels it holds messages of: wait for the archive to have
    # the questions (on_message archives them a moment after the gateway delivers them).
    async with asyncio.timeout(5):
        while (
            sum([len(await client.archive.recent(channel, limit=10)) for channel in {CHANNEL_ID, OTHER_CHANNEL_ID}]) < 4
        ):
            await client.archive.flush()
            await asyncio.sleep(0.01)

    assert assert_ephemeral_one_liner(await _report_calls(fake, MEMBER)) == NOT_PERMITTED
    shown = await report(fake)
    assert REPORT_TITLE in shown and "Questions asked: **4**" in shown and "Unanswered: **4**" in shown
    password_topic, logs_topic = shown.index("(2)"), shown.index("Where are the logs?")
    assert password_topic < logs_topic  # the bigger topic first
    assert all(link in shown for link in links[:3])
    assert links[3] not in shown and "roadmap" not in shown
    assert "1 unanswered question(s) in channels you may not read" in shown


async def _report_calls(fake: FakeDiscord, permissions: Any) -> list[InteractionCall]:
    payload = command_payload(fake, "support", user_id=BOB_ID, permissions=permissions)
    payload["data"]["options"] = [{"type": 2, "name": "support", "options": [{"type": 1, "name": "report"}]}]
    token = payload["token"]
    await fake.dispatch("INTERACTION_CREATE", payload)
    await fake.wait_for(lambda: any(f"/{token}" in call.path for call in fake.interaction_calls), what="the refusal")
    return [call for call in fake.interaction_calls if f"/{token}" in call.path]


async def test_the_askers_feedback_goes_with_her_erasure(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM, desk: None
) -> None:
    llm.handler = lambda request: ANSWER
    client = await bot.start()
    post = await answered(fake, "how do I install it?")
    question = int(post["message_reference"]["message_id"])
    solved = await click(fake, post, buttons(post)["Solved"], user_id=ALICE_ID)
    await eventually(lambda: THANKS["solved"] in said(fake, solved))

    assert "1 feedback verdict(s)" in await erase(fake, ALICE_ID)

    assert await client.archive.feedback(question) is None
    shown = await report(fake)
    assert "Questions asked: **0**" in shown and "Marked solved: **0**" in shown
    again = await click(fake, post, buttons(post)["Solved"], user_id=ALICE_ID)  # the old button finds nothing
    await eventually(lambda: NOT_KEPT in said(fake, again))


async def test_without_an_archive_the_report_says_so(bot: RunningBot, fake: FakeDiscord, llm: FakeLLM) -> None:
    await bot.start(database_url="")
    assert assert_ephemeral_one_liner(await _report_calls(fake, MODERATOR)) == NO_ARCHIVE
