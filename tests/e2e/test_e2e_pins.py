"""End-to-end: pinned messages of an opted-in channel in the knowledge base (edge/pins.py), kept in step with what
the fake Discord's pins, unpins, edits and deletions say, with bot.py's client."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Collection
from functools import partial

import discord
import pytest

from bot import Parley
from edge.readable import readable_channel_ids
from tests.e2e.test_e2e_ask import ask as ask_command
from tests.e2e.test_e2e_attachments import png
from tests.e2e.test_e2e_knowledge import ADMIN, KnowledgeModel, ask, knowledge_command
from tests.e2e.test_e2e_privacy import erase_by_command, privacy
from tests.fakes.fake_discord import (
    ALICE_ID,
    BOB_ID,
    BOT_ID,
    BOT_PERMISSIONS,
    CHANNEL_ID,
    EVERYONE_PERMISSIONS,
    GUILD_ID,
    OTHER_CHANNEL_ID,
    FakeDiscord,
    InteractionCall,
)
from tests.fakes.fake_llm import FakeLLM
from tests.support.e2e_support import MEMBER, RunningBot, command_payload, reply_text, say

PINS_ROUTE = "GET /channels/{channel_id}/messages/pins"


async def pins_command(
    fake: FakeDiscord,
    setting: str,
    *,
    permissions: discord.Permissions = ADMIN,
    parley_may: discord.Permissions = EVERYONE_PERMISSIONS | BOT_PERMISSIONS,
    channel_id: int = CHANNEL_ID,
) -> str:
    """`/parley-admin knowledge pins <setting>` in #general (or `channel_id`), Parley having `parley_may` there; its
    one-line reply."""
    payload = command_payload(fake, "knowledge", permissions=permissions, channel_id=channel_id)
    setting_option = {"type": 3, "name": "setting", "value": setting}
    pins = {"type": 1, "name": "pins", "options": [setting_option]}
    payload["data"]["options"] = [{"type": 2, "name": "knowledge", "options": [pins]}]
    payload["app_permissions"] = str(parley_may.value)
    token = payload["token"]

    def calls() -> list[InteractionCall]:
        return [call for call in fake.interaction_calls if f"/{token}" in call.path]

    await fake.dispatch("INTERACTION_CREATE", payload)
    await fake.wait_for(lambda: bool(calls()), what=f"/parley-admin knowledge pins {setting} answered")
    return reply_text(calls())


async def until(check: Callable[[], Awaitable[bool]], timeout: float = 5.0) -> None:
    """Wait for the pins' background work, which no event announces: the knowledge base is read until `check`."""
    async with asyncio.timeout(timeout):
        while not await check():  # noqa: ASYNC110 - the knowledge base has no event to wait on
            await asyncio.sleep(0.02)


async def found(client: Parley, query: str, channels: Collection[int] = (CHANNEL_ID,)) -> list[str]:
    """The quotes a search by a member who may read `channels` finds."""
    assert client.knowledge is not None
    return [hit.quote for hit in await client.knowledge.search(GUILD_ID, query, channel_ids=channels)]


async def sources(client: Parley) -> set[str]:
    assert client.knowledge is not None
    return {document.source for document in await client.knowledge.documents(GUILD_ID)}


async def settled() -> None:
    """Until the pins' background work under way (what the events that reached the client started) has ended."""

    async def idle() -> bool:
        return not any(task.get_name().startswith("pins-") for task in asyncio.all_tasks())

    await until(idle)


async def pinned(fake: FakeDiscord, text: str, author: int = ALICE_ID, channel_id: int = CHANNEL_ID) -> int:
    message = await fake.send_user_message(channel_id, author, text)
    await fake.pin(channel_id, int(message["id"]))
    return int(message["id"])


async def test_pins_follow_pins_unpins_edits_and_deletions_and_reach_only_the_channels_readers(
    fake: FakeDiscord, bot: RunningBot
) -> None:
    client = await bot.start()
    first = await pinned(fake, "Deploy checklist\n\nRun the migrations before the release.")
    await client.pins.turn_on(CHANNEL_ID, GUILD_ID, ALICE_ID)
    await until(lambda: _has(client, "migrations"))
    assert await found(client, "migrations", channels=(OTHER_CHANNEL_ID,)) == []
    assert client.knowledge is not None
    [document] = await client.knowledge.documents(GUILD_ID)
    assert document.source == f"pin:{CHANNEL_ID}:{first}" and document.channel_id == CHANNEL_ID
    assert document.title.startswith("Alice, ") and document.title.endswith(": Deploy checklist")

    await fake.edit_user_message(CHANNEL_ID, first, "Deploy checklist\n\nRun the smoke tests after the release.")
    await until(lambda: _has(client, "smoke"))
    assert await found(client, "migrations") == []

    second = await pinned(fake, "The on-call rota lives in the wiki.", author=BOB_ID)
    await until(lambda: _has(client, "rota"))
    await fake.unpin(CHANNEL_ID, first)
    await until(lambda: _lacks(client, "smoke"))
    # Discord sends no CHANNEL_PINS_UPDATE for a deleted pinned message; the deletion itself takes it out.
    await fake.delete_messages(CHANNEL_ID, second)
    await until(lambda: _lacks(client, "rota"))
    assert await sources(client) == set()


