"""The paths of test_promise_access.py: each has Bob ask Parley one way, and says whether he was served.

Bob holds one role (the fake's Newcomers role, which every server of the fake has). A path starts the bot with the
rule's settings (`World.start`), lets Bob ask, and answers True if Parley went on to serve him (a model call for him,
a reminder set or posted), False if it turned him down.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import discord

from bot import Parley
from tests.e2e.test_e2e_ask_menu import ask_parley
from tests.e2e.test_e2e_catchup import catching_up
from tests.e2e.test_e2e_reminders import moved_on, remind
from tests.e2e.test_e2e_support import COVERED, THRESHOLD, add_handbook, after_the_wait
from tests.fakes.fake_discord import (
    ALICE_ID,
    BOB_ID,
    BOT_ID,
    CHANNEL_ID,
    GUILD_ID,
    NEWCOMER_ROLE_ID,
    FakeDiscord,
    InteractionCall,
)
from tests.fakes.fake_llm import FakeLLM
from tests.support.e2e_support import (
    EPHEMERAL,
    MEMBER,
    RunningBot,
    call_text,
    calls_for,
    command_payload,
    eventually,
    option,
    reply_text,
    run_command,
    say,
    settled,
    use_message_command,
    use_top_command,
)

ROLE = NEWCOMER_ROLE_ID
ADMIN = MEMBER | discord.Permissions(manage_guild=True)
# The role as Discord's role picker resolves it (https://discord.com/developers/docs/topics/permissions#role-object).
NEWCOMERS = {
    "id": str(ROLE),
    "name": "Newcomers",
    "colors": {"primary_color": 0},
    "hoist": False,
    "mentionable": False,
    "flags": 0,
    "position": 3,
    "managed": False,
    "permissions": "0",
}
# What a command shows while it works: not its outcome.
PROGRESS = ("Reading what was said", "Summarising", "Writing that answer again")


@dataclass(frozen=True)
class Rule:
    """An admin's rule naming Bob's role, and whether Bob is to be served under it.

    `settings` are the deploy's (BLOCKED_ROLES, ALLOWED_ROLES, ROLE_LIMITS); `command` is the same list set by
    `/parley-admin access` instead ("block" or "allow"), for paths that must be served first and judged after;
    `spent`: Bob has used his role's tokens for today before he asks.
    """

    name: str
    settings: dict[str, Any]
    command: str | None
    served: bool
    spent: bool = False


BLOCKED = Rule("blocked", {"blocked_roles": frozenset({ROLE})}, "block", served=False)
ALLOWED = Rule("allowed", {"allowed_roles": frozenset({ROLE})}, "allow", served=True)
# His role has 1 token a day, which he has used: his role's limit turns him down, the member defaults would not.
LIMITED = Rule("limited", {"role_limits": f"{ROLE}:0:1"}, None, served=False, spent=True)


@dataclass
class World:
    """The fake Discord, the model, the bot under test and the archive it keeps, for one row."""

    fake: FakeDiscord
    llm: FakeLLM
    bot: RunningBot
    tmp_path: Path
    rule: Rule
    database_url: str
    others: list[RunningBot] = field(default_factory=list)

    async def start(self, *, rule: bool = True, **settings: Any) -> Parley:
        """Start (or start again) the bot, under the rule's settings unless `rule` is False."""
        applied = self.rule.settings if rule else {}
        client = await self.bot.start(database_url=self.database_url, **applied, **settings)
        if rule and self.rule.spent:
            client.usage.record(GUILD_ID, CHANNEL_ID, BOB_ID, 10, 10)
        return client

    async def stop(self) -> None:
        await self.bot.stop()
        for other in self.others:
            await other.stop()


Path_ = Callable[[World], Awaitable[bool]]


async def decision_on(client: Parley, channel_id: int, message: dict[str, Any]) -> bool:
    """Whether the bot decided to answer the message, once it has decided."""
    message_id = int(message["id"])

    def found() -> bool | None:
        entries = client.decisions.recent(channel_id)
        return next((entry.respond for entry in entries if entry.message_id == message_id), None)

    await eventually(lambda: found() is not None, timeout=10)
    return bool(found())


