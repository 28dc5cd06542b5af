"""End-to-end guards: bots and webhooks, text that cannot be encoded, the history permission, Logfire's content."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import discord
import pytest

from bot import Parley
from commands.memory import CHANNEL_MEMORIES_HIDDEN
from edge.streaming import REGENERATING
from tests.e2e.test_e2e_memory import run_group_command
from tests.fakes.fake_discord import ALICE_ID, BOB_ID, BOT_ID, CAROL_ID, CHANNEL_ID, GUILD_ID, OTHER_BOT_ID, FakeDiscord
from tests.fakes.fake_llm import FakeLLM, ToolCall, message_text
from tests.support.e2e_support import (
    MODERATOR,
    RunningBot,
    assert_ephemeral_one_liner,
    assert_silent,
    decided,
    eventually,
    reply_text,
    request_texts,
    run_command,
    say,
    use_message_command,
)

LONE_SURROGATE = "\ud800"


async def test_message_with_a_lone_surrogate_is_answered_and_archived(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    """A lone UTF-16 surrogate (some clients send them) is answered and archived, with no error logged."""
    caplog.set_level(logging.INFO)
    client = await bot.start()
    question = await say(fake, ALICE_ID, f"<@{BOT_ID}> what is {LONE_SURROGATE}this{LONE_SURROGATE}?\x00")
    [post] = await fake.wait_for_posts(1)
    assert "sorry" not in post.content.lower()
    assert "this" in request_texts(llm.requests[0])[-1]
    archive = client.archive
    assert archive is not None
    await archive.flush()
    stored = {row.message_id: row.content for row in await archive.recent(CHANNEL_ID)}
    assert stored[int(question["id"])] == "@Parley what is \ufffdthis\ufffd?"
    await eventually(lambda: any(entry.reason == "mention" for entry in client.decisions.recent(CHANNEL_ID)))
    assert [record for record in caplog.records if record.levelno >= logging.ERROR or record.exc_info] == []


async def test_edit_to_a_lone_surrogate_is_archived(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    """An edit whose new text holds a lone surrogate updates the archive, with no error logged."""
    client = await bot.start()
    original = await say(fake, ALICE_ID, "meeting on tuesday")
    await fake.edit_user_message(CHANNEL_ID, int(original["id"]), f"meeting on {LONE_SURROGATE}thursday")
    archive = client.archive
    assert archive is not None

    async def stored_text() -> str | None:
        await archive.flush()
        return {row.message_id: row.content for row in await archive.recent(CHANNEL_ID)}.get(int(original["id"]))

    async with asyncio.timeout(5):
        while await stored_text() != "meeting on \ufffdthursday":  # noqa: ASYNC110 - the archive has no event
            await asyncio.sleep(0.02)
    assert [record for record in caplog.records if record.levelno >= logging.ERROR or record.exc_info] == []


# --- Other bots, webhooks and system messages --------------------------------------------------


async def auto_reply_bot(fake: FakeDiscord, client: Parley, *, max_rounds: int = 10) -> list[dict[str, Any]]:
    """Another bot that mentions Parley, then replies to each of Parley's posts mentioning it again.

    Stops once Parley decides not to answer it (or after `max_rounds`); returns the bot's messages. Each round waits
    for Parley's decision rather than for a quiet spell, which a loaded machine can stretch past any timeout.
    """
    sent = [await say(fake, OTHER_BOT_ID, f"<@{BOT_ID}> hello, fellow bot")]
    for _ in range(max_rounds):
        if not (await decided(client, sent[-1])).respond:
            break
        posts = await fake.wait_for_posts(len(sent), CHANNEL_ID, timeout=15)
        latest = int(posts[-1].message["id"])
        sent.append(await say(fake, OTHER_BOT_ID, f"<@{BOT_ID}> thanks! and what else?", reply_to=latest))
    return sent


async def test_another_bot_is_not_answered_but_the_model_sees_it(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """By default an auto-replying bot that mentions Parley gets no answer, yet its words reach the model."""
    client = await bot.start()
    sent = await auto_reply_bot(fake, client)
    assert len(sent) == 1 and fake.posts_in(CHANNEL_ID) == [] and llm.requests == []
    assert (await decided(client, sent[0])).reason == "other_bot"

    await say(fake, ALICE_ID, f"<@{BOT_ID}> hi")
    await fake.wait_for_posts(1, CHANNEL_ID)
    await say(fake, OTHER_BOT_ID, f"<@{BOT_ID}> the build is green")
    await say(fake, ALICE_ID, f"<@{BOT_ID}> what did the bot say?")
    await fake.wait_for_posts(2, CHANNEL_ID)
    assert "the build is green" in " ".join(request_texts(llm.requests[-1]))
    assert len(llm.requests) == 2


async def test_allow_listed_bot_gets_at_most_max_bot_exchanges_answers(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """An allow-listed auto-replying bot is answered MAX_BOT_EXCHANGES times, then the loop guard stops it."""
    client = await bot.start(answer_bot_ids=frozenset({OTHER_BOT_ID}), max_bot_exchanges=3)
    sent = await auto_reply_bot(fake, client)
    assert len(fake.posts_in(CHANNEL_ID)) == 3 and len(llm.requests) == 3
    assert len(sent) == 4
    stopped = await decided(client, sent[-1])
    assert (stopped.reason, stopped.tier, stopped.respond) == ("bot_loop", "gate", False)

    await say(fake, ALICE_ID, "carry on, you two")
    await say(fake, OTHER_BOT_ID, f"<@{BOT_ID}> one more?")
    await fake.wait_for_posts(4, CHANNEL_ID)


def automated_message(fake: FakeDiscord, content: str, **fields: Any) -> dict[str, Any]:
    """A MESSAGE_CREATE in #general from no member: a webhook's post or a system message, per `fields`."""
    message = fake.add_history(CHANNEL_ID, ALICE_ID, content)
    return {**message, "guild_id": str(GUILD_ID), "mentions": [fake.users[BOT_ID].payload()], **fields}