async def test_a_pin_is_found_by_search_knowledge_until_unpinned_and_only_by_those_who_may_read_its_channel(
    fake: FakeDiscord, bot: RunningBot, llm: FakeLLM
) -> None:
    """The issue's "done when": `/parley-admin knowledge pins on` in a channel; a message pinned there answers a
    question through search_knowledge, and no longer once unpinned; a pin in a channel that is not opted in is never
    taken; a pin in #random, which only Alice may read, is not searched for Bob, and for Alice only where no one
    else reads the answer: in #random itself or privately, never in #general."""
    llm.handler = model = KnowledgeModel()
    fake.keep_private(OTHER_CHANNEL_ID, readers=[ALICE_ID])
    client = await bot.start()
    reply = await pins_command(fake, "on")
    assert reply.startswith(f"Pinned messages in <#{CHANNEL_ID}> now go into the knowledge base")
    assert "Read Message History" not in reply
    staging = await pinned(fake, "The staging server is staging.example.org, port 8443.")
    await pinned(fake, "The backup bucket is kept for ninety days.", channel_id=OTHER_CHANNEL_ID)
    await until(lambda: _has(client, "staging"))
    await settled()

    answer = await ask(fake, "what is the staging server?")
    assert answer.startswith('"The staging server is staging.example.org, port 8443."')
    assert "backup bucket" not in await ask(fake, "how long is the backup bucket kept?", ALICE_ID)

    # #random opted in too: its pin is found for Alice, who may read #random, not for Bob; and not in #general.
    status = await pins_command(fake, "status")
    assert (
        status == f"Pinned messages in <#{CHANNEL_ID}> go into the knowledge base: it holds 1 pinned message from here."
    )
    await client.pins.turn_on(OTHER_CHANNEL_ID, GUILD_ID, ALICE_ID)
    await until(lambda: _has(client, "bucket", channels=(OTHER_CHANNEL_ID,)))
    assert await ask(fake, "how long is the backup bucket kept?", BOB_ID) == "The documents don't cover that."
    assert await ask(fake, "how long is the backup bucket kept?", ALICE_ID) == "The documents don't cover that."
    assert "ninety days" in await ask_in(fake, OTHER_CHANNEL_ID, "how long is the backup bucket kept?", ALICE_ID)
    private = await ask_command(fake, "how long is the backup bucket kept?", private=True, user_id=ALICE_ID)
    assert "ninety days" in reply_text(private)

    await fake.unpin(CHANNEL_ID, staging)
    await until(lambda: _lacks(client, "staging"))
    assert "staging.example.org" not in await ask(fake, "what is the staging server?")
    assert not any("staging.example.org" in result for result in model.tool_results[-1:])


async def test_a_pin_of_a_channel_everyone_may_read_is_found_from_another_channel(
    fake: FakeDiscord, bot: RunningBot, llm: FakeLLM
) -> None:
    llm.handler = KnowledgeModel()
    client = await bot.start()
    await client.pins.turn_on(OTHER_CHANNEL_ID, GUILD_ID, ALICE_ID)
    await pinned(fake, "The backup bucket is kept for ninety days.", channel_id=OTHER_CHANNEL_ID)
    await until(lambda: _has(client, "bucket", channels=(OTHER_CHANNEL_ID,)))
    assert "ninety days" in await ask(fake, "how long is the backup bucket kept?", BOB_ID)


async def ask_in(fake: FakeDiscord, channel_id: int, text: str, author: int) -> str:
    """`ask` (test_e2e_knowledge) in another channel than #general: the channel's latest post once answered."""
    before = len(fake.posts_in(channel_id))
    await fake.send_user_message(channel_id, author, f"<@{BOT_ID}> {text}")
    await fake.wait_for_posts(before + 1, channel_id)
    return fake.posts_in(channel_id)[-1].content


