"""Every message is decided and answered at most once: however a member's message reaches Parley (live, replayed by
a resumed gateway session, caught up after a gap, or seen by two Parley processes sharing one archive), it gets one
answer, and `/parley why` holds one decision about it."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from answering.gap import GapQuestions
from answering.outcome import APOLOGY
from archive import ArchiveWriteFailed
from bot import Parley
from tests.conftest import migrated_postgres_database
from tests.e2e.test_e2e_backfill import CATCH_UP_BOUND
from tests.e2e.test_e2e_support import THRESHOLD, WAIT, add_handbook
from tests.fakes.fake_discord import ALICE_ID, BOT_ID, CHANNEL_ID, GUILD_ID, FakeDiscord
from tests.fakes.fake_llm import Error, FakeLLM, allow_model_requests, echo
from tests.support.e2e_support import RunningBot, assert_silent, eventually, say, settled

QUESTION = f"<@{BOT_ID}> what is the capital of Peru?"
FOLLOW_UP = "and of Chile?"


@dataclass
class Scene:
    """The fake Discord and model, one archive, and the Parley processes started on it."""

    fake: FakeDiscord
    llm: FakeLLM
    tmp_path: Path
    database_url: str
    processes: list[RunningBot] = field(default_factory=list)

    async def start(self, **overrides: Any) -> Parley:
        process = RunningBot(self.fake, self.llm, self.tmp_path / f"process-{len(self.processes)}")
        self.processes.append(process)
        return await process.start(database_url=self.database_url, **overrides)

    async def stop(self) -> None:
        for process in self.processes:
            await process.stop()

    @property
    def client(self) -> Parley:
        client = self.processes[-1].client
        assert client is not None
        return client


# --- The paths a message can take to Parley --------------------------------------------------------------------


async def live(scene: Scene) -> dict[str, Any]:
    """A mention, delivered once by the gateway."""
    await scene.start()
    question = await say(scene.fake, ALICE_ID, QUESTION)
    await scene.fake.wait_for_posts(1)
    return question


async def resume_replay(scene: Scene) -> dict[str, Any]:
    """The mention is answered; the connection drops (1006) and the resumed session replays it (the gateway
    delivers at least once)."""
    question = await live(scene)
    await replayed_after_a_drop(scene, question)
    return question


async def replayed_after_a_drop(scene: Scene, message: dict[str, Any]) -> None:
    fake = scene.fake
    events = fake.events_of(0)
    creates = [i for i, (name, data) in enumerate(events) if name == "MESSAGE_CREATE" and data["id"] == message["id"]]
    fake.resume_replays_seen = len(events) - creates[0]
    resumes = len(fake.resumes)
    await fake.drop_gateway(1006)
    await fake.wait_for(lambda: len(fake.resumes) > resumes, timeout=15, what="RESUME")


async def catch_up_answer(scene: Scene) -> dict[str, Any]:
    """Parley is stopped; the mention is sent meanwhile; catch-up finds it on the next start and answers it."""
    await scene.start()
    await scene.stop()
    question = scene.fake.add_history(CHANNEL_ID, ALICE_ID, QUESTION)
    await scene.start()
    await scene.fake.wait_for_posts(1, timeout=CATCH_UP_BOUND)
    return question


async def catch_up_then_replay(scene: Scene) -> dict[str, Any]:
    """Catch-up answers the mention, then the gateway delivers the same MESSAGE_CREATE."""
    question = await catch_up_answer(scene)
    await scene.fake.redeliver(CHANNEL_ID, int(question["id"]))
    return question


async def replay_then_catch_up(scene: Scene) -> dict[str, Any]:
    """The mention is answered live and replayed on a resume; then catch-up reads it from the history too."""
    question = await resume_replay(scene)
    await handed_to_catch_up(scene.client, question)
    return question


async def handed_to_catch_up(client: Parley, message: dict[str, Any]) -> None:
    """What catch-up does with a message it read from the channel's history that the archive lacked."""
    gap, channel, archive = client.gap, client.get_channel(CHANNEL_ID), client.archive
    assert isinstance(gap, GapQuestions) and channel is not None and archive is not None
    gap.found(await channel.fetch_message(int(message["id"])))  # type: ignore[union-attr]
    gap.caught_up(CHANNEL_ID)
    await gap.settled()


async def two_processes(scene: Scene) -> dict[str, Any]:
    """While a deployment reshards, the old shard count's process and the new count's both serve the server and
    both get its MESSAGE_CREATE; they share one Postgres archive."""
    fake = scene.fake
    fake.reshard_overlap = True
    shards = [(2, 0), (7, 1)]
    assert all(fake.shard_of(GUILD_ID, count) == shard for count, shard in shards)
    for count, shard in shards:
        await scene.start(shard_count=count, shard_ids=frozenset({shard}))
    question = await say(fake, ALICE_ID, QUESTION)
    await fake.wait_for_posts(1)
    return question


