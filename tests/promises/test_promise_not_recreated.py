"""What I erased with `/parley privacy erase`, or wrote after `/parley privacy optout`, Parley never stores again: no
path that reads messages (a message delivered live or again, or waiting its turn, an edit, the context a conversation
reads from Discord, a member asking Parley about my message, the catch-up and the recheck against Discord after a
restart, the answers to questions from while it was away, the pinned messages it takes into its knowledge base, the
text of my files, a report of my message to the moderators) brings it back into its archive, a conversation, the
model's prompt, its knowledge or a moderation case.

Each row is one path, played end to end (bot.py's client, the fake Discord and model) for each state, on each backend.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from commands.ask_menu import ASK_PARLEY
from commands.report_menu import REASON_ID, REPORT
from edge.asked_about import AUTHOR_ERASED, AUTHOR_OPTED_OUT
from records import ModerationSettings
from tests.fakes.fake_discord import ALICE_ID, BOB_ID, BOT_ID, CHANNEL_ID, GUILD_ID, OTHER_CHANNEL_ID, FakeDiscord
from tests.fakes.fake_llm import FakeLLM
from tests.promises.promise_not_recreated_support import (
    ERASED,
    OPTED_OUT,
    WITHHELD,
    Scene,
    State,
    alice_says,
    archive_has,
    caught_up,
    pins_settled,
)
from tests.support.e2e_support import (
    RunningBot,
    assert_ephemeral_one_liner,
    eventually,
    open_modal,
    say,
    submit_modal,
    use_message_command,
)

Path = Callable[[Scene, State], Awaitable[None]]
# A history older than a catch-up rereads (its newest 100 archived messages): only the recheck reaches it.
LONG_AGO = datetime.now(UTC) - timedelta(days=2)
# Context reaching back past what the archive holds (its retention) is read from Discord's history.
PAST_THE_ARCHIVE_MINUTES = 200 * 24 * 60


async def live_message(scene: Scene, state: State) -> None:
    """Erased: the gateway delivers her message again. Opted out: she writes it."""
    await scene.start()
    if state.withholds_earlier:
        said = await alice_says(scene, f"my {WITHHELD} plan")
        await archive_has(scene.client, f"my {WITHHELD} plan")  # type: ignore[arg-type]
        await state.take(scene)
        await scene.fake.redeliver(int(said["channel_id"]), int(said["id"]))
    else:
        await state.take(scene)
        await alice_says(scene, f"my {WITHHELD} plan")
    await scene.bob_asks()


async def waiting_its_turn(scene: Scene, state: State) -> None:
    """Her question waits its turn behind an answer under way while she takes the state."""
    gate = asyncio.Event()

    async def slow(request: dict[str, Any]) -> str:
        await gate.wait()
        return "Noted."

    scene.llm.handler = slow
    client = await scene.start()
    await say(scene.fake, BOB_ID, f"<@{BOT_ID}> a long question")
    await eventually(lambda: len(scene.llm.requests) == 1)
    if state.withholds_earlier:
        await alice_says(scene, f"<@{BOT_ID}> my {WITHHELD} question")
        await archive_has(client, f"@Parley my {WITHHELD} question")
        await state.take(scene)
    else:
        await state.take(scene)
        await alice_says(scene, f"<@{BOT_ID}> my {WITHHELD} question")
    gate.set()
    await eventually(lambda: client.admission.idle(CHANNEL_ID))
    await scene.bob_asks()


async def edit(scene: Scene, state: State) -> None:
    """She edits a message of hers written before she took the state."""
    await scene.start()
    said = await alice_says(scene, "an early word")
    await archive_has(scene.client, "an early word")  # type: ignore[arg-type]
    await state.take(scene)
    await scene.fake.edit_user_message(CHANNEL_ID, int(said["id"]), f"an early word, now {WITHHELD}")
    await scene.bob_asks()


async def context_from_discord(scene: Scene, state: State) -> None:
    """A new conversation starts from context read back from Discord's history (further back than the archive)."""
    await scene.start(context_max_age_minutes=PAST_THE_ARCHIVE_MINUTES)
    if state.withholds_earlier:
        await alice_says(scene, f"my {WITHHELD} plan")
        await archive_has(scene.client, f"my {WITHHELD} plan")  # type: ignore[arg-type]
        await state.take(scene)
    else:
        await state.take(scene)
        await alice_says(scene, f"my {WITHHELD} plan")
    await scene.bob_asks()