async def test_members_cannot_set_a_channels_pins_and_admins_are_told_what_parley_lacks(
    fake: FakeDiscord, bot: RunningBot
) -> None:
    client = await bot.start()
    reply = await pins_command(fake, "on", permissions=MEMBER)
    assert reply == "You need the Manage Channels permission in this channel to use /parley-admin knowledge pins."
    assert client.archive is not None and not await client.archive.pins_taken(CHANNEL_ID)
    off = await pins_command(fake, "off")
    assert off.endswith("no longer go into the knowledge base; 0 pinned messages taken in before were removed.")

    no_history = EVERYONE_PERMISSIONS | BOT_PERMISSIONS
    no_history.read_message_history = False
    reply = await pins_command(fake, "on", parley_may=no_history)
    assert reply.endswith(
        " Parley cannot read the pins here yet: grant it View Channel and Read Message History in this channel."
    )
    assert await client.archive.pins_taken(CHANNEL_ID)


async def test_a_private_threads_pins_stay_with_its_members(fake: FakeDiscord, bot: RunningBot) -> None:
    """Discord lets only a private thread's members (and those who manage threads) read it, though its channel's
    permissions say otherwise: its pins cannot be turned on, and it counts as readable only for them."""
    client = await bot.start()
    thread_id = await fake.create_thread(CHANNEL_ID, "staff only", private=True, members=[ALICE_ID])
    reply = await pins_command(fake, "on", channel_id=thread_id)
    assert reply == "A private thread's pinned messages cannot go into the knowledge base: its members alone read them."
    assert client.archive is not None and not await client.archive.pins_taken(thread_id)

    guild = client.get_guild(GUILD_ID)
    assert guild is not None
    alice, bob = await guild.fetch_member(ALICE_ID), await guild.fetch_member(BOB_ID)
    assert thread_id in readable_channel_ids(guild, alice)
    assert CHANNEL_ID in readable_channel_ids(guild, bob) and thread_id not in readable_channel_ids(guild, bob)


async def test_knowledge_list_shows_a_channels_pins_only_to_those_who_may_read_it(
    fake: FakeDiscord, bot: RunningBot
) -> None:
    fake.keep_private(OTHER_CHANNEL_ID, readers=[ALICE_ID])
    client = await bot.start()
    await client.pins.turn_on(OTHER_CHANNEL_ID, GUILD_ID, ALICE_ID)
    await pinned(fake, "The backup bucket is kept for ninety days.", channel_id=OTHER_CHANNEL_ID)
    await until(lambda: _has(client, "bucket", channels=(OTHER_CHANNEL_ID,)))

    assert "ninety days" in await knowledge_command(fake, "list", user_id=ALICE_ID)
    listing = await knowledge_command(fake, "list", user_id=BOB_ID)
    assert "ninety days" not in listing and "no documents" in listing


async def test_a_pin_in_a_channel_not_opted_in_is_never_taken(fake: FakeDiscord, bot: RunningBot) -> None:
    client = await bot.start()
    await client.pins.turn_on(CHANNEL_ID, GUILD_ID, ALICE_ID)
    await pinned(fake, "Secret roadmap for the random channel.", channel_id=OTHER_CHANNEL_ID)
    taken = await pinned(fake, "Public roadmap for everyone.")
    await until(lambda: _has(client, "public"))
    await settled()
    assert await sources(client) == {f"pin:{CHANNEL_ID}:{taken}"}
    assert await found(client, "secret", channels=(CHANNEL_ID, OTHER_CHANNEL_ID)) == []


async def test_an_opted_out_members_pins_are_not_taken_and_leave_when_they_opt_out(
    fake: FakeDiscord, bot: RunningBot
) -> None:
    client = await bot.start()
    await client.admission.optouts.set(GUILD_ID, BOB_ID, True)
    await client.pins.turn_on(CHANNEL_ID, GUILD_ID, ALICE_ID)
    await pinned(fake, "Bob's private notes on the budget.", author=BOB_ID)
    await pinned(fake, "Alice's notes on the launch.")
    await until(lambda: _has(client, "launch"))
    await settled()
    assert await found(client, "budget") == []

    # Alice opts out after her pin was taken in: it leaves at once, with no change to the channel's pins.
    await privacy(fake, "optout", user_id=ALICE_ID)
    await until(lambda: _lacks(client, "launch"))
    # And it stays out when the channel is compared again.
    await pinned(fake, "Carol's notes on the offsite.", author=fake.carol_id)
    await until(lambda: _has(client, "offsite"))
    await settled()
    assert await found(client, "launch") == []


