"""End-to-end: catch-up after downtime, and Discord failures around an answer, with the real client and the fakes."""

from __future__ import annotations

import asyncio
import contextlib
import re
import signal
import socket
import sqlite3
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot import Parley
from tests.fakes.fake_discord import ALICE_ID, BOB_ID, BOT_ID, CAROL_ID, CHANNEL_ID, OTHER_CHANNEL_ID, FakeDiscord
from tests.fakes.fake_llm import FakeLLM
from tests.support.e2e_support import (
    RunningBot,
    assert_silent,
    bot_environment,
    eventually,
    request_texts,
    run_bot_py,
    say,
    start_bot_py,
)

CATCH_UP_BOUND = 30.0  # seconds after READY within which catch-up must be done: a bound for polling only


async def archived(client: Parley, channel_id: int = CHANNEL_ID) -> dict[int, str]:
    """The channel's archived messages, id to text, once everything queued is committed."""
    assert client.archive is not None
    await client.archive.flush()
    rows = await client.archive.recent(channel_id, limit=100_000)
    return {row.message_id: row.content for row in rows}


async def archive_holds(client: Parley, expected: dict[int, str], channel_id: int = CHANNEL_ID) -> None:
    """Wait (bounded) until the channel's archive is exactly `expected`."""
    await archive_holds_ids(client, set(expected), channel_id)
    now = await archived(client, channel_id)
    assert now == expected


async def archive_holds_ids(client: Parley, expected: set[int], channel_id: int = CHANNEL_ID) -> None:
    """Wait (bounded) until the channel's archive holds exactly the messages `expected`."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(CATCH_UP_BOUND):
            while set(await archived(client, channel_id)) != expected:  # noqa: ASYNC110 - the archive has no event
                await asyncio.sleep(0.05)
    now = await archived(client, channel_id)
    assert (sorted(now.keys() - expected), sorted(expected - now.keys())) == ([], [])


async def caught_up(client: Parley) -> None:
    """Wait (bounded) until this session's catch-up has covered #general and finished."""
    await eventually(
        lambda: CHANNEL_ID in client.coverage.covered_since and not client.coverage.catching_up, CATCH_UP_BOUND
    )


def stored(fake: FakeDiscord, channel_id: int = CHANNEL_ID) -> dict[int, str]:
    return {int(message["id"]): message["content"] for message in fake.messages(channel_id)}


