"""End-to-end: `/parley privacy optout | optin | export | erase` with bot.py's client and the fakes."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic_ai.messages import ModelRequest

import commands.privacy
from admission.optout import OPTED_OUT_REFUSAL
from bot import Parley
from commands.privacy import ERASE_CANCELLED
from prompting.context import summary_turn
from records import OPTED_OUT_TEXT
from tests.e2e.test_e2e_memory import run_group_command, string_option
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
from tests.fakes.fake_llm import FakeLLM, Reply, ToolCall, last_user_text, message_text
from tests.support.e2e_support import (
    MEMBER,
    MODERATOR,
    RunningBot,
    assert_ephemeral_one_liner,
    assert_silent,
    call_text,
    calls_for,
    click,
    command_payload,
    decided,
    eventually,
    is_callback,
    option,
    reply_text,
    request_texts,
    run_command,
    say,
    say_and_approve,
    use_message_command,
    use_top_command,
)


async def privacy(
    fake: FakeDiscord, subcommand: str, *, user_id: int = ALICE_ID, posts: int = 1
) -> list[InteractionCall]:
    """Use `/parley privacy <subcommand>` in #general as a plain member; the bot's calls once it made `posts`."""
    payload = command_payload(fake, "privacy", user_id=user_id, permissions=MEMBER)
    payload["data"]["options"] = [{"type": 2, "name": "privacy", "options": [{"type": 1, "name": subcommand}]}]
    token = payload["token"]

    def calls() -> list[InteractionCall]:
        return [call for call in fake.interaction_calls if f"/{token}" in call.path]

    await fake.dispatch("INTERACTION_CREATE", payload)
    await fake.wait_for(lambda: len(calls()) >= posts, what=f"/parley privacy {subcommand} answered")
    return calls()


async def archived_texts(client: Parley) -> list[str]:
    assert client.archive is not None
    await client.archive.flush()
    return [row.content for row in await client.archive.recent(CHANNEL_ID, limit=1000)]


async def export_of(fake: FakeDiscord, user_id: int = ALICE_ID) -> dict[str, Any]:
    """`/parley privacy export`: deferred, then a follow-up with the JSON file, both only the member sees."""
    calls = await privacy(fake, "export", user_id=user_id, posts=2)
    deferred, followup = calls[0], calls[-1]
    assert is_callback(deferred) and deferred.body is not None and deferred.body["type"] == 5
    assert followup.body is not None and followup.body["flags"] & (1 << 6)
    [(name, data)] = followup.files
    assert name == f"parley-{GUILD_ID}-{user_id}.json"
    exported: dict[str, Any] = json.loads(data)
    return exported


async def erase_by_command(fake: FakeDiscord, user_id: int = ALICE_ID) -> str:
    """`/parley privacy erase`, confirmed by its Erase button; the line that says what was erased."""
    [asked] = await privacy(fake, "erase", user_id=user_id)
    assert asked.body is not None
    buttons = {button["label"]: button["custom_id"] for button in asked.body["data"]["components"][0]["components"]}
    message = fake.original_response(asked.path.split("/")[-2])
    clicked = await click(fake, message, buttons["Erase"], user_id=user_id)

    def told() -> list[str]:
        texts = [(call.body or {}).get("content") or "" for call in calls_for(fake, clicked)]
        return [text for text in texts if text.startswith(("Erased", "Not everything"))]

    await fake.wait_for(lambda: bool(told()), what="the erasure's answer")
    [said] = told()
    assert said.startswith("Erased"), said
    return said