async def refused_then_replay(scene: Scene) -> dict[str, Any]:
    """A member the access lists keep out mentions Parley: told why once, and its `not_allowed` decision is logged
    once, though the resumed session replays the mention."""
    muted = scene.fake.add_role("muted", members=[ALICE_ID])
    await scene.start(blocked_roles=frozenset({muted}))
    question = await say(scene.fake, ALICE_ID, QUESTION)
    await scene.fake.wait_for_posts(1)
    await replayed_after_a_drop(scene, question)
    return question


async def model_fails_then_replay(scene: Scene) -> dict[str, Any]:
    """The model fails on the mention: Parley's apology is its answer; a replay of the mention is not answered."""
    failures = [Error(500, "the model is down", retryable=False)]
    scene.llm.handler = lambda request: failures.pop() if failures else echo(request)
    question = await live(scene)
    assert scene.fake.posts_in(CHANNEL_ID)[0].content == APOLOGY
    await scene.fake.redeliver(CHANNEL_ID, int(question["id"]))
    return question


async def take_up_fails_then_replay(scene: Scene) -> dict[str, Any]:
    """Deciding the mention fails unexpectedly and nothing goes out: its claim is given back, so the gateway's next
    delivery of it is answered."""
    client = await scene.start()
    failed = asyncio.Event()
    with pytest.MonkeyPatch.context() as patch:

        def broken(*args: Any) -> Any:
            failed.set()
            raise RuntimeError("the decider broke")

        patch.setattr(client.pipeline.decider, "decide_now", broken)
        question = await say(scene.fake, ALICE_ID, QUESTION)
        await asyncio.wait_for(failed.wait(), 5)
    await scene.fake.redeliver(CHANNEL_ID, int(question["id"]))
    await scene.fake.wait_for_posts(1)
    return question


async def claim_unstored_then_replay(scene: Scene) -> dict[str, Any]:
    """The archive cannot store the mention's claim: it is left undecided (another process might have it), not
    claimed, so the gateway's next delivery of it is answered."""
    client = await scene.start()
    archive = client.archive
    assert archive is not None
    failed = asyncio.Event()
    with pytest.MonkeyPatch.context() as patch:

        async def unstored(*args: Any) -> bool:
            failed.set()
            raise ArchiveWriteFailed("the database is down")

        patch.setattr(archive, "claim_message", unstored)
        question = await say(scene.fake, ALICE_ID, QUESTION)
        await asyncio.wait_for(failed.wait(), 5)
    await scene.fake.redeliver(CHANNEL_ID, int(question["id"]))
    await scene.fake.wait_for_posts(1)
    return question


async def _follow_up_during(scene: Scene, fault: Callable[[FakeDiscord], Awaitable[None]]) -> dict[str, Any]:
    """Mid-conversation the gateway fails; the asker's plain follow-up is sent before the session is back."""
    fake = scene.fake
    client = await scene.start()
    await say(fake, ALICE_ID, QUESTION)
    await fake.wait_for_posts(1)
    conversation = client.manager.get(CHANNEL_ID)
    assert conversation is not None
    await eventually(lambda: bool(conversation.llm_history))
    sessions = len(fake.resumes) + len(fake.identifies)
    await fault(fake)
    follow_up = await say(fake, ALICE_ID, FOLLOW_UP)
    await fake.wait_for(lambda: len(fake.resumes) + len(fake.identifies) > sessions, timeout=15, what="a session")
    await fake.wait_for_posts(2, timeout=CATCH_UP_BOUND)
    return follow_up


async def reconnect_asked(fake: FakeDiscord) -> None:
    await fake.force_reconnect()


async def dropped(fake: FakeDiscord) -> None:
    await fake.drop_gateway(1006)


async def closed_4000(fake: FakeDiscord) -> None:
    await fake.drop_gateway(4000)


async def resume_refused(fake: FakeDiscord) -> None:
    fake.refuse_resumes = True
    await fake.drop_gateway(1006)


async def follow_up_during_op_7(scene: Scene) -> dict[str, Any]:
    return await _follow_up_during(scene, reconnect_asked)


async def follow_up_during_1006(scene: Scene) -> dict[str, Any]:
    return await _follow_up_during(scene, dropped)


async def follow_up_during_4000(scene: Scene) -> dict[str, Any]:
    return await _follow_up_during(scene, closed_4000)


async def follow_up_during_refused_resume(scene: Scene) -> dict[str, Any]:
    return await _follow_up_during(scene, resume_refused)


