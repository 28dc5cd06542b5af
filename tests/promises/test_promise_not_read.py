"""Promise: once I erase my data in a server, nothing of mine there (my messages and files' text, my /ask questions,
the facts remembered about me, my pins, the conversations that quoted me, my questions to the support desk) is shown
to anyone again by any read, even after Parley restarts. And once I opt out, nothing I write from then on is.

Each row is one read another member (or the model answering them) can make; each runs once Alice erased, and once
she opted out before writing, on both backends. Every read must still show Bob's words around hers, so a read that
shows nothing cannot pass."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta

import pytest
from pydantic_ai.messages import ModelMessagesTypeAdapter, ModelRequest

from archive import ArchivedMessage
from tests.e2e.test_e2e_memory import run_group_command
from tests.e2e.test_e2e_privacy import export_of, why_text
from tests.e2e.test_e2e_support_feedback import report
from tests.fakes.fake_discord import BOB_ID, BOT_ID, CHANNEL_ID, GUILD_ID, FakeDiscord
from tests.fakes.fake_llm import FakeLLM
from tests.promises.promise_not_read_support import BOBS, BOBS_FACT, World, make_world, shows
from tests.support.e2e_support import RunningBot, option, request_texts, run_command, say


def _texts(messages: list[ArchivedMessage]) -> str:
    return "\n".join(f"{m.author_name}: {m.content} {[file.text for file in m.attachments]}" for m in messages)


async def archive_search(world: World) -> str:
    """The archive's search, which the model's search_history tool reads through: by Bob's word and each of hers."""
    assert world.client.archive is not None
    words = (BOBS, *world.hers)
    return "\n".join([_texts(await world.client.archive.search(CHANNEL_ID, word)) for word in words])


async def recent_messages(world: World) -> str:
    """The archive's latest messages, which context loading, catch-ups, digests and get_recent_messages read."""
    assert world.client.archive is not None
    return _texts(await world.client.archive.recent(CHANNEL_ID, limit=1000))


async def parley_why(world: World) -> str:
    """`/parley why` as Bob sees it."""
    return await why_text(world.fake)


async def catchup_input(world: World) -> str:
    """What the model is given to write Bob's `/parley catchup` of the last week."""
    given = len(world.model.summarised)
    await run_command(world.fake, "catchup", [option("since", "1w")], user_id=BOB_ID)
    await world.fake.wait_for(lambda: len(world.model.summarised) > given, what="the catch-up's model call")
    return world.model.summarised[-1]


async def digest_input(world: World) -> str:
    """What the model is given to write the channel's daily digest, once it is due."""
    given = len(world.model.summarised)
    world.bot.clock.advance((world.digest_due + timedelta(seconds=30) - world.bot.clock()).total_seconds())
    await world.client.digests.next_tick()
    await world.fake.wait_for(lambda: len(world.model.summarised) > given, what="the digest's model call")
    return world.model.summarised[-1]


async def knowledge_search(world: World) -> str:
    """The knowledge base's search (the search_knowledge tool's), as a member who may read the channel runs it."""
    assert world.client.knowledge is not None
    hits = [
        hit.quote
        for word in (BOBS, *world.hers)
        for hit in await world.client.knowledge.search(GUILD_ID, word, channel_ids=[CHANNEL_ID])
    ]
    return "\n".join(hits)


async def context_loading(world: World) -> str:
    """What the model is sent to answer Bob's next mention: the conversation, and the context loaded around it."""
    posts = len(world.fake.posts_in(CHANNEL_ID))
    await say(world.fake, BOB_ID, f"<@{BOT_ID}> what was said here?")
    await world.fake.wait_for_posts(posts + 1)
    return "\n".join(request_texts(world.llm.requests[-1]))


async def saved_context(world: World) -> str:
    """What the conversation a moderator saved (`/parley-admin context save`) quotes of the channel, as a restore
    brings it back to the model. The model's own turns are its words, kept as written (upkeep/privacy.py)."""
    assert world.client.archive is not None
    saved = await world.client.archive.snapshot_history(CHANNEL_ID, "plans")
    assert saved is not None
    history = ModelMessagesTypeAdapter.validate_json(saved)
    return "\n".join(
        str(getattr(part, "content", "")) for m in history if isinstance(m, ModelRequest) for part in m.parts
    )


async def memory_facts(world: World) -> str:
    """The facts Bob is shown (`/parley memory list`) and those recalled for him by each of her words."""
    assert world.client.archive is not None
    listed = await run_group_command(world.fake, "memory", "list", user_id=BOB_ID)
    recalled = [
        fact.fact
        for word in world.hers
        for fact in await world.client.archive.recall_memories(
            word, guild_id=GUILD_ID, channel_id=CHANNEL_ID, member_id=BOB_ID, limit=10
        )
    ]
    return "\n".join([listed, *recalled])


async def support_report(world: World) -> str:
    """`/parley-admin support report` as Bob, a moderator: the unanswered questions it lists."""
    return await report(world.fake)


async def bobs_export(world: World) -> str:
    """Bob's `/parley privacy export`."""
    return json.dumps(await export_of(world.fake, BOB_ID))


@dataclass(frozen=True)
class Row:
    read: Callable[[World], Awaitable[str]]
    # Bob's words the read shows, which prove it read something.
    his: str = BOBS


ROWS = {
    "archive_search": Row(archive_search),
    "recent_messages": Row(recent_messages),
    "parley_why": Row(parley_why),
    "catchup_input": Row(catchup_input),
    "digest_input": Row(digest_input),
    "knowledge_search": Row(knowledge_search),
    "context_loading": Row(context_loading),
    "saved_context": Row(saved_context),
    "memory_facts": Row(memory_facts, BOBS_FACT.lower()),
    "another_members_export": Row(bobs_export),
    "support_report": Row(support_report),
}
CASES = [pytest.param(state, name, id=f"{state}-{name}") for state in ("erased", "opted_out") for name in ROWS]


@pytest.mark.parametrize(("state", "read"), CASES)
async def test_nothing_of_hers_is_read(
    state: str, read: str, archive_url: str, bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    world = await make_world(state, archive_url, bot, fake, llm)
    row = ROWS[read]
    async with asyncio.timeout(30):
        shown = await row.read(world)
    assert row.his in shown.lower()
    assert shows(shown, world.hers) == [], _around(shown, shows(shown, world.hers))


def _around(text: str, words: list[str]) -> str:
    at = text.lower().index(words[0]) if words else 0
    return text[max(0, at - 300) : at + 100]