async def test_an_opted_out_member_is_neither_archived_nor_shown_nor_answered(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """After opting out, Alice's messages are not archived (live or by catch-up after a restart), reach the model only
    as the placeholder, and her mention is met with silence logged `opted_out`; opting in undoes it."""
    client = await bot.start()
    said = await say(fake, ALICE_ID, "said before opting out")
    # Heard (and archived) before she opts out: a message Parley hears only after her opt-out is not kept.
    await decided(client, said)
    reply = reply_text(await privacy(fake, "optout"))
    assert "You opted out" in reply and "stays until you erase it" in reply

    await say(fake, BOB_ID, f"<@{BOT_ID}> shall we plan the trip?")
    await fake.wait_for_posts(1)
    mention = await say(fake, ALICE_ID, f"<@{BOT_ID}> my passport number is PX-12345")
    entry = await decided(client, mention)
    assert (entry.respond, entry.reason, entry.excerpt) == (False, "opted_out", OPTED_OUT_TEXT)
    await assert_silent(fake, 1)
    await say(fake, BOB_ID, f"<@{BOT_ID}> what did everyone say?")
    await fake.wait_for_posts(2)
    prompt = "\n".join(request_texts(llm.requests[-1]))
    # Her mention, and what she said before opting out (loaded as context), reach the model only as placeholders.
    assert OPTED_OUT_TEXT in prompt and "PX-12345" not in prompt and "said before opting out" not in prompt
    assert str(ALICE_ID) not in prompt and "Alice" not in prompt
    texts = await archived_texts(client)
    assert "said before opting out" in texts  # opting out erases nothing
    assert not any("PX-12345" in text for text in texts)

    await bot.stop()
    fake.add_history(CHANNEL_ID, ALICE_ID, "alice wrote while parley was away")
    fake.add_history(CHANNEL_ID, BOB_ID, "bob wrote while parley was away")
    client = await bot.start()
    await eventually(lambda: CHANNEL_ID in client.coverage.covered_since and not client.coverage.catching_up, 30)
    texts = await archived_texts(client)
    assert "bob wrote while parley was away" in texts and "alice wrote while parley was away" not in texts

    assert "opted back in" in reply_text(await privacy(fake, "optin"))
    await say(fake, ALICE_ID, "archived again")
    async with asyncio.timeout(10):
        while "archived again" not in await archived_texts(client):  # noqa: ASYNC110 - the archive has no event
            await asyncio.sleep(0.05)


async def test_export_then_erase_then_an_empty_export(bot: RunningBot, fake: FakeDiscord, llm: FakeLLM) -> None:
    """Alice's export holds her messages, her file's text, her facts and her usage, nothing of Bob's; the erase she
    confirms (Bob's press changes nothing) removes them from the archive, the live conversation and the summaries,
    and her next export is empty."""
    client = await bot.start()
    assert client.archive is not None and client.memory is not None
    notes = fake.served_attachment("notes.txt", b"the launch code is tango", "text/plain")
    shared = await say(fake, ALICE_ID, "my notes", attachments=[notes])
    question = await say(fake, ALICE_ID, f"<@{BOT_ID}> what is in my notes?")
    await fake.wait_for_posts(1)
    bobs = await say(fake, BOB_ID, "bob's own words")
    for said_by, fact, source in ((ALICE_ID, "alice likes tea", question), (BOB_ID, "bob likes coffee", bobs)):
        await client.memory.remember(
            guild_id=GUILD_ID, channel_id=CHANNEL_ID, said_by_id=said_by, source_message_id=int(source["id"]),
            fact=fact, about_speaker=True,
        )  # fmt: skip
    client.archive.add_summary(CHANNEL_ID, "alice shared her notes", datetime.now(UTC), (int(shared["id"]),) * 2)
    conversation = client.manager.get(CHANNEL_ID)
    assert conversation is not None
    conversation.llm_history.insert(0, summary_turn("alice's notes summarised", (int(shared["id"]),) * 2))

    async def file_text_kept() -> bool:
        found = await client.archive.messages_by_id([int(shared["id"])])
        return bool(found and found[0].attachments and found[0].attachments[0].text)

    async with asyncio.timeout(10):
        while not await file_text_kept():  # noqa: ASYNC110 - read in the background; the archive has no event
            await asyncio.sleep(0.05)

    exported = await export_of(fake)
    assert [m["content"] for m in exported["messages"]] == ["my notes", "@Parley what is in my notes?"]
    assert exported["messages"][0]["attachments"][0]["text"] == "the launch code is tango"
    assert [f["fact"] for f in exported["facts"]] == ["alice likes tea"]
    assert exported["usage"] and exported["usage"][0]["answers"] >= 1
    assert "bob" not in json.dumps(exported).lower()

    [asked] = await privacy(fake, "erase")
    assert asked.body is not None and asked.body["data"]["flags"] & (1 << 6)
    buttons = {button["label"]: button["custom_id"] for button in asked.body["data"]["components"][0]["components"]}
    message = fake.original_response(asked.path.split("/")[-2])
    refused = await click(fake, message, buttons["Erase"], user_id=BOB_ID)
    assert "Only the member who asked" in reply_text(refused)
    assert "my notes" in await archived_texts(client)

    await click(fake, message, buttons["Erase"])

    def erased() -> list[str]:
        texts = [(call.body or {}).get("content") or "" for call in fake.interaction_calls]
        return [text for text in texts if text.startswith("Erased")]

    await fake.wait_for(lambda: bool(erased()), what="the erasure's answer")
    [summary] = erased()
    assert "Erased 2 message(s) with 1 file(s)" in summary and "1 conversation summary" in summary
    assert "1 live conversation" in summary
    texts = await archived_texts(client)
    assert "my notes" not in texts and "bob's own words" in texts
    assert await client.archive.summaries(CHANNEL_ID) == []
    assert all(m.author_id != ALICE_ID for m in conversation.messages)
    # What the model is sent of her is gone (its own earlier answer, here an echo, is its words, kept as written).
    requests = str([message for message in conversation.llm_history if isinstance(message, ModelRequest)])
    assert "tango" not in requests and "my notes" not in requests and "notes summarised" not in requests
    assert "Alice" not in requests and str(ALICE_ID) not in requests

    emptied = await export_of(fake)
    assert (emptied["messages"], emptied["facts"], emptied["usage"]) == ([], [], [])
    assert [f["fact"] for f in (await export_of(fake, BOB_ID))["facts"]] == ["bob likes coffee"]


async def test_an_erase_is_cancelled_by_its_cancel_button_or_by_silence(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Unconfirmed, an erase request cancels itself (the question says so); Cancel does at once; nothing is erased."""
    monkeypatch.setattr(commands.privacy, "ERASE_CONFIRM_SECONDS", 0.3)
    client = await bot.start()
    await say(fake, ALICE_ID, "keep this")
    async with asyncio.timeout(10):
        while "keep this" not in await archived_texts(client):  # noqa: ASYNC110 - the archive has no event
            await asyncio.sleep(0.05)

    [asked] = await privacy(fake, "erase")
    token = asked.path.split("/")[-2]
    await fake.wait_for(lambda: fake.original_response(token)["content"] == ERASE_CANCELLED, what="the timeout")

    [asked] = await privacy(fake, "erase")
    assert asked.body is not None
    buttons = {button["label"]: button["custom_id"] for button in asked.body["data"]["components"][0]["components"]}
    cancelled = await click(fake, fake.original_response(asked.path.split("/")[-2]), buttons["Cancel"])
    assert reply_text(cancelled) == ERASE_CANCELLED
    assert "keep this" in await archived_texts(client)


async def test_a_member_who_opted_out_cannot_regenerate_their_earlier_answer(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """Regenerate makes a model call for the member who clicks it: after opting out, it tells them why, only them,
    and asks the model nothing."""
    client = await bot.start()
    await say(fake, ALICE_ID, f"<@{BOT_ID}> what is it?")
    await fake.wait_for_posts(1)
    await eventually(lambda: client.streams.latest(CHANNEL_ID) is not None)
    [answer] = fake.bot_messages(CHANNEL_ID)
    await privacy(fake, "optout")
    requests = len(llm.requests)
    refused = await use_message_command(fake, "Regenerate", answer, user_id=ALICE_ID)
    assert assert_ephemeral_one_liner(refused) == OPTED_OUT_REFUSAL
    await assert_silent(fake, 1)
    assert len(llm.requests) == requests


async def test_an_erase_outlasts_the_restart_that_reads_her_messages_back(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """Issue 41's done-when: Alice erases; Discord still holds everything she wrote. The restart's catch-up and its
    recheck against Discord read it all back, and still her export and the archive hold none of it, and her
    question is not answered again. What she writes after erasing is kept as usual: erasing is not opting out."""
    fake.add_history(CHANNEL_ID, BOB_ID, "bob wrote before parley came")
    fake.add_history(CHANNEL_ID, ALICE_ID, "alice wrote before parley came")
    client = await bot.start(reconcile_page_pause_seconds=0)
    await say(fake, ALICE_ID, "alice while parley watched")
    await say(fake, ALICE_ID, f"<@{BOT_ID}> alice asks a question")
    await fake.wait_for_posts(1)
    await say(fake, BOB_ID, "bob after her")
    await eventually(lambda: CHANNEL_ID in client.coverage.covered_since and not client.coverage.catching_up, 30)
    async with asyncio.timeout(10):
        while "bob after her" not in await archived_texts(client):  # noqa: ASYNC110 - the archive has no event
            await asyncio.sleep(0.05)
    assert "Erased 3 message(s)" in await erase_by_command(fake)
    await bot.stop()

    client = await bot.start(reconcile_page_pause_seconds=0)
    await eventually(lambda: CHANNEL_ID in client.coverage.covered_since and not client.coverage.catching_up, 30)
    await eventually(lambda: client.coverage.reconciliation.finished, 30)
    await client.gap.settled()
    assert client.archive is not None
    await client.archive.flush()
    assert await client.archive.member_message_ids(GUILD_ID, ALICE_ID) == {}
    # Parley's own answer to her stays, as it wrote it (here the fake model's echo of her question).
    rows = await client.archive.recent(CHANNEL_ID, limit=1000)
    assert [row.content for row in rows if row.author_id != BOT_ID] == ["bob wrote before parley came", "bob after her"]
    exported = await export_of(fake)
    assert exported["messages"] == [] and exported["erased_until"] is not None
    assert len(fake.bot_messages(CHANNEL_ID)) == 1  # her question is not answered again

    await say(fake, ALICE_ID, "alice after erasing")
    async with asyncio.timeout(10):
        while "alice after erasing" not in await archived_texts(client):  # noqa: ASYNC110 - the archive has no event
            await asyncio.sleep(0.05)


async def test_an_edit_after_opting_out_is_neither_archived_nor_heard(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """Alice's words from before she opted out stay as they were; her edit of them afterwards reaches neither the
    archive nor the live conversation the model is shown."""
    client = await bot.start()
    earlier = await say(fake, ALICE_ID, f"<@{BOT_ID}> the plan is A")
    await fake.wait_for_posts(1)
    await privacy(fake, "optout")
    await fake.edit_user_message(CHANNEL_ID, int(earlier["id"]), f"<@{BOT_ID}> the secret plan is B")
    await say(fake, BOB_ID, f"<@{BOT_ID}> what is the plan?")
    await fake.wait_for_posts(2)
    prompt = "\n".join(request_texts(llm.requests[-1]))
    assert "secret" not in prompt
    texts = await archived_texts(client)
    assert "@Parley the plan is A" in texts and not any("secret" in text for text in texts)


async def erase(fake: FakeDiscord, user_id: int = ALICE_ID) -> str:
    """`/parley privacy erase`, confirmed with its Erase button; the line saying what was erased."""
    [asked] = await privacy(fake, "erase", user_id=user_id)
    assert asked.body is not None
    buttons = {button["label"]: button["custom_id"] for button in asked.body["data"]["components"][0]["components"]}
    await click(fake, fake.original_response(asked.path.split("/")[-2]), buttons["Erase"], user_id=user_id)

    def erased() -> list[str]:
        texts = [(call.body or {}).get("content") or "" for call in fake.interaction_calls]
        return [text for text in texts if text.startswith("Erased")]

    await fake.wait_for(lambda: bool(erased()), what="the erasure's answer")
    return erased()[-1]


async def why_text(fake: FakeDiscord, user_id: int = BOB_ID) -> str:
    """What `/parley why` shows a member who may read the channel's history, its 25 latest decisions."""
    return reply_text(await run_command(fake, "why", [option("count", 25)], user_id=user_id))


ASKED = "is the zebra plan on for friday?"
TIMEOUT = 0.3  # seconds of quiet that end a conversation in these tests


async def test_an_erased_members_ask_questions_are_in_no_why_and_no_saved_context(
    archive_url: str, bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """Alice asks with `/ask` in public, a moderator saves the conversation, it ends; after her erase, and again after
    a restart, `/parley why` shows no one her question and the saved conversation no longer quotes it."""
    llm.handler = lambda request: "it is"
    client = await bot.start(database_url=archive_url, conversation_timeout_seconds=TIMEOUT)
    calls = await use_top_command(fake, "ask", [option("question", ASKED)])
    await fake.wait_for(lambda: "it is" in reply_text(calls_for(fake, calls)), what="the /ask answer")
    saved = await run_group_command(fake, "context", "save", [string_option("name", "plans")], permissions=MODERATOR)
    assert "Saved this conversation" in saved
    assert "zebra" in await why_text(fake)
    bot.clock.advance(TIMEOUT * 1.5)
    await eventually(lambda: client.manager.get(CHANNEL_ID) is None)
    assert client.archive is not None
    async with asyncio.timeout(10):  # the summary of the conversation with her question, written once it ended
        while not await client.archive.summaries(CHANNEL_ID):  # noqa: ASYNC110 - the archive has no event
            await asyncio.sleep(0.05)

    await erase(fake)
    assert "zebra" not in await why_text(fake)
    assert await client.archive.summaries(CHANNEL_ID) == []
    await bot.stop()
    client = await bot.start(database_url=archive_url)
    assert client.archive is not None
    assert "zebra" not in await why_text(fake)
    history = await client.archive.snapshot_history(CHANNEL_ID, "plans")
    assert history is not None and "zebra" not in history and str(ALICE_ID) not in history


def remembering_model(fact: str, about: int) -> Callable[[dict[str, Any]], Reply]:
    """A model that, asked to remember, keeps `fact` about the member `about`, then says what the tool said."""

    def answer(request: dict[str, Any]) -> Reply:
        last = request["messages"][-1]
        if last["role"] == "tool":
            return f"tool said: {message_text(last)}"
        if "please remember" in last_user_text(request).rsplit("<new_message", 1)[-1]:
            return ToolCall("remember", {"fact": fact, "about_the_speaker": False, "about_member_id": str(about)})
        return "ok"

    return answer


async def test_a_fact_bob_told_about_alice_is_hers_to_export_forget_and_erase(
    archive_url: str, bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """Bob has Parley remember a fact about Alice (he @mentions her): it is in her export, `/parley memory forget`
    takes its id from her, and her erase removes it (from Bob's export too)."""
    llm.handler = remembering_model("Alice is allergic to peanuts", ALICE_ID)
    await bot.start(database_url=archive_url)
    assert "Remembered" in await say_and_approve(
        fake, BOB_ID, f"<@{BOT_ID}> please remember that <@{ALICE_ID}> is allergic to peanuts"
    )
    [fact] = (await export_of(fake))["facts"]
    assert (fact["fact"], fact["about_you"], fact["told_by_you"]) == ("Alice is allergic to peanuts", True, False)
    await erase(fake)
    assert (await export_of(fake))["facts"] == [] and (await export_of(fake, BOB_ID))["facts"] == []

    await say_and_approve(fake, BOB_ID, f"<@{BOT_ID}> please remember that <@{ALICE_ID}> likes tea")
    [fact] = (await export_of(fake))["facts"]
    forgot = await run_group_command(fake, "memory", "forget", [string_option("target", fact["id"])])
    assert forgot == "Forgot 1 memory."


async def test_a_fact_about_a_member_the_message_does_not_name_is_not_kept(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """The model cannot tie a fact to a member the message asking for it does not name (an @mention or a reply):
    Bob may not make a fact Carol's, so nothing is kept."""
    llm.handler = remembering_model("Carol owes Bob money", CAROL_ID)
    client = await bot.start()
    assert "Nothing was saved" in await say_and_approve(
        fake, BOB_ID, f"<@{BOT_ID}> please remember that Carol owes me money"
    )
    assert client.archive is not None and await client.archive.member_memories(GUILD_ID, CAROL_ID) == []


async def test_a_search_never_matches_what_an_opted_out_member_wrote(
    archive_url: str, bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """Alice's archived words, once she opted out, match no search: not even as a placeholder, which would tell the
    searcher they were said. The tool's search is the archive's."""
    client = await bot.start(database_url=archive_url)
    assert client.archive is not None
    await say(fake, ALICE_ID, "the vault combination is wombat")
    await say(fake, BOB_ID, "wombat is also my favourite animal")
    async with asyncio.timeout(10):
        while len(await client.archive.search(CHANNEL_ID, "wombat")) < 2:  # noqa: ASYNC110 - no archive event
            await asyncio.sleep(0.05)
    await privacy(fake, "optout")
    found = await client.archive.search(CHANNEL_ID, "wombat")
    assert [message.author_id for message in found] == [BOB_ID]


async def test_an_opted_out_members_ask_is_logged_as_a_placeholder(bot: RunningBot, fake: FakeDiscord) -> None:
    """Refused for her opt-out, Alice's `/ask` question is logged for `/parley why` as a placeholder, as her
    messages are: what she asked is not shown to anyone."""
    await bot.start()
    await privacy(fake, "optout")
    calls = await use_top_command(fake, "ask", [option("question", ASKED)])
    await fake.wait_for(
        lambda: any(call.body and OPTED_OUT_REFUSAL in call_text(call) for call in calls_for(fake, calls)),
        what="the refusal",
    )
    shown = await why_text(fake)
    assert "opted_out" in shown and "zebra" not in shown and "Alice" not in shown
