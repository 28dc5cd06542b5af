"""End-to-end: "Ask Parley" on a message, through the real discord.py client and the fake Discord: the message
command, the modal it opens (only Discord shows it), what the modal's submission is answered with."""

from __future__ import annotations

import discord
from e2e_support import (
    RunningBot,
    assert_ephemeral_one_liner,
    modal_inputs,
    open_modal,
    say,
    submit_modal,
    use_message_command,
)
from fake_discord import BOB_ID, BOT_ID, CAROL_ID, CHANNEL_ID, GUILD_ID, FakeDiscord
from fake_llm import FakeLLM

from commands.ask_menu import ASK_PARLEY, EMPTY_QUESTION, IN_THE_CHANNEL, ONLY_ME, QUESTION_ID, VISIBILITY_ID
from edge.asked_about import AUTHOR_OPTED_OUT, NOTHING_TO_READ
from records import OPTED_OUT_AUTHOR, OPTED_OUT_TEXT


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

    about = await client.message_questions.reader.read(GUILD_ID, message, reads_history=True)
    assert about.target.content == "the deploy moved to Thursday"
    assert [m.content for m in about.before] == [f"before {n}" for n in range(5, 12)]
    assert [m.content for m in about.after] == [f"after {n}" for n in range(5)]

    alone = await client.message_questions.reader.read(GUILD_ID, message, reads_history=False)
    assert (alone.before, alone.after) == ((), ())

    await client.admission.optouts.set(GUILD_ID, CAROL_ID, True)
    veiled = await client.message_questions.reader.read(GUILD_ID, message, reads_history=True)
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
    about = await client.message_questions.reader.read(GUILD_ID, message, reads_history=True)
    assert (about.before, about.after) == ((), ())
    assert len(fake.requests) == requests
