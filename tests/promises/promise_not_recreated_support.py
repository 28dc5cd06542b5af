"""The scene test_promise_not_recreated.py's rows play in: bot.py's client on the fakes and an archive on either
backend, Alice's words that must stay withheld (they hold `WITHHELD`), and every place that could hold them again."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from bot import Parley
from tests.e2e.test_e2e_privacy import erase_by_command, privacy
from tests.fakes.fake_discord import ALICE_ID, BOB_ID, BOT_ID, CHANNEL_ID, GUILD_ID, OTHER_CHANNEL_ID, FakeDiscord
from tests.fakes.fake_llm import FakeLLM
from tests.support.e2e_support import RunningBot, eventually, request_texts, say

# The word only Alice's withheld writing holds: wherever it is found after the state was taken, it was stored again.
WITHHELD = "zanzibar"
# Bounds for polling background work no event announces (catch-up, the recheck, the gap, the pins).
BOUND = 30.0


@dataclass
class Scene:
    """One row's world: the running bot on `database_url`, and how many model requests and posts there were when
    Alice's state was taken (what came before may quote her erased words; nothing after may)."""

    bot: RunningBot
    fake: FakeDiscord
    llm: FakeLLM
    database_url: str
    client: Parley | None = None
    requests_before: int = 0
    posts_before: int = 0

    async def start(self, **overrides: Any) -> Parley:
        self.client = await self.bot.start(database_url=self.database_url, reconcile_page_pause_seconds=0, **overrides)
        return self.client

    async def restart(self) -> Parley:
        """Stop, then start again: catch-up, the recheck against Discord and the pins' comparison run."""
        await self.bot.stop()
        client = await self.start()
        await caught_up(client)
        await eventually(lambda: client.coverage.reconciliation.finished, BOUND)
        await client.gap.settled()
        await pins_settled()
        return client

    def taken(self) -> None:
        """Alice's state was just taken: from here on, nothing may carry her withheld words."""
        self.requests_before = len(self.llm.requests)
        self.posts_before = len(self.fake.bot_messages(CHANNEL_ID))

    async def bob_asks(self) -> None:
        """Bob asks Parley about the channel: the live conversation (and what context it loads) reaches the model."""
        posts = len(self.fake.bot_posts)
        await say(self.fake, BOB_ID, f"<@{BOT_ID}> what has been said here?")
        await self.fake.wait_for_posts(posts + 1)

    async def traces(self) -> list[str]:
        """Every place that holds the withheld word now: the archive's messages and files, the decisions, the
        knowledge base, the moderation cases and their cards, the live conversations, and the model requests and posts
        since the state was taken."""
        client = self.client
        assert client is not None and client.archive is not None
        await client.archive.flush()
        found: list[str] = []
        rows = await client.archive.recent(CHANNEL_ID, limit=10_000)
        for message in await client.archive.messages_by_id([row.message_id for row in rows]):
            files = [f"{file.filename} {file.text}" for file in message.attachments]
            found += [f"archived message {message.message_id}: {text}" for text in (message.content, *files)]
        found += [f"decision: {d.excerpt}" for d in await client.archive.recent_decisions(CHANNEL_ID, 1000)]
        found += [f"decision kept in memory: {d.excerpt}" for d in await client.recent_decisions(CHANNEL_ID, 1000)]
        if client.knowledge is not None:
            hits = await client.knowledge.search(GUILD_ID, WITHHELD, channel_ids=[CHANNEL_ID])
            found += [f"knowledge: {hit.quote}" for hit in hits]
            found += [f"knowledge document: {d.title}" for d in await client.knowledge.documents(GUILD_ID)]
        for conversation in client.manager.live():
            found += [f"conversation: {m.content}" for m in conversation.messages]
            found.append(f"conversation history: {conversation.llm_history}")
        found += [f"model request: {json.dumps(request_texts(r))}" for r in self.llm.requests[self.requests_before :]]
        found += [f"post: {m['content']}" for m in self.fake.bot_messages(CHANNEL_ID)[self.posts_before :]]
        for case in await client.archive.moderation_cases(GUILD_ID, limit=1000):
            found += [f"moderation case {case.id}: {text}" for text in (case.content, case.summary)]
        cards = [m for m in self.fake.bot_messages(OTHER_CHANNEL_ID) if m.get("embeds")]
        found += [f"case card: {json.dumps(card['embeds'])}" for card in cards]
        return [place for place in found if WITHHELD in place.lower()]


@dataclass(frozen=True)
class State:
    """What Alice did: `take` it (in the scene, as a member would, by command)."""

    name: str
    take: Callable[[Scene], Awaitable[None]]
    # Whether her withheld words are those written before taking it (an erasure) or after (an opt-out).
    withholds_earlier: bool


async def _erase(scene: Scene) -> None:
    await erase_by_command(scene.fake)
    scene.taken()


async def _opt_out(scene: Scene) -> None:
    await privacy(scene.fake, "optout")
    scene.taken()


ERASED = State("erased", _erase, withholds_earlier=True)
OPTED_OUT = State("opted_out", _opt_out, withholds_earlier=False)


async def caught_up(client: Parley) -> None:
    await eventually(lambda: CHANNEL_ID in client.coverage.covered_since and not client.coverage.catching_up, BOUND)


async def pins_settled() -> None:
    """Until the pins' background work under way has ended (no event announces it)."""
    async with asyncio.timeout(BOUND):
        while any(task.get_name().startswith("pins-") for task in asyncio.all_tasks()):  # noqa: ASYNC110
            await asyncio.sleep(0.02)


async def archived_contents(client: Parley) -> list[str]:
    assert client.archive is not None
    await client.archive.flush()
    return [row.content for row in await client.archive.recent(CHANNEL_ID, limit=10_000)]


async def archive_has(client: Parley, text: str) -> None:
    """Until the archive holds a message saying `text` (bounded)."""
    async with asyncio.timeout(BOUND):
        while text not in await archived_contents(client):  # noqa: ASYNC110 - the archive has no event
            await asyncio.sleep(0.05)


async def alice_says(scene: Scene, text: str, **options: Any) -> dict[str, Any]:
    return await say(scene.fake, ALICE_ID, text, **options)