# --- The support desk's way: a question nobody addressed, answered after its wait from the documents ---------------

SUPPORT_QUESTION = "which port does the web interface listen on?"


async def support_desk_started(scene: Scene, **overrides: Any) -> Parley:
    """A process whose #general is in support mode, with a handbook that answers SUPPORT_QUESTION."""
    client = await scene.start(knowledge_answer_threshold=THRESHOLD, **overrides)
    await client.desk.set_support(CHANNEL_ID, GUILD_ID, True, set_by=ALICE_ID)
    await add_handbook(client)
    return client


async def support_waits_out(scene: Scene) -> None:
    """Once every process has handled what it was sent, every process's desk past the question's wait."""
    await settled(scene.fake)
    for process in scene.processes:
        if process.client is not None:
            process.clock.advance(WAIT)
            await process.client.desk.ticks.next_tick()


async def support_question(scene: Scene) -> dict[str, Any]:
    """A question nobody addressed in a support channel, answered by the desk after the wait."""
    await support_desk_started(scene)
    question = await say(scene.fake, ALICE_ID, SUPPORT_QUESTION)
    await support_waits_out(scene)
    await scene.fake.wait_for_posts(1)
    return question


async def support_question_then_replay(scene: Scene) -> dict[str, Any]:
    """The desk answers the question; the resumed session replays it, and the desk's next tick comes."""
    question = await support_question(scene)
    await replayed_after_a_drop(scene, question)
    await support_waits_out(scene)
    return question


async def support_question_two_processes(scene: Scene) -> dict[str, Any]:
    """Two processes sharing one Postgres archive both get the question (a reshard) and both wait it out."""
    fake = scene.fake
    fake.reshard_overlap = True
    shards = [(2, 0), (7, 1)]
    await support_desk_started(scene, shard_count=shards[0][0], shard_ids=frozenset({shards[0][1]}))
    await scene.start(knowledge_answer_threshold=THRESHOLD, shard_count=7, shard_ids=frozenset({1}))
    question = await say(fake, ALICE_ID, SUPPORT_QUESTION)
    await support_waits_out(scene)
    await fake.wait_for_posts(1)
    return question


Delivery = Callable[[Scene], Awaitable[dict[str, Any]]]
SHARED_ARCHIVE_ONLY = {two_processes, support_question_two_processes}
# discord.py waits up to 5 seconds before it identifies again after a refused RESUME.
SLOW = {follow_up_during_refused_resume}
PATHS: list[Delivery] = [
    live,
    resume_replay,
    catch_up_answer,
    catch_up_then_replay,
    replay_then_catch_up,
    two_processes,
    refused_then_replay,
    model_fails_then_replay,
    take_up_fails_then_replay,
    claim_unstored_then_replay,
    follow_up_during_op_7,
    follow_up_during_1006,
    follow_up_during_4000,
    follow_up_during_refused_resume,
    support_question,
    support_question_then_replay,
    support_question_two_processes,
]
ROWS = [
    pytest.param(path, backend, id=f"{path.__name__}-{backend}", marks=[pytest.mark.slow] if path in SLOW else [])
    for path in PATHS
    for backend in ("sqlite", "postgres")
    if backend == "postgres" or path not in SHARED_ARCHIVE_ONLY
]


async def archive_url(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'parley.db'}"
    return await migrated_postgres_database(request)


async def decisions_about(scene: Scene, message: dict[str, Any]) -> int:
    """How many decisions about the message the archive holds (every process's, committed)."""
    for process in scene.processes:
        if process.client is not None and process.client.archive is not None:
            await process.client.archive.flush()
    archive = scene.client.archive
    assert archive is not None
    return sum(row.message_id == int(message["id"]) for row in await archive.recent_decisions(CHANNEL_ID, 1000))


@pytest.mark.parametrize(("path", "backend"), ROWS)
async def test_a_message_is_decided_and_answered_once(
    fake: FakeDiscord,
    llm: FakeLLM,
    tmp_path: Path,
    discord_endpoints: None,
    request: pytest.FixtureRequest,
    path: Delivery,
    backend: str,
) -> None:
    scene = Scene(fake, llm, tmp_path, await archive_url(backend, tmp_path, request))
    with allow_model_requests():
        try:
            message = await path(scene)
            answers = len(fake.posts_in(CHANNEL_ID))
            await assert_silent(fake, answers)
            replies = [post for post in fake.posts_in(CHANNEL_ID) if post.reply_to == int(message["id"])]
            assert len(replies) == 1
            assert await decisions_about(scene, message) == 1
        finally:
            await scene.stop()
    assert fake.handler_errors == [] and llm.handler_errors == []