async def asked_about(scene: Scene, state: State) -> None:
    """Bob uses "Ask Parley" on her message: Parley says, to him alone, why it will not read it."""
    await scene.start()
    if state.withholds_earlier:
        said = await alice_says(scene, f"my {WITHHELD} plan")
        await archive_has(scene.client, f"my {WITHHELD} plan")  # type: ignore[arg-type]
        await state.take(scene)
    else:
        await state.take(scene)
        said = await alice_says(scene, f"my {WITHHELD} plan")
    refused = await use_message_command(scene.fake, ASK_PARLEY, said, user_id=BOB_ID)
    assert assert_ephemeral_one_liner(refused) in (AUTHOR_ERASED, AUTHOR_OPTED_OUT)
    await scene.bob_asks()


async def reported(scene: Scene, state: State) -> None:
    """Bob reports her message to the moderators: its case keeps no text of it, and the model reads none."""
    client = await scene.start()
    settings = ModerationSettings(GUILD_ID, OTHER_CHANNEL_ID)
    await client.archive.set_moderation_settings(settings, set_by=BOB_ID, now=datetime.now(UTC))
    if state.withholds_earlier:
        said = await alice_says(scene, f"my {WITHHELD} plan")
        await archive_has(client, f"my {WITHHELD} plan")
        await state.take(scene)
    else:
        await state.take(scene)
        said = await alice_says(scene, f"my {WITHHELD} plan")
    modal = await open_modal(scene.fake, REPORT, said, user_id=BOB_ID)
    await submit_modal(scene.fake, modal, {REASON_ID: "spam"}, user_id=BOB_ID)
    await scene.fake.wait_for_posts(1, OTHER_CHANNEL_ID)
    await scene.bob_asks()


async def catch_up_after_restart(scene: Scene, state: State) -> None:
    """Catch-up reads the channel's recent history back from Discord at the next start."""
    scene.fake.add_history(CHANNEL_ID, BOB_ID, "bob, earlier")
    client = await scene.start()
    await caught_up(client)
    if state.withholds_earlier:
        await alice_says(scene, f"my {WITHHELD} plan")
        await say(scene.fake, BOB_ID, "bob, later")
        await archive_has(client, "bob, later")
        await state.take(scene)
    else:
        await state.take(scene)
        await scene.bot.stop()
        scene.fake.add_history(CHANNEL_ID, ALICE_ID, f"my {WITHHELD} plan, while parley was away")
    await scene.restart()
    await scene.bob_asks()


async def recheck_after_restart(scene: Scene, state: State) -> None:
    """The recheck against Discord walks back past catch-up's range and takes in an edit she made while Parley was
    away."""
    hers = scene.fake.add_history(CHANNEL_ID, ALICE_ID, "an early word", LONG_AGO)
    for n in range(110):
        scene.fake.add_history(CHANNEL_ID, BOB_ID, f"bob {n}", LONG_AGO + timedelta(minutes=n + 1))
    client = await scene.start()
    await caught_up(client)
    await archive_has(client, "bob 109")
    await state.take(scene)
    await scene.bot.stop()
    hers["content"], hers["edited_timestamp"] = f"an early word, now {WITHHELD}", datetime.now(UTC).isoformat()
    await scene.restart()
    await scene.bob_asks()


async def gap_answer(scene: Scene, state: State) -> None:
    """Her question to Parley is found in the gap after a restart, recent enough to be answered."""
    scene.fake.add_history(CHANNEL_ID, BOB_ID, "bob, earlier")
    client = await scene.start()
    await caught_up(client)
    question = f"<@{BOT_ID}> what about {WITHHELD}?"
    if state.withholds_earlier:
        await alice_says(scene, question)
        await scene.fake.wait_for_posts(1)
        await state.take(scene)
        await scene.bot.stop()
    else:
        await state.take(scene)
        await scene.bot.stop()
        scene.fake.add_history(CHANNEL_ID, ALICE_ID, question)
    await scene.restart()
    await scene.bob_asks()
    assert len(scene.fake.bot_messages(CHANNEL_ID)) == scene.posts_before + 1  # Bob's answer only


