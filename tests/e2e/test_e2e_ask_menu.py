"""End-to-end: "Ask Parley" on a message, through the real discord.py client and the fake Discord: the message
command, the modal it opens (only Discord shows it), what the modal's submission is answered with."""

from __future__ import annotations

from typing import Any

import discord

from admission.optout import OPTED_OUT_REFUSAL
from answering.asked import PRIVATE_EXCERPT_ABOUT
from answering.asked_about import MessageQuestions
from bot import Parley
from commands.ask_menu import ASK_PARLEY, EMPTY_QUESTION, IN_THE_CHANNEL, ONLY_ME, QUESTION_ID, VISIBILITY_ID
from edge.asked_about import AUTHOR_OPTED_OUT, NOTHING_TO_READ, AskedAboutReader
from records import OPTED_OUT_AUTHOR, OPTED_OUT_TEXT
from tests.fakes.fake_discord import (
    ALICE_ID,
    BOB_ID,
    BOT_ID,
    CAROL_ID,
    CHANNEL_ID,
    GUILD_ID,
    FakeDiscord,
    InteractionCall,
)
from tests.fakes.fake_llm import FakeLLM, last_user_text
from tests.support.e2e_support import (
    EPHEMERAL,
    MEMBER,
    RunningBot,
    assert_ephemeral_one_liner,
    assert_told_after_deferral,
    call_text,
    calls_for,
    decided,
    eventually,
    is_callback,
    modal_inputs,
    open_modal,
    request_texts,
    say,
    settled,
    submit_modal,
    use_message_command,
)

NOTES = b"Release checklist\n- tag the build\n- The staging database password rotates every Tuesday at 09:00.\n"
FACT = "rotates every Tuesday at 09:00"
QUESTION = "what does this file say about the password?"
ANSWER = "It rotates every Tuesday at 09:00."


async def ask_parley(
    fake: FakeDiscord,
    target: dict[str, Any],
    question: str,
    *,
    visibility: str = ONLY_ME,
    user_id: int = ALICE_ID,
    permissions: discord.Permissions = MEMBER,
) -> list[InteractionCall]:
    """ "Ask Parley" on `target`, the modal submitted with `question`; the submission's calls once answered."""
    modal = await open_modal(fake, ASK_PARLEY, target, user_id=user_id, permissions=permissions)
    values: dict[str, str | list[str]] = {QUESTION_ID: question, VISIBILITY_ID: [visibility]}
    calls = await submit_modal(fake, modal, values, user_id=user_id, permissions=permissions)

    def answered() -> bool:
        return any(call.body and call_text(call) for call in calls_for(fake, calls))

    await fake.wait_for(answered, what="the Ask Parley answer")
    return calls_for(fake, calls)


def reader(client: Parley) -> AskedAboutReader:
    """What reads a message asked about, as the client's "Ask Parley" has it."""
    return MessageQuestions(client.commanded, client.pipeline, client.files).reader


def flags_of(call: InteractionCall) -> int:
    assert call.body is not None
    data = call.body.get("data") or call.body
    return int(data.get("flags") or 0)


async def shared_notes(fake: FakeDiscord) -> dict[str, Any]:
    notes = fake.served_attachment("notes.txt", NOTES, "text/plain")
    return await say(fake, BOB_ID, "the release checklist", attachments=[notes])