async def live(world: World) -> bool:
    client = await world.start()
    return await decision_on(client, CHANNEL_ID, await say(world.fake, BOB_ID, f"<@{BOT_ID}> what's new?"))


async def gap(world: World) -> bool:
    """Bob asks while Parley is stopped; it reads his question from the channel's history when it is back."""
    await world.start()
    await world.bot.stop()
    question = world.fake.add_history(CHANNEL_ID, BOB_ID, f"<@{BOT_ID}> what did I miss?")
    client = await world.start()
    return await decision_on(client, CHANNEL_ID, question)


async def support_question(world: World) -> bool:
    """Bob asks #general, in support mode, a question nobody addressed, which the documents answer: once the desk's
    wait is over, whether Parley answered it."""
    client = await world.start(knowledge_answer_threshold=THRESHOLD)
    await client.desk.set_support(CHANNEL_ID, GUILD_ID, True, set_by=BOB_ID)
    await add_handbook(client)
    question = await say(world.fake, BOB_ID, COVERED)
    await after_the_wait(world.bot, client)
    await settled(world.fake)
    return any(post.reply_to == int(question["id"]) for post in world.fake.posts_in(CHANNEL_ID))


async def direct_message(world: World) -> bool:
    client = await world.start(direct_messages=True)
    sent = await world.fake.send_dm(BOB_ID, "hello?")
    return await decision_on(client, world.fake.dm_channel(BOB_ID), sent)


async def access_command(fake: FakeDiscord, listed: str, channel_id: int = CHANNEL_ID) -> str:
    """`/parley-admin access <listed> role:<Bob's role>` used by an admin in `channel_id`'s server."""
    payload = command_payload(fake, "access", permissions=ADMIN, channel_id=channel_id)
    options = [{"type": 8, "name": "role", "value": str(ROLE)}]
    payload["data"]["options"] = [
        {"type": 2, "name": "access", "options": [{"type": 1, "name": listed, "options": options}]}
    ]
    payload["data"]["resolved"] = {"roles": {str(ROLE): NEWCOMERS}}
    token = payload["token"]

    def calls() -> list[InteractionCall]:
        return [call for call in fake.interaction_calls if f"/{token}" in call.path]

    await fake.dispatch("INTERACTION_CREATE", payload)
    await fake.wait_for(lambda: len(calls()) >= 1, what=f"/parley-admin access {listed} answered")
    return reply_text(calls())


async def direct_message_served_by_another_process(world: World) -> bool:
    """Two processes share a Postgres archive: shard 1's serves a second server, where an admin sets the rule by
    command; shard 0's gets Bob's DMs (Discord sends every DM to shard 0) and has never seen that server."""
    other_guild, other_channel = await world.fake.add_guild("Second", shard=(1, 2))
    other = RunningBot(world.fake, world.llm, world.tmp_path / "shard1")
    world.others.append(other)
    await other.start(database_url=world.database_url, shard_count=2, shard_ids=frozenset({1}))
    assert world.rule.command is not None
    said = await access_command(world.fake, world.rule.command, other_channel)
    assert f"<@&{ROLE}>" in said, said
    client = await world.start(rule=False, direct_messages=True, shard_count=2, shard_ids=frozenset({0}))
    assert client.get_guild(other_guild) is None  # not a server this process serves
    sent = await world.fake.send_dm(BOB_ID, "hello?")
    return await decision_on(client, world.fake.dm_channel(BOB_ID), sent)


async def direct_message_shared_only_on_another_shard(world: World) -> bool:
    """The deploy's own lists (settings, every server's) and two shards: Bob shares only the second server with
    Parley, which shard 1 serves; shard 0's process gets his DMs and must look for him beyond its own servers."""
    await world.fake.add_guild("Second", shard=(1, 2))
    world.fake.absent_members.add((GUILD_ID, BOB_ID))
    client = await world.start(direct_messages=True, shard_count=2, shard_ids=frozenset({0}))
    assert [guild.id for guild in client.guilds] == [GUILD_ID]
    sent = await world.fake.send_dm(BOB_ID, "hello?")
    return await decision_on(client, world.fake.dm_channel(BOB_ID), sent)