async def test_an_erase_takes_the_members_pins_out_and_no_comparison_brings_them_back(
    fake: FakeDiscord, bot: RunningBot
) -> None:
    """Alice erases her data: her pin (its text and her name) leaves the knowledge base at once, and stays out when
    she edits it, when the channel's pins change, and at the restart's comparison; Bob's pin stays."""
    client = await bot.start()
    await client.pins.turn_on(CHANNEL_ID, GUILD_ID, ALICE_ID)
    hers = await pinned(fake, "Alice's notes on the launch.")
    await pinned(fake, "Bob's notes on the budget.", author=BOB_ID)
    await until(lambda: _has(client, "launch"))
    await until(lambda: _has(client, "budget"))
    await settled()

    await erase_by_command(fake)
    await until(lambda: _lacks(client, "launch"))
    await fake.edit_user_message(CHANNEL_ID, hers, "Alice's notes on the launch, edited.")
    await pinned(fake, "Carol's notes on the offsite.", author=fake.carol_id)
    await until(lambda: _has(client, "offsite"))
    await settled()
    await bot.stop()
    client = await bot.start()
    await settled()
    await until(lambda: _has(client, "offsite"))
    await settled()
    assert await found(client, "launch") == [] and await found(client, "budget")
    assert client.knowledge is not None
    assert not any(d.title.startswith("Alice") for d in await client.knowledge.documents(GUILD_ID))


async def test_turning_off_removes_the_channels_pins_and_stops_taking_them(fake: FakeDiscord, bot: RunningBot) -> None:
    client = await bot.start()
    await client.pins.turn_on(CHANNEL_ID, GUILD_ID, ALICE_ID)
    await pinned(fake, "The office wifi password rotates monthly.")
    await until(lambda: _has(client, "wifi"))
    assert await client.pins.status(CHANNEL_ID, GUILD_ID) == (True, 1)

    assert await client.pins.turn_off(CHANNEL_ID, GUILD_ID, ALICE_ID) == 1
    await pinned(fake, "The printer is on the second floor.")
    # A pin in another opted-in channel, after: once it is in, the pin above has been seen and left out.
    await client.pins.turn_on(OTHER_CHANNEL_ID, GUILD_ID, ALICE_ID)
    elsewhere = await pinned(fake, "Lunch is at noon.", channel_id=OTHER_CHANNEL_ID)
    await until(lambda: _has(client, "lunch", channels=(OTHER_CHANNEL_ID,)))
    await settled()
    assert await sources(client) == {f"pin:{OTHER_CHANNEL_ID}:{elsewhere}"}
    assert await client.pins.status(CHANNEL_ID, GUILD_ID) == (False, 0)


async def test_turning_off_during_a_comparison_leaves_none_of_the_channels_pins(
    fake: FakeDiscord, bot: RunningBot
) -> None:
    """A comparison that read the setting before `off` and adds afterwards is followed by one that removes."""
    client = await bot.start()
    message = await say(fake, ALICE_ID, "The release train leaves on Tuesdays.")
    await fake.pin(CHANNEL_ID, int(message["id"]), quietly=True)
    fake.held_routes.add(PINS_ROUTE)
    await client.pins.turn_on(CHANNEL_ID, GUILD_ID, ALICE_ID)
    await fake.wait_for(lambda: PINS_ROUTE in fake.reached_held_routes, what="the comparison reading the pins")
    assert await client.pins.turn_off(CHANNEL_ID, GUILD_ID, ALICE_ID) == 0
    fake.release(PINS_ROUTE)
    await settled()
    assert await sources(client) == set()


async def test_pins_changed_while_parley_was_away_are_caught_up_at_start(fake: FakeDiscord, bot: RunningBot) -> None:
    client = await bot.start()
    await client.pins.turn_on(CHANNEL_ID, GUILD_ID, ALICE_ID)
    kept = await pinned(fake, "Standup is at nine.")
    dropped = await pinned(fake, "Retro is on Fridays.")
    await until(lambda: _has(client, "retro"))
    await bot.stop()

    message = await say(fake, ALICE_ID, "Demo day is the last Thursday.")
    await fake.pin(CHANNEL_ID, int(message["id"]), quietly=True)
    await fake.unpin(CHANNEL_ID, dropped, quietly=True)
    client = await bot.start()
    await until(lambda: _has(client, "demo"))
    await until(lambda: _lacks(client, "retro"))
    assert await sources(client) == {f"pin:{CHANNEL_ID}:{kept}", f"pin:{CHANNEL_ID}:{message['id']}"}