async def test_asked_privately_about_a_text_file_the_answer_reads_it_and_reaches_the_asker_alone(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    llm.handler = lambda request: ANSWER
    client = await bot.start()
    target = await shared_notes(fake)
    calls = await ask_parley(fake, target, QUESTION)

    deferral, *answer = calls
    assert is_callback(deferral) and flags_of(deferral) & EPHEMERAL
    assert ANSWER in "\n".join(call_text(call) for call in answer)
    [request] = llm.requests
    prompt = last_user_text(request)
    assert FACT in prompt and QUESTION in prompt
    assert prompt.index("<asked_about") < prompt.index(FACT) < prompt.index(QUESTION)
    # Bob's message is also the channel's recent context: it is quoted, and its file read into the prompt, once.
    assert prompt.count(FACT) == 1 and prompt.count("the release checklist") == 1
    # Nothing in the channel, no conversation: only Bob's message is there.
    assert [message["author"]["id"] for message in fake.messages(CHANNEL_ID)] == [str(BOB_ID)]
    assert fake.posts_in(CHANNEL_ID) == []
    assert client.manager.get(CHANNEL_ID) is None
    # `/parley why` shows that a question was asked privately, and how, not what.
    asked = [entry.excerpt for entry in client.decisions.recent(CHANNEL_ID) if entry.reason == "asked_privately"]
    assert asked == [PRIVATE_EXCERPT_ABOUT]


def _answer_recorded(client: Parley) -> bool:
    conversation = client.manager.get(CHANNEL_ID)
    return conversation is not None and any(message.is_bot for message in conversation.messages)


async def test_asked_in_the_channel_the_answer_is_posted_and_a_plain_follow_up_continues(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    llm.handler = lambda request: ANSWER if len(llm.requests) == 1 else "On Tuesdays, yes."
    client = await bot.start()
    target = await shared_notes(fake)
    calls = await ask_parley(fake, target, QUESTION, visibility=IN_THE_CHANNEL)

    deferral, *answer = calls
    assert is_callback(deferral) and not flags_of(deferral) & EPHEMERAL
    await eventually(lambda: [m["content"] for m in fake.bot_messages(CHANNEL_ID)] == [ANSWER])
    assert not any(flags_of(call) & EPHEMERAL for call in answer)
    assert FACT in last_user_text(llm.requests[0])
    # The answer is in the conversation once its tail has recorded it, a moment after Discord has the post: a
    # follow-up before then would find no answer of Parley's to follow.
    await eventually(lambda: _answer_recorded(client))
    # The question before its answer, each once: the answer's message (made when the command was acknowledged) has a
    # later id than the question's interaction, and the context loaded before the question does not hold it.
    conversation = client.manager.get(CHANNEL_ID)
    assert conversation is not None
    assert [message.author_id for message in conversation.messages] == [BOB_ID, ALICE_ID, BOT_ID]

    follow_up = await say(fake, ALICE_ID, "every week?")
    # Decided first, so that a "no" fails with its reason rather than as a post that never came.
    decision = await decided(client, follow_up)
    assert (decision.respond, decision.reason) == (True, "followup")
    [post] = await fake.wait_for_posts(1, CHANNEL_ID)
    assert post.content == "On Tuesdays, yes."
    # The next request's history holds the message asked about, its file, the question and the answer.
    earlier = request_texts(llm.requests[1])[:-1]
    assert any(FACT in text and QUESTION in text for text in earlier) and ANSWER in earlier


async def test_the_asker_is_admitted_as_for_a_mention_a_refusal_is_one_line_and_no_model_call(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """An asker who opted out is turned down by the one admission path, in one line only they see."""
    client = await bot.start()
    target = await shared_notes(fake)
    await client.admission.optouts.set(GUILD_ID, ALICE_ID, True)
    modal = await open_modal(fake, ASK_PARLEY, target)
    calls = await submit_modal(fake, modal, {QUESTION_ID: QUESTION})
    await settled(fake)  # nothing follows the refusal
    assert assert_told_after_deferral(calls_for(fake, calls)) == OPTED_OUT_REFUSAL
    assert llm.requests == [] and fake.posts_in(CHANNEL_ID) == []


async def test_a_member_without_read_message_history_is_shown_the_message_but_nothing_around_it(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    llm.handler = lambda request: ANSWER
    await bot.start()
    fake.add_history(CHANNEL_ID, CAROL_ID, "the secret plan is in tools/")
    target = fake.add_history(CHANNEL_ID, BOB_ID, "the deploy moved to Thursday")
    no_history = discord.Permissions(MEMBER.value)
    no_history.read_message_history = False
    await ask_parley(fake, target, "which day?", permissions=no_history)
    texts = request_texts(llm.requests[0])
    assert not any("secret plan" in text for text in texts)
    assert any("moved to Thursday</asked_about>" in text for text in texts)


async def test_a_member_who_may_read_history_is_shown_the_conversation_around_the_message(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    llm.handler = lambda request: ANSWER
    await bot.start()
    fake.add_history(CHANNEL_ID, CAROL_ID, "when is the deploy?")
    target = fake.add_history(CHANNEL_ID, BOB_ID, "Thursday")
    fake.add_history(CHANNEL_ID, CAROL_ID, "thanks, noted")
    await ask_parley(fake, target, "is that final?")
    prompt = last_user_text(llm.requests[0])
    section = prompt[prompt.index("asks you about the message") : prompt.index("Answer this new message")]
    assert section.index("when is the deploy?") < section.index(">Thursday</asked_about>") < section.index("noted")


async def test_ask_parley_opens_a_modal_for_the_question_and_who_sees_the_answer(
    bot: RunningBot, fake: FakeDiscord
) -> None:
    """The modal asks for a question (a paragraph, required) and whom the answer is for, "Only me" chosen already."""
    await bot.start()
    target = await say(fake, BOB_ID, "the deploy moved to Thursday")
    modal = await open_modal(fake, ASK_PARLEY, target)
    assert modal["title"] == ASK_PARLEY
    inputs = modal_inputs(modal)
    assert set(inputs) == {QUESTION_ID, VISIBILITY_ID}
    assert inputs[QUESTION_ID]["type"] == 4 and inputs[QUESTION_ID]["required"]
    options = {option["value"]: option.get("default", False) for option in inputs[VISIBILITY_ID]["options"]}
    assert options == {ONLY_ME: True, IN_THE_CHANNEL: False}


async def test_a_message_by_a_member_who_opted_out_is_refused_in_one_line_before_any_question(
    bot: RunningBot, fake: FakeDiscord
) -> None:
    """Nothing an opted-out member writes is shown to the model: asking about it is refused, no modal opened."""
    client = await bot.start()
    target = await say(fake, BOB_ID, "my private plans")
    await client.admission.optouts.set(GUILD_ID, BOB_ID, True)
    calls = await use_message_command(fake, ASK_PARLEY, target)
    assert assert_ephemeral_one_liner(calls) == AUTHOR_OPTED_OUT
    assert fake.modals == {}


async def test_a_message_with_nothing_to_read_is_refused_in_one_line(bot: RunningBot, fake: FakeDiscord) -> None:
    await bot.start()
    target = await say(fake, BOB_ID, "  ")
    calls = await use_message_command(fake, ASK_PARLEY, target)
    assert assert_ephemeral_one_liner(calls) == NOTHING_TO_READ
    assert fake.modals == {}


async def test_a_blank_question_is_refused_in_one_line_and_asks_the_model_nothing(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    await bot.start()
    target = await say(fake, BOB_ID, "the deploy moved to Thursday")
    modal = await open_modal(fake, ASK_PARLEY, target)
    calls = await submit_modal(fake, modal, {QUESTION_ID: "   \n "})
    assert assert_ephemeral_one_liner(calls) == EMPTY_QUESTION
    assert llm.requests == [] and fake.posts_in(CHANNEL_ID) == []


async def test_the_conversation_around_the_message_is_read_only_for_a_member_who_may_read_history(
    bot: RunningBot, fake: FakeDiscord
) -> None:
    """Up to 10 messages before and 5 after, never from before the channel's last forget, opted-out members' veiled;
    none for a member without Read Message History."""
    client = await bot.start()
    earlier = [fake.add_history(CHANNEL_ID, CAROL_ID, f"before {n}") for n in range(12)]
    target = fake.add_history(CHANNEL_ID, BOB_ID, "the deploy moved to Thursday")
    for n in range(7):
        fake.add_history(CHANNEL_ID, CAROL_ID, f"after {n}")
    client.channels.forget_markers[CHANNEL_ID] = int(earlier[4]["id"])
    channel = client.get_channel(CHANNEL_ID)
    assert isinstance(channel, discord.TextChannel)
    message = await channel.fetch_message(int(target["id"]))

    about = await reader(client).read(GUILD_ID, message, reads_history=True)
    assert about.target.content == "the deploy moved to Thursday"
    assert [m.content for m in about.before] == [f"before {n}" for n in range(5, 12)]
    assert [m.content for m in about.after] == [f"after {n}" for n in range(5)]

    alone = await reader(client).read(GUILD_ID, message, reads_history=False)
    assert (alone.before, alone.after) == ((), ())

    await client.admission.optouts.set(GUILD_ID, CAROL_ID, True)
    veiled = await reader(client).read(GUILD_ID, message, reads_history=True)
    assert {(m.author, m.content) for m in (*veiled.before, *veiled.after)} == {(OPTED_OUT_AUTHOR, OPTED_OUT_TEXT)}


async def test_a_message_the_live_conversation_holds_is_asked_about_without_loading_it_again(
    bot: RunningBot, fake: FakeDiscord
) -> None:
    client = await bot.start()
    target = await say(fake, BOB_ID, f"<@{BOT_ID}> the deploy moved to Thursday, right?")
    await fake.wait_for_posts(1)
    channel = client.get_channel(CHANNEL_ID)
    assert isinstance(channel, discord.TextChannel)
    message = await channel.fetch_message(int(target["id"]))
    requests = len(fake.requests)
    about = await reader(client).read(GUILD_ID, message, reads_history=True)
    assert (about.before, about.after) == ((), ())
    assert len(fake.requests) == requests
