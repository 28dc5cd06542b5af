"""The world of test_promise_not_read.py: a server where Alice said, shared, asked and had remembered things, then
erased her data or opted out first; Bob's talk around hers, which every read must still show."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from bot import Parley
from helpdesk.question import SUPPORT_NOT_SURE
from records import Decision, MessageRecord
from tests.e2e.test_e2e_memory import run_group_command, string_option
from tests.e2e.test_e2e_privacy import erase, privacy
from tests.fakes.fake_discord import ALICE_ID, BOB_ID, BOT_ID, CHANNEL_ID, GUILD_ID, FakeDiscord
from tests.fakes.fake_llm import FakeLLM, Reply, ToolCall, last_user_text, message_text
from tests.support.e2e_support import (
    MODERATOR,
    RunningBot,
    call_text,
    calls_for,
    decided,
    option,
    say,
    say_and_approve,
    use_top_command,
)
from upkeep.backfill import RECHECKED_MESSAGES
from upkeep.digests import next_due

# Seconds of quiet that end a conversation: the world's clock moves past it once Alice and Bob have talked.
TIMEOUT = 60
# Bob's words, in his messages, his pin and his fact: every read shows them, so a read that shows nothing fails.
BOBS = "tuesday"
BOBS_FACT = "Bob likes tea"
# Alice's, one word for each kind of thing she leaves: her message, her file's text, her /ask question, the fact she
# told about herself, her pin; and the fact Bob told about her (after an erase only: it is not what she wrote).
HERS = ("zebra", "tango", "quokka", "walnut", "marmot")
ABOUT_HER = "kiwi"
# What the model keeps when asked to remember, by what the message asking says.
FACTS: dict[str, dict[str, Any]] = {
    "I like walnut": {"fact": "Alice likes walnut", "about_the_speaker": True},
    "I like tea": {"fact": BOBS_FACT, "about_the_speaker": True},
    "has an allergy": {"fact": f"Alice is allergic to {ABOUT_HER}", "about_the_speaker": False,
                       "about_member_id": str(ALICE_ID)},
}  # fmt: skip


class Model:
    """The fake model: remembers what it is asked to (`FACTS`), writes a catch-up's or a digest's points on their
    first line, answers anything else "noted"; keeps the catch-ups' and digests' requests, what they were given."""

    def __init__(self) -> None:
        self.summarised: list[str] = []

    def __call__(self, request: dict[str, Any]) -> Reply:
        last = request["messages"][-1]
        if "final_result" in str(request.get("tools")):
            text = last_user_text(request)
            self.summarised.append(text)
            first = re.findall(r"^\[(\d+)\]", text, re.MULTILINE)[0]
            return ToolCall("final_result", {"points": [{"topic": "Talk", "summary": "They talked.", "line": first}]})
        if last["role"] == "tool":
            return f"tool said: {message_text(last)}"
        newest = last_user_text(request).rsplit("<new_message", 1)[-1]
        asked = next((fact for said, fact in FACTS.items() if "please remember" in newest and said in newest), None)
        return "noted" if asked is None else ToolCall("remember", asked)


@dataclass
class World:
    """The running bot once Alice is `state` ("erased" or "opted_out"), and what the reads need."""

    state: str
    bot: RunningBot
    fake: FakeDiscord
    llm: FakeLLM
    model: Model
    client: Parley
    digest_due: datetime

    @property
    def hers(self) -> tuple[str, ...]:
        """Alice's words no read may show: what she wrote, and after an erase what was said about her too."""
        return (*HERS, ABOUT_HER) if self.state == "erased" else HERS


async def make_world(state: str, archive_url: str, bot: RunningBot, fake: FakeDiscord, llm: FakeLLM) -> World:
    """Alice talks, shares a file, asks with /ask, pins and has facts remembered (after opting out, for
    "opted_out"); Bob talks around her, a moderator saves the conversation; then she erases (for "erased"), and
    Parley restarts."""
    model = Model()
    llm.handler = model
    client = await bot.start(database_url=archive_url, conversation_timeout_seconds=TIMEOUT)
    due = await _daily_digest(bot, fake, client)
    assert client.pins is not None
    await client.pins.turn_on(CHANNEL_ID, GUILD_ID, BOB_ID)
    if state == "opted_out":
        await privacy(fake, "optout")
    hers = await _alice_talks(fake, client, answered=state == "erased")
    his = await _bob_talks(fake, client)
    _unanswered_by_the_desk(client, hers, his)
    saved = await run_group_command(
        fake, "context", "save", [string_option("name", "plans")], user_id=BOB_ID, permissions=MODERATOR
    )
    assert "Saved this conversation" in saved
    await _chatter(bot, fake, client)
    if state == "erased":
        assert "Erased" in await erase(fake)
    await bot.stop()
    client = await bot.start(database_url=archive_url, conversation_timeout_seconds=TIMEOUT)
    await _caught_up(client)
    return World(state, bot, fake, llm, model, client, due)