async def model_called_or_told(world: World, calls: list[InteractionCall], before: int) -> bool:
    """A command's outcome: True once the model is called for it, False once it tells its user a line alone."""

    def told() -> bool:
        return any(
            call.body and _ephemeral(call) and call_text(call) and not call_text(call).startswith(PROGRESS)
            for call in calls_for(world.fake, calls)
        )

    await eventually(lambda: len(world.llm.requests) > before or told(), timeout=10)
    return len(world.llm.requests) > before


async def eventually_async(predicate: Callable[[], Awaitable[bool]], timeout: float = 5.0) -> None:
    """Until an awaited condition holds (a move of the bot's that the test cannot await)."""
    async with asyncio.timeout(timeout):
        while not await predicate():  # noqa: ASYNC110 - the archive's writer flushes on its own schedule
            await asyncio.sleep(0.05)


def _ephemeral(call: InteractionCall) -> bool:
    assert call.body is not None
    data = call.body.get("data") or call.body
    # An edit of a deferred private response carries no flags: the deferral made it private.
    return bool(int(data.get("flags") or 0) & EPHEMERAL) or call.method == "PATCH"


async def ask(world: World) -> bool:
    await world.start()
    calls = await use_top_command(world.fake, "ask", [option("question", "what's new?")], user_id=BOB_ID)
    return await model_called_or_told(world, calls, 0)


async def ask_menu(world: World) -> bool:
    await world.start()
    target = await say(world.fake, ALICE_ID, "the deploy moved to noon")
    before = len(world.llm.requests)
    await ask_parley(world.fake, target, "when is the deploy?", user_id=BOB_ID)  # its answer, or a refusal
    return len(world.llm.requests) > before


async def regenerate(world: World) -> bool:
    """Bob's question from the gap is answered; then the rule is set by command, and Bob asks for the answer again.
    The answer is written again for its asker, whose roles history does not carry."""
    await world.start(rule=False)
    await world.bot.stop()
    world.fake.add_history(CHANNEL_ID, BOB_ID, f"<@{BOT_ID}> what did I miss?")
    limits = {key: value for key, value in world.rule.settings.items() if key == "role_limits"}
    client = await world.start(rule=False, **limits)
    [answer_post] = await world.fake.wait_for_posts(1, timeout=15)
    await eventually(lambda: client.streams.latest(CHANNEL_ID) is not None)
    if world.rule.command is not None:
        await access_command(world.fake, world.rule.command)
    else:
        await eventually(lambda: client.usage.member_tokens(GUILD_ID, BOB_ID) > 1)
    [answer] = world.fake.bot_messages(CHANNEL_ID)
    assert answer["id"] == answer_post.message["id"]
    calls = await use_message_command(world.fake, "Regenerate", answer, user_id=BOB_ID)
    return await model_called_or_told(world, calls, 1)


async def catchup(world: World) -> bool:
    world.llm.handler = catching_up
    client = await world.start()
    for number in range(3):
        await say(world.fake, ALICE_ID, f"the deploy moved, part {number}")
    archive = client.archive
    assert archive is not None

    async def archived() -> bool:
        await archive.flush()
        return len(await archive.recent(CHANNEL_ID)) >= 3

    await eventually_async(archived)
    since = [option("since", "1h")]
    calls = await run_command(world.fake, "catchup", since, permissions=MEMBER, user_id=BOB_ID)
    return await model_called_or_told(world, calls, 0)


async def reminder_set(world: World) -> bool:
    client = await world.start()
    await remind(world.fake, "1h", "stand up", permissions=MEMBER, user_id=BOB_ID)  # set, or a refusal
    assert client.archive is not None
    waiting, _ = await client.archive.pending_reminders(GUILD_ID, BOB_ID)
    return waiting == 1


async def reminder_posted(world: World) -> bool:
    """Bob sets a reminder; Parley is restarted under the rule before it is due."""
    await world.start(rule=False)
    await remind(world.fake, "1h", "stand up", permissions=MEMBER, user_id=BOB_ID)
    await world.bot.stop()
    world.bot.clock.advance(2 * 3600)
    client = await world.start()
    await moved_on(world.bot, client, 1)
    return any("stand up" in post.content for post in world.fake.posts_in(CHANNEL_ID))