WEBHOOK_ID = 1187034472391798999
WEBHOOK_AUTHOR = {"id": str(WEBHOOK_ID), "username": "Deploy Hook", "discriminator": "0000", "avatar": None}


@pytest.mark.parametrize(
    ("kind", "fields"),
    [
        ("webhook", {"webhook_id": str(WEBHOOK_ID), "author": WEBHOOK_AUTHOR}),
        ("system", {"type": 7}),  # a member join
        ("system author", {"author": {**WEBHOOK_AUTHOR, "system": True}}),
    ],
)
async def test_webhooks_and_system_messages_never_trigger_an_answer(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM, kind: str, fields: dict[str, Any]
) -> None:
    """A webhook post, a system message or a system author mentioning Parley gets no answer."""
    await bot.start()
    await fake.dispatch("MESSAGE_CREATE", automated_message(fake, f"<@{BOT_ID}> deploy finished", **fields))
    await assert_silent(fake, 0)
    assert llm.requests == []


async def test_allow_listed_webhook_is_answered(bot: RunningBot, fake: FakeDiscord, llm: FakeLLM) -> None:
    """A webhook whose id is in ANSWER_BOT_IDS is answered like a person's mention."""
    await bot.start(answer_bot_ids=frozenset({WEBHOOK_ID}))
    fields = {"webhook_id": str(WEBHOOK_ID), "author": WEBHOOK_AUTHOR}
    await fake.dispatch("MESSAGE_CREATE", automated_message(fake, f"<@{BOT_ID}> deploy finished", **fields))
    [post] = await fake.wait_for_posts(1, CHANNEL_ID)
    assert "deploy finished" in post.content


# --- The history tools and Read Message History ------------------------------------------------


async def deny_read_message_history(fake: FakeDiscord, member_id: int) -> None:
    """Give #general a permission overwrite that denies `member_id` Read Message History, as a moderator would."""
    denied = discord.Permissions(read_message_history=True).value
    overwrite = {"id": str(member_id), "type": 1, "allow": "0", "deny": str(denied)}  # type 1: a member
    await fake.dispatch("CHANNEL_UPDATE", {**fake.channels[CHANNEL_ID].payload(), "permission_overwrites": [overwrite]})


def recent_then_answer(request: dict[str, Any]) -> Any:
    """The model reads the channel's recent messages once per question, then answers."""
    if request["messages"][-1]["role"] == "tool":
        return "Here is what I found."
    return ToolCall("get_recent_messages", {"limit": 20})