async def _daily_digest(bot: RunningBot, fake: FakeDiscord, client: Parley) -> datetime:
    """A daily digest of the channel, first due one to two hours from now; when."""
    hour = (bot.clock() + timedelta(hours=2)).hour
    await run_group_command(fake, "digest", "on", [option("hour", hour)], user_id=BOB_ID, permissions=MODERATOR)
    assert client.archive is not None
    stored = await client.archive.digest(CHANNEL_ID)
    assert stored is not None
    return next_due(stored, bot.clock(), ZoneInfo("UTC"))


async def _alice_talks(fake: FakeDiscord, client: Parley, *, answered: bool) -> dict[str, Any]:
    """Everything Alice leaves: a message with a file, a pin, a public /ask, a fact about herself (`answered`:
    Parley answers her; else each is met with silence or her refusal); her first message."""
    notes = fake.served_attachment("notes.txt", b"the launch word is tango", "text/plain")
    first = await say(fake, ALICE_ID, "the vault code is zebra", attachments=[notes])
    await fake.pin(CHANNEL_ID, int((await say(fake, ALICE_ID, "my marmot notes"))["id"]))
    calls = await use_top_command(fake, "ask", [option("question", "is the quokka plan on?")])
    await fake.wait_for(lambda: any(call.body and call_text(call) for call in calls_for(fake, calls)), what="/ask")
    if answered:
        await say_and_approve(fake, ALICE_ID, f"<@{BOT_ID}> please remember that I like walnut")
    else:
        await decided(client, await say(fake, ALICE_ID, f"<@{BOT_ID}> please remember that I like walnut"))
    return first


async def _bob_talks(fake: FakeDiscord, client: Parley) -> dict[str, Any]:
    """Bob's words around hers: a message and a pin, a fact about himself and, @mentioning her, one about Alice;
    his first message."""
    first = await say(fake, BOB_ID, f"the deploy notes: {BOBS}")
    await fake.pin(CHANNEL_ID, int(first["id"]))
    for text in (
        f"<@{BOT_ID}> the deploy is on {BOBS}, ok?",
        f"<@{BOT_ID}> please remember that I like tea",
        f"<@{BOT_ID}> please remember that <@{ALICE_ID}> has an allergy",
    ):
        await say_and_approve(fake, BOB_ID, text)
    assert client.archive is not None
    await client.archive.flush()
    return first


def _unanswered_by_the_desk(client: Parley, *messages: dict[str, Any]) -> None:
    """The support desk found no answer to these messages in the documents: its decisions, noted as it notes them
    (which the support report lists)."""
    for message in messages:
        author = message["author"]
        record = MessageRecord(int(message["id"]), CHANNEL_ID, int(author["id"]), author["username"],
                               message["content"], client.manager.clock())  # fmt: skip
        client.decision_log.note(record, Decision(False, SUPPORT_NOT_SURE, "support", 0.2))


async def _chatter(bot: RunningBot, fake: FakeDiscord, client: Parley) -> None:
    """Once the conversation has ended, Bob chats past the restart's recheck of the channel's latest archived
    messages, which from Discord's history would archive hers again (branch `erasure` keeps it from that): these rows
    are about what is read. Outside a conversation, his lines' decisions are not archived, so `/parley why` still
    reaches back to hers."""
    bot.clock.advance(TIMEOUT * 1.5)
    async with asyncio.timeout(10):
        while client.manager.get(CHANNEL_ID) is not None:  # noqa: ASYNC110 - the engine's timer has no event
            await asyncio.sleep(0.02)
    for number in range(RECHECKED_MESSAGES):
        await say(fake, BOB_ID, f"chatter {number} on {BOBS}")
    assert client.archive is not None
    await client.archive.flush()


async def _caught_up(client: Parley) -> None:
    """Until the catch-up at start, and the pins' comparison that takes Bob's in, have ended: no event announces
    them."""
    assert client.knowledge is not None
    async with asyncio.timeout(10):
        while CHANNEL_ID not in client.coverage.covered_since or client.coverage.catching_up:  # noqa: ASYNC110
            await asyncio.sleep(0.02)
        while not await client.knowledge.search(GUILD_ID, BOBS, channel_ids=[CHANNEL_ID]):  # noqa: ASYNC110
            await asyncio.sleep(0.02)
        while any(task.get_name().startswith("pins-") for task in asyncio.all_tasks()):  # noqa: ASYNC110
            await asyncio.sleep(0.02)


def shows(read: str, words: tuple[str, ...]) -> list[str]:
    """The words of `words` that `read` shows (case aside)."""
    return [word for word in words if word in read.lower()]


Read = Callable[[World], Any]