async def test_pins_of_a_channel_turned_off_by_another_process_leave_at_start(
    fake: FakeDiscord, bot: RunningBot
) -> None:
    client = await bot.start()
    await client.pins.turn_on(CHANNEL_ID, GUILD_ID, ALICE_ID)
    await client.pins.turn_on(OTHER_CHANNEL_ID, GUILD_ID, ALICE_ID)
    await pinned(fake, "Standup is at nine.")
    kept = await pinned(fake, "Retro is on Fridays.", channel_id=OTHER_CHANNEL_ID)
    await until(lambda: _has(client, "standup"))
    await until(lambda: _has(client, "retro", channels=(OTHER_CHANNEL_ID,)))
    # Another process's `off`: the setting changed, the documents not.
    assert client.archive is not None
    await client.archive.set_pins_taken(CHANNEL_ID, GUILD_ID, False, set_by=ALICE_ID)
    await bot.stop()

    client = await bot.start()
    await until(lambda: _lacks(client, "standup"))
    await settled()
    assert await sources(client) == {f"pin:{OTHER_CHANNEL_ID}:{kept}"}


async def test_pins_that_cannot_be_read_leave_the_knowledge_as_it_was(
    fake: FakeDiscord, bot: RunningBot, caplog: pytest.LogCaptureFixture
) -> None:
    client = await bot.start()
    await client.pins.turn_on(CHANNEL_ID, GUILD_ID, ALICE_ID)
    kept = await pinned(fake, "Backups run nightly.")
    await until(lambda: _has(client, "backups"))

    for status in (403, 503):
        fake.pin_failures[CHANNEL_ID] = status
        with caplog.at_level(logging.WARNING, "parley.pins"):
            await fake.unpin(CHANNEL_ID, kept)
            await until(partial(_logged, caplog, f"pins of channel {CHANNEL_ID} not read ({status}"))
        await settled()
        assert await sources(client) == {f"pin:{CHANNEL_ID}:{kept}"}
        await fake.pin(CHANNEL_ID, kept, quietly=True)

    del fake.pin_failures[CHANNEL_ID]
    await fake.unpin(CHANNEL_ID, kept)
    await until(lambda: _lacks(client, "backups"))


async def test_a_pins_text_files_are_taken_in_with_their_names_as_headings(fake: FakeDiscord, bot: RunningBot) -> None:
    client = await bot.start()
    await client.pins.turn_on(CHANNEL_ID, GUILD_ID, ALICE_ID)
    runbook = fake.served_attachment("runbook.md", b"# Restarts\n\nDrain the queue before restarting the broker.\n")
    message = await say(fake, ALICE_ID, "The runbook, attached.", attachments=[runbook])
    await fake.pin(CHANNEL_ID, int(message["id"]))
    await until(lambda: _has(client, "broker"))
    assert client.knowledge is not None
    [hit] = await client.knowledge.search(GUILD_ID, "broker", channel_ids=(CHANNEL_ID,))
    assert hit.heading == "runbook.md > Restarts"


async def test_an_image_alone_pinned_is_not_taken_in(fake: FakeDiscord, bot: RunningBot) -> None:
    """Images are not read: a pin of an image without words would be a document with nothing to find."""
    client = await bot.start()
    await client.pins.turn_on(CHANNEL_ID, GUILD_ID, ALICE_ID)
    picture = fake.served_attachment("chart.png", png(), "image/png")
    image_only = await say(fake, ALICE_ID, "", attachments=[picture])
    await fake.pin(CHANNEL_ID, int(image_only["id"]))
    taken = await pinned(fake, "The chart is updated on Mondays.")
    await until(lambda: _has(client, "chart"))
    await settled()
    assert await sources(client) == {f"pin:{CHANNEL_ID}:{taken}"}


async def test_pins_on_is_refused_where_there_are_no_text_channel_pins(fake: FakeDiscord, bot: RunningBot) -> None:
    category_id = fake.add_category("Info", [OTHER_CHANNEL_ID])
    client = await bot.start()
    reply = await pins_command(fake, "on", channel_id=category_id)
    assert reply == "Only the pinned messages of text channels and threads can go into the knowledge base."
    assert client.archive is not None and not await client.archive.pins_taken(category_id)


async def _has(client: Parley, word: str, channels: Collection[int] = (CHANNEL_ID,)) -> bool:
    return bool(await found(client, word, channels))


async def _lacks(client: Parley, word: str) -> bool:
    return not await found(client, word)


async def _logged(caplog: pytest.LogCaptureFixture, text: str) -> bool:
    return text in caplog.text