async def test_history_tools_read_nothing_for_a_member_without_read_message_history(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """Bob, denied Read Message History in the channel, gets no archive data; Alice, who has it, does."""
    client = await bot.start(context_message_count=0)
    await say(fake, CAROL_ID, "the vault combination is 1-2-3-4")
    await deny_read_message_history(fake, BOB_ID)
    channel = client.get_channel(CHANNEL_ID)
    assert isinstance(channel, discord.TextChannel)
    await eventually(lambda: channel.overwrites_for(discord.Object(id=BOB_ID)).read_message_history is False)
    llm.handler = recent_then_answer

    await say(fake, BOB_ID, f"<@{BOT_ID}> what did carol say earlier?")
    await fake.wait_for_posts(1, CHANNEL_ID)
    [denied] = [message_text(m) for m in llm.requests[1]["messages"] if m["role"] == "tool"]
    assert "Read Message History" in denied and "1-2-3-4" not in denied

    await say(fake, ALICE_ID, f"<@{BOT_ID}> and what did carol say?")
    await fake.wait_for_posts(2, CHANNEL_ID)
    allowed = [message_text(m) for m in llm.requests[3]["messages"] if m["role"] == "tool"]
    assert "1-2-3-4" in allowed[-1]


# --- What a member without Read Message History is shown of the channel ---------------------------

READ_HISTORY = discord.Permissions(read_message_history=True)


async def test_a_member_without_read_message_history_gets_no_earlier_message_in_the_models_request(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """Bob, denied Read Message History, asks Parley: the model's request holds none of the channel's earlier
    messages but his own and Parley's replies to him, whether his question starts the conversation or joins it;
    Alice, who has the permission, still gets the whole context (and Bob's turn)."""
    fake.deny(CHANNEL_ID, BOB_ID, READ_HISTORY)
    await bot.start()
    await say(fake, CAROL_ID, "the vault combination is 1-2-3-4")
    await say(fake, BOB_ID, "hello all")
    await say(fake, BOB_ID, f"<@{BOT_ID}> what did carol say earlier?")
    await fake.wait_for_posts(1)
    bobs_first = " ".join(request_texts(llm.requests[0]))
    assert "1-2-3-4" not in bobs_first
    assert "hello all" in bobs_first and "what did carol say earlier?" in bobs_first

    await say(fake, ALICE_ID, f"<@{BOT_ID}> and what did carol say?")
    await fake.wait_for_posts(2)
    alices = " ".join(request_texts(llm.requests[1]))
    assert "1-2-3-4" in alices and "what did carol say earlier?" in alices

    await say(fake, CAROL_ID, "and the safe is behind the painting")
    await say(fake, BOB_ID, f"<@{BOT_ID}> anything new?")
    await fake.wait_for_posts(3)
    bobs_second = " ".join(request_texts(llm.requests[2]))
    # Parley's answer to Alice quoted the combination: it is no reply to Bob, so he is not shown it either.
    for unseen in ("1-2-3-4", "painting", "and what did carol say?"):
        assert unseen not in bobs_second
    assert "what did carol say earlier?" in bobs_second and "anything new?" in bobs_second
    assert "echo:" in bobs_second  # Parley's reply to him is his to see


async def test_why_and_memory_list_show_a_member_without_read_message_history_nothing_of_the_channel(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """`/parley why` refuses Bob (denied Read Message History) in one line, and `/parley memory list` shows him
    his own memories but not the channel's; Alice sees both."""
    fake.deny(CHANNEL_ID, BOB_ID, READ_HISTORY)
    client = await bot.start()
    question = await say(fake, CAROL_ID, f"<@{BOT_ID}> the vault combination is 1-2-3-4")
    await fake.wait_for_posts(1)
    memory = client.memory
    assert memory is not None
    source = int(question["id"])
    for said_by, fact, about_speaker in [
        (CAROL_ID, "the vault opens with 1-2-3-4", False),
        (BOB_ID, "Bob likes tea", True),
    ]:
        await memory.remember(
            guild_id=GUILD_ID,
            channel_id=CHANNEL_ID,
            said_by_id=said_by,
            source_message_id=source,
            fact=fact,
            about_speaker=about_speaker,
        )

    refused = assert_ephemeral_one_liner(await run_command(fake, "why", user_id=BOB_ID, permissions=MODERATOR))
    assert refused == "You need the Read Message History permission in this channel to use /parley why."
    listed = await run_group_command(fake, "memory", "list", user_id=BOB_ID)
    assert "Bob likes tea" in listed and "1-2-3-4" not in listed and CHANNEL_MEMORIES_HIDDEN in listed

    assert "1-2-3-4" in reply_text(await run_command(fake, "why", user_id=ALICE_ID, permissions=MODERATOR))
    alices = await run_group_command(fake, "memory", "list", user_id=ALICE_ID)
    assert "1-2-3-4" in alices and CHANNEL_MEMORIES_HIDDEN not in alices


async def test_regenerate_for_a_member_without_read_message_history_shows_only_their_turn(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """Bob (denied Read Message History) regenerates his answer: the model is asked his private prompt again,
    with none of the channel's or the conversation's history beside it."""
    fake.deny(CHANNEL_ID, BOB_ID, READ_HISTORY)
    client = await bot.start()
    await say(fake, ALICE_ID, f"<@{BOT_ID}> the vault combination is 1-2-3-4, remember it")
    await fake.wait_for_posts(1)
    question = await say(fake, BOB_ID, f"<@{BOT_ID}> what is the combination?")
    await fake.wait_for_posts(2)

    def bobs_turn() -> bool:
        latest = client.streams.latest(CHANNEL_ID)
        return latest is not None and latest.question.id == int(question["id"])

    await eventually(bobs_turn)
    bobs_answer = fake.bot_messages(CHANNEL_ID)[-1]

    calls = await use_message_command(fake, "Regenerate", bobs_answer, user_id=BOB_ID)
    assert assert_ephemeral_one_liner(calls) == REGENERATING
    await fake.wait_for(lambda: len(llm.requests) == 3, what="the regenerated answer's request")
    regenerated = llm.requests[2]
    assert "1-2-3-4" not in " ".join(request_texts(regenerated))
    assert request_texts(regenerated)[-1] == request_texts(llm.requests[1])[-1]