async def test_catch_up_archives_missed_messages_edits_and_deletions(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """Messages posted, edited and deleted while the bot was down reach the archive as Discord now has them."""
    client = await bot.start()
    kept = await say(fake, BOB_ID, "before the outage")
    edited = await say(fake, CAROL_ID, "typo befor the outage")
    deleted = await say(fake, CAROL_ID, "regrettable words")
    await archive_holds(client, stored(fake))
    await bot.stop()
    for number in range(250):  # three history pages of 100
        fake.add_history(CHANNEL_ID, ALICE_ID if number % 2 else BOB_ID, f"missed message {number}")
    fake.add_history(OTHER_CHANNEL_ID, ALICE_ID, "missed in #random")
    edit = fake.channels[CHANNEL_ID].find(int(edited["id"]))
    assert edit is not None
    edit["content"] = "no typo before the outage"  # edited while down: Discord dates every edit
    edit["edited_timestamp"] = datetime.now(UTC).isoformat()
    fake.forget_messages(CHANNEL_ID, int(deleted["id"]))
    client = await bot.start()
    await archive_holds(client, stored(fake))
    await archive_holds(client, stored(fake, OTHER_CHANNEL_ID), OTHER_CHANNEL_ID)
    now = await archived(client)
    assert now[int(kept["id"])] == "before the outage" and int(deleted["id"]) not in now
    assert now[int(edited["id"])] == "no typo before the outage"


async def test_catch_up_keeps_what_the_gateway_said_of_an_archived_message(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """A message Discord's history returns again keeps its author's server nickname from the gateway's copy."""
    fake.users[CAROL_ID] = replace(fake.users[CAROL_ID], nick="Parley")
    client = await bot.start()
    said = await say(fake, CAROL_ID, "nicknamed before the outage")
    await archive_holds(client, stored(fake))
    await bot.stop()
    client = await bot.start()
    await caught_up(client)
    assert client.archive is not None
    [row] = await client.archive.recent(CHANNEL_ID)
    assert (row.message_id, row.author_name) == (int(said["id"]), "Parley")


async def test_a_channel_never_archived_gets_at_most_the_cap_newest_first(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """A channel the archive has never seen is caught up with only its newest BACKFILL_MAX_MESSAGES messages."""
    for number in range(30):
        fake.add_history(CHANNEL_ID, BOB_ID, f"old message {number}")
    newest = dict(list(stored(fake).items())[-12:])
    client = await bot.start(backfill_max_messages=12)
    await archive_holds(client, newest)


async def test_catch_up_keeps_to_the_retention(bot: RunningBot, fake: FakeDiscord, llm: FakeLLM) -> None:
    """Messages older than HISTORY_RETENTION_DAYS are not fetched back into the archive."""
    fake.add_history(CHANNEL_ID, BOB_ID, "from last month", datetime.now(UTC) - timedelta(days=30))
    recent = fake.add_history(CHANNEL_ID, BOB_ID, "from yesterday", datetime.now(UTC) - timedelta(days=1))
    client = await bot.start(history_retention_days=7)
    await archive_holds(client, {int(recent["id"]): "from yesterday"})


async def test_context_after_catch_up_comes_from_the_archive(bot: RunningBot, fake: FakeDiscord, llm: FakeLLM) -> None:
    """Once catch-up has covered a channel, a new conversation's context is read from the archive, not Discord."""
    client = await bot.start()
    await say(fake, BOB_ID, "archived before the restart")
    await archive_holds(client, stored(fake))
    await caught_up(client)
    await bot.stop()
    fake.add_history(CHANNEL_ID, CAROL_ID, "the deploy broke while the bot was down")
    client = await bot.start()
    await caught_up(client)
    # The recheck of the archive against Discord (upkeep/reconciliation.py) follows catch-up and reads history
    # too: counted before the mention, its reads are not taken for the new conversation's.
    await eventually(lambda: client.coverage.reconciliation.finished, CATCH_UP_BOUND)
    history_reads = len([r for r in fake.requests if r.method == "GET" and "/messages?" in r.path])
    await say(fake, ALICE_ID, f"<@{BOT_ID}> what broke?")
    await fake.wait_for_posts(1)
    assert len([r for r in fake.requests if r.method == "GET" and "/messages?" in r.path]) == history_reads
    assert "the deploy broke while the bot was down" in request_texts(llm.requests[0])[-1]


async def test_no_catch_up_when_backfill_max_messages_is_zero(bot: RunningBot, fake: FakeDiscord, llm: FakeLLM) -> None:
    """BACKFILL_MAX_MESSAGES=0 turns catch-up off: nothing missed is fetched."""
    fake.add_history(CHANNEL_ID, BOB_ID, "said while the bot was down")
    client = await bot.start(backfill_max_messages=0)
    live = await say(fake, ALICE_ID, "said while the bot was up")
    await archive_holds(client, {int(live["id"]): "said while the bot was up"})
    assert client.coverage.covered_since == {}


# --- A real `python bot.py`, killed mid-stream ----------------------------------------------------

STREAM_RATE = 1_000  # messages a second
STREAM_MAX = 60_000  # bounds the stream should a step hang


async def stream(fake: FakeDiscord, stop: asyncio.Event) -> int:
    """Post messages to #general at STREAM_RATE until `stop` (or STREAM_MAX); how many were posted."""
    posted = 0
    loop = asyncio.get_running_loop()
    started = loop.time()
    while not stop.is_set() and posted < STREAM_MAX:
        await say(fake, BOB_ID if posted % 2 else CAROL_ID, f"stream message {posted}")
        posted += 1
        # Paced against the clock, so slow steps are made up for and the rate holds on average.
        ahead = started + posted / STREAM_RATE - loop.time()
        if ahead > 0:
            await asyncio.sleep(ahead)
    return posted


def archived_rows(database: Path) -> list[int]:
    """The ids of #general's rows in the archive file as another process sees it (empty before it exists)."""
    if not database.exists():
        return []
    with contextlib.closing(sqlite3.connect(f"file:{database}?mode=ro", uri=True)) as db:
        try:
            return [row[0] for row in db.execute("SELECT message_id FROM messages WHERE channel_id = ?", (CHANNEL_ID,))]
        except sqlite3.OperationalError:  # not migrated yet
            return []


async def start_bot_py_logging(env: dict[str, str], log: Path) -> asyncio.subprocess.Process:
    """`python bot.py` in `log`'s folder, its output appended to `log`: a pipe nobody reads would fill and stall it."""
    with log.open("ab") as output:
        return await start_bot_py(env, log.parent, output=output)


async def wait_for_rows(database: Path, predicate: Callable[[list[int]], bool], what: str) -> list[int]:
    """Poll the archive file (bounded by CATCH_UP_BOUND) until its #general rows satisfy `predicate`."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(CATCH_UP_BOUND):
            while not predicate(archived_rows(database)):  # noqa: ASYNC110 - another process's file has no event
                await asyncio.sleep(0.2)
    rows = archived_rows(database)
    assert predicate(rows), what
    return rows


@pytest.mark.slow
async def test_kill_9_mid_stream_loses_nothing_after_the_restart(
    fake: FakeDiscord, llm: FakeLLM, tmp_path: Path
) -> None:
    """`kill -9` during a 1,000/s stream that goes on while the bot is down: after the restart every message
    is archived once, and one deleted while it was down is gone."""
    database = tmp_path / "parley.db"
    # The downtime includes a new process's start-up, a few seconds of stream at this rate.
    env = bot_environment(fake, llm, database, BACKFILL_MAX_MESSAGES="100000")
    log = tmp_path / "bot.log"
    first = await start_bot_py_logging(env, log)
    second: asyncio.subprocess.Process | None = None
    stop = asyncio.Event()
    streaming: asyncio.Task[int] | None = None
    try:
        await fake.wait_for_ready(timeout=30)
        streaming = asyncio.create_task(stream(fake, stop))
        rows = await wait_for_rows(database, lambda rows: len(rows) >= 500, "the first process archives the stream")
        first.send_signal(signal.SIGKILL)
        await first.wait()
        await asyncio.sleep(0.5)  # the stream goes on while the bot is down
        newest_archived = sorted(archived_rows(database))
        deleted = newest_archived[-20]
        fake.forget_messages(CHANNEL_ID, deleted)
        second = await start_bot_py_logging(env, log)
        await fake.wait_for_ready(timeout=30, sessions=2)
        stop.set()
        posted = await streaming
        expected = set(stored(fake))
        rows = await wait_for_rows(database, lambda rows: set(rows) == expected, "every message archived after READY")
    finally:
        stop.set()
        for process in (first, second):
            if process is not None and process.returncode is None:
                process.kill()
                await process.wait()
    assert len(rows) == len(expected) == posted - 1
    assert deleted not in rows and len(newest_archived) < posted - 1
    assert "Traceback" not in log.read_text()


# --- Discord failures around an answer -------------------------------------------------------------


@pytest.mark.parametrize("status", [429, 500])
async def test_a_failed_answer_post_is_retried_and_posted_once(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM, status: int
) -> None:
    """A 429 (Discord's retry_after body and headers) or a 500 on the answer's POST ends in exactly one answer,
    recorded once in the conversation and the archive."""
    client = await bot.start()
    fake.fail_next_posts(1, status=status, retry_after=0.05)
    question = await say(fake, ALICE_ID, f"<@{BOT_ID}> are you there?")
    [post] = await fake.wait_for_posts(1, timeout=15)
    await assert_silent(fake, 1)
    statuses = [r.status for r in fake.requests if r.method == "POST" and r.path.endswith(f"/{CHANNEL_ID}/messages")]
    assert statuses == [status, 200]
    assert post.reply_to == int(question["id"])
    conversation = client.manager.get(CHANNEL_ID)
    assert conversation is not None
    await eventually(lambda: len(conversation.llm_history) == 2)
    assert [m.message_id for m in conversation.messages].count(int(post.message["id"])) == 1
    await archive_holds_ids(client, set(stored(fake)))


@pytest.mark.parametrize("close_code", [1006, 4000])
async def test_a_dropped_gateway_resumes_and_the_follow_up_is_answered_with_history(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM, close_code: int
) -> None:
    """A gateway cut (1006) or closed with 4000 mid-conversation is resumed, the follow-up sent meanwhile is
    answered once with the conversation's history, and nothing is missing from the archive."""
    client = await bot.start()
    await say(fake, ALICE_ID, f"<@{BOT_ID}> remember the word pelican")
    await fake.wait_for_posts(1)
    await fake.drop_gateway(close_code)
    await say(fake, ALICE_ID, "what word did I ask you to remember?")  # a follow-up, sent while disconnected
    await fake.wait_for(lambda: bool(fake.resumes), timeout=15, what="RESUME")
    posts = await fake.wait_for_posts(2, timeout=15)
    await assert_silent(fake, 2)
    assert len(fake.identifies) == 1 and len(posts) == 2
    assert "what word did I ask you to remember?" in posts[1].content
    assert any("remember the word pelican" in text for text in request_texts(llm.requests[1]))
    await archive_holds_ids(client, set(stored(fake)))


# --- A quiet, clear start ------------------------------------------------------------------------------


INFO_RECORD = re.compile(r"^\d{4}-\d\d-\d\d [\d:,]+ INFO ")


async def run_bot_py_quietly(env: dict[str, str], cwd: Path) -> tuple[int, list[str]]:
    """Run `python bot.py` until it exits (bounded); its exit code and what it wrote to stderr beside INFO logs."""
    code, stderr = await run_bot_py(env, cwd)
    return code, [line for line in stderr.splitlines() if not INFO_RECORD.match(line)]


@pytest.mark.slow
async def test_a_rejected_token_is_one_line_and_exit_2(fake: FakeDiscord, llm: FakeLLM, tmp_path: Path) -> None:
    """A token Discord answers 401 to stops `python bot.py` with one line naming DISCORD_TOKEN, exit 2."""
    env = {**bot_environment(fake, llm, tmp_path / "parley.db"), "DISCORD_TOKEN": "not-the-token"}
    code, lines = await run_bot_py_quietly(env, tmp_path)
    assert (code, lines) == (2, ["Configuration error: DISCORD_TOKEN was rejected by Discord"])


@pytest.mark.slow
async def test_an_unreachable_gateway_is_one_line_and_exit_1(fake: FakeDiscord, llm: FakeLLM, tmp_path: Path) -> None:
    """A gateway address nothing answers at stops `python bot.py` with one line, exit 1 (so Railway retries)."""
    with contextlib.closing(socket.socket()) as unused:
        unused.bind(("127.0.0.1", 0))
        closed_port = unused.getsockname()[1]
    env = {
        **bot_environment(fake, llm, tmp_path / "parley.db"),
        "DISCORD_GATEWAY_URL": f"ws://127.0.0.1:{closed_port}/",
    }
    code, lines = await run_bot_py_quietly(env, tmp_path)
    assert code == 1 and len(lines) == 1 and lines[0].startswith("Could not reach Discord: "), lines


@pytest.mark.slow
async def test_a_missing_model_key_is_one_line_and_exit_2(fake: FakeDiscord, llm: FakeLLM, tmp_path: Path) -> None:
    """The default model without OPENAI_API_KEY: one line naming the variable and the model, exit 2."""
    env = bot_environment(fake, llm, tmp_path / "parley.db")
    del env["LLM_MODEL"], env["LLM_BASE_URL"]
    code, lines = await run_bot_py_quietly(env, tmp_path)
    assert code == 2 and len(lines) == 1, lines
    assert "OPENAI_API_KEY" in lines[0] and "LLM_MODEL=" in lines[0]
    assert fake.requests == []


@pytest.mark.slow
async def test_a_normal_start_shows_no_voice_warning(fake: FakeDiscord, llm: FakeLLM, tmp_path: Path) -> None:
    """`python bot.py` starting normally says nothing about voice support (PyNaCl, davey), which Parley never uses."""
    log = tmp_path / "bot.log"
    process = await start_bot_py_logging(bot_environment(fake, llm, tmp_path / "parley.db"), log)
    try:
        await fake.wait_for_ready(timeout=30)
        process.send_signal(signal.SIGTERM)
        await asyncio.wait_for(process.wait(), 30)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    output = log.read_text()
    assert process.returncode == 0 and "connected to Gateway" in output
    assert "voice" not in output.lower() and "WARNING" not in output
