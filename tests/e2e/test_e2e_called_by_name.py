"""End-to-end: a message that calls Parley by name starts a conversation like an @mention (issue 34, part 3)."""

from __future__ import annotations

from tests.fakes.fake_discord import ALICE_ID, CHANNEL_ID, FakeDiscord
from tests.fakes.fake_llm import FakeLLM, message_text
from tests.support.e2e_support import RunningBot, decided, option, reply_text, run_command, say


async def test_called_by_name_starts_a_conversation_and_why_says_so(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """ "parley, what's …" is answered with the question in the model's request; /parley why names the reason."""
    client = await bot.start()
    question = await say(fake, ALICE_ID, "parley, what's the weather like on mars?")
    [post] = await fake.wait_for_posts(1)
    assert post.reply_to == int(question["id"])
    assert "what's the weather like on mars?" in message_text(llm.requests[-1]["messages"][-1])
    assert (await decided(client, question)).reason == "called_by_name"
    assert "answered · called_by_name (explicit)" in reply_text(await run_command(fake, "why"))
    assert client.manager.get(CHANNEL_ID) is not None


async def test_speaking_of_parley_between_members_starts_nothing(bot: RunningBot, fake: FakeDiscord) -> None:
    """ "I asked parley yesterday" speaks of Parley, not to it: no conversation, no answer."""
    client = await bot.start()
    aside = await say(fake, ALICE_ID, f"<@{fake.bob_id}> I asked parley yesterday, it said Friday")
    assert (await decided(client, aside)).reason == "no_conversation"
    plain = await say(fake, fake.bob_id, "I asked parley yesterday too")
    assert (await decided(client, plain)).reason == "no_conversation"
    assert fake.bot_posts == [] and client.manager.get(CHANNEL_ID) is None


async def test_mention_only_channels_ignore_names(bot: RunningBot, fake: FakeDiscord) -> None:
    """In a mention-only channel a call by name starts nothing: only an @mention or a reply does."""
    client = await bot.start()
    await run_command(fake, "mode", [option("mode", "mention-only")])
    called = await say(fake, ALICE_ID, "parley, what's the weather like on mars?")
    assert (await decided(client, called)).reason == "no_conversation"
    assert fake.bot_posts == []


async def test_wake_words_call_parley_too(bot: RunningBot, fake: FakeDiscord) -> None:
    """A name from WAKE_WORDS calls Parley like its own."""
    client = await bot.start(wake_words=frozenset({"jarvis"}))
    called = await say(fake, ALICE_ID, "hey jarvis, what's on mars?")
    await fake.wait_for_posts(1)
    assert (await decided(client, called)).reason == "called_by_name"