async def pins(scene: Scene, state: State) -> None:
    """Her message pinned in a channel whose pins are taken into the knowledge base; the pins change again, she
    edits it, and Parley restarts."""
    client = await scene.start()
    await client.pins.turn_on(CHANNEL_ID, GUILD_ID, BOB_ID)
    if state.withholds_earlier:
        hers = await pinned(scene.fake, ALICE_ID, f"Alice's {WITHHELD} notes")
        await pins_settled()
        assert client.knowledge is not None and await client.knowledge.documents(GUILD_ID)
        await state.take(scene)
    else:
        await state.take(scene)
        hers = await pinned(scene.fake, ALICE_ID, f"Alice's {WITHHELD} notes")
    await pinned(scene.fake, BOB_ID, "Bob's notes")
    await scene.fake.edit_user_message(CHANNEL_ID, hers, f"Alice's {WITHHELD} notes, edited")
    await pins_settled()
    client = await scene.restart()
    assert client.knowledge is not None
    assert [d.title.split(",")[0] for d in await client.knowledge.documents(GUILD_ID)] == ["Bob"]


async def file_text(scene: Scene, state: State) -> None:
    """She shares a text file (its name and its text hold the word); erased, it is read back at the next start."""
    scene.fake.add_history(CHANNEL_ID, BOB_ID, "bob, earlier")
    client = await scene.start()
    await caught_up(client)
    notes = scene.fake.served_attachment(f"{WITHHELD}.txt", f"the {WITHHELD} numbers".encode(), "text/plain")
    if state.withholds_earlier:
        said = await alice_says(scene, "my notes", attachments=[notes])
        await read(scene, int(said["id"]))
        await state.take(scene)
        await scene.restart()
    else:
        await state.take(scene)
        await alice_says(scene, "my notes", attachments=[notes])
    await scene.bob_asks()


async def pinned(fake: FakeDiscord, author: int, text: str) -> int:
    message = await fake.send_user_message(CHANNEL_ID, author, text)
    await fake.pin(CHANNEL_ID, int(message["id"]))
    return int(message["id"])


async def read(scene: Scene, message_id: int) -> None:
    """Until the text of the message's file is archived (read in the background, which no event announces)."""
    assert scene.client is not None and scene.client.archive is not None
    archive = scene.client.archive

    async def kept() -> bool:
        await archive.flush()
        found = await archive.messages_by_id([message_id])
        return bool(found and found[0].attachments and found[0].attachments[0].text)

    async with asyncio.timeout(10):
        while not await kept():  # noqa: ASYNC110 - the archive has no event
            await asyncio.sleep(0.05)


PATHS: list[Path] = [
    live_message,
    waiting_its_turn,
    edit,
    context_from_discord,
    asked_about,
    reported,
    catch_up_after_restart,
    recheck_after_restart,
    gap_answer,
    pins,
    file_text,
]
ROWS = [
    pytest.param(state, path, id=f"{state.name}-{path.__name__}") for state in (ERASED, OPTED_OUT) for path in PATHS
]


@pytest.mark.parametrize(("state", "path"), ROWS)
async def test_nothing_withheld_is_stored_again(
    state: State, path: Path, bot: RunningBot, fake: FakeDiscord, llm: FakeLLM, archive_url: str
) -> None:
    llm.handler = lambda request: "Noted."  # an answer that quotes no one
    scene = Scene(bot, fake, llm, archive_url)
    await path(scene, state)
    assert await scene.traces() == []
    # Erasing is not opting out: what she writes afterwards is kept as usual.
    if state is ERASED:
        await alice_says(scene, "alice, afterwards")
        await archive_has(scene.client, "alice, afterwards")  # type: ignore[arg-type]
