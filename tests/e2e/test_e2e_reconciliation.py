"""End-to-end: what was deleted, edited or said in a thread archived while Parley was away reaches the archive."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from bot import Parley
from tests.e2e.test_e2e_backfill import CATCH_UP_BOUND, archive_holds, caught_up, stored
from tests.fakes.fake_discord import ALICE_ID, BOB_ID, BOT_ID, CHANNEL_ID, GUILD_ID, FakeDiscord
from tests.fakes.fake_llm import FakeLLM
from tests.support.e2e_support import RunningBot, eventually, reply_text, run_command

START = datetime.now(UTC) - timedelta(days=5)


async def reconciled(client: Parley) -> None:
    """Wait (bounded) until this session's recheck of the archive against Discord has ended."""
    await eventually(lambda: client.coverage.reconciliation.finished, CATCH_UP_BOUND)


async def walked_a_page(client: Parley) -> None:
    """Wait (bounded) until this session's recheck has walked a page of #general."""
    await eventually(
        lambda: "rechecked back" in (client.coverage.reconciliation.describe(GUILD_ID) or ""), CATCH_UP_BOUND
    )


async def test_deletions_and_edits_beyond_the_newest_hundred_while_down(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """A message from the archive's older range deleted while Parley was down is gone from search once the recheck
    has run, an edited one shows its edit, and /parley status says how far the recheck got."""
    said = [fake.add_history(CHANNEL_ID, BOB_ID, f"archived word{n}", START + timedelta(minutes=n)) for n in range(150)]
    client = await bot.start(reconcile_page_pause_seconds=0)
    await archive_holds(client, stored(fake))
    await reconciled(client)
    await bot.stop()
    deleted, edited = int(said[5]["id"]), fake.channels[CHANNEL_ID].find(int(said[6]["id"]))
    assert edited is not None
    fake.forget_messages(CHANNEL_ID, deleted)
    edited["content"], edited["edited_timestamp"] = "rewritten while down", datetime.now(UTC).isoformat()

    client = await bot.start(reconcile_page_pause_seconds=0)
    await reconciled(client)
    assert client.archive is not None
    await client.archive.flush()
    assert await client.archive.search(CHANNEL_ID, "word5") == []
    [found] = await client.archive.search(CHANNEL_ID, "rewritten")
    assert (found.message_id, found.content) == (int(edited["id"]), "rewritten while down")
    status = reply_text(await run_command(fake, "status"))
    assert re.search(r"^Recheck of the archive against Discord: (\d+)/\1 channels done$", status, re.MULTILINE)


async def test_status_shows_how_far_a_walk_has_got(bot: RunningBot, fake: FakeDiscord, llm: FakeLLM) -> None:
    """While a channel is walked, /parley status names it and the oldest point rechecked."""
    said = [fake.add_history(CHANNEL_ID, BOB_ID, f"archived word{n}", START + timedelta(minutes=n)) for n in range(150)]
    client = await bot.start(reconcile_page_pause_seconds=60)  # the walk waits after its first page
    await caught_up(client)
    reached = datetime.fromisoformat(said[50]["timestamp"])
    await walked_a_page(client)
    status = reply_text(await run_command(fake, "status"))
    assert f"channels done; <#{CHANNEL_ID}> rechecked back to {reached:%Y-%m-%d %H:%M} UTC" in status
    assert "Recheck of the archive against Discord: 0/" in status


async def test_a_thread_archived_while_down_is_caught_up(bot: RunningBot, fake: FakeDiscord, llm: FakeLLM) -> None:
    """Messages a thread got before it was archived while Parley was down reach the archive."""
    client = await bot.start()
    thread_id = await fake.create_thread(CHANNEL_ID, "plans")
    await fake.send_user_message(thread_id, ALICE_ID, "said while Parley watched")
    await caught_up(client)
    await archive_holds(client, stored(fake, thread_id), thread_id)
    await bot.stop()
    fake.add_history(thread_id, BOB_ID, "said in the thread while Parley was down")
    await fake.update_thread(thread_id, archived=True)

    client = await bot.start()
    await archive_holds(client, stored(fake, thread_id), thread_id)
    assert len(stored(fake, thread_id)) == 2


async def test_a_restart_goes_on_where_the_recheck_stopped(bot: RunningBot, fake: FakeDiscord, llm: FakeLLM) -> None:
    """A recheck stopped by a restart goes on below the page it had reached, with a pass from the restart queued."""
    said = [fake.add_history(CHANNEL_ID, BOB_ID, f"archived word{n}", START + timedelta(minutes=n)) for n in range(250)]
    client = await bot.start(reconcile_page_pause_seconds=60)  # each walk waits after its first page
    await walked_a_page(client)
    assert client.archive is not None
    first = (await client.archive.reconciliation_progress())[CHANNEL_ID]
    assert first.reached_id == int(said[150]["id"]) and first.again_id is None
    await bot.stop()

    client = await bot.start(reconcile_page_pause_seconds=60)
    await walked_a_page(client)
    assert client.archive is not None
    resumed = (await client.archive.reconciliation_progress())[CHANNEL_ID]
    assert (resumed.upto_id, resumed.reached_id) == (first.upto_id, int(said[50]["id"]))
    assert resumed.again_id is not None and resumed.again_id > first.upto_id


async def test_a_private_thread_archived_while_down_is_caught_up(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """A private thread Parley was in, archived while it was down, is caught up too."""
    client = await bot.start()
    joined = await fake.create_thread(CHANNEL_ID, "ours", private=True, members=[ALICE_ID, BOT_ID])
    await fake.send_user_message(joined, ALICE_ID, "said while Parley watched")
    await caught_up(client)
    await archive_holds(client, stored(fake, joined), joined)
    await bot.stop()
    fake.add_history(joined, ALICE_ID, "said in the private thread while Parley was down")
    await fake.update_thread(joined, archived=True)

    client = await bot.start()
    await archive_holds(client, stored(fake, joined), joined)
    assert len(stored(fake, joined)) == 2
