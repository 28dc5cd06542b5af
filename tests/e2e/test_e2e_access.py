"""End-to-end: who may use Parley where (issue 33, item 1): the settings' and `/parley-admin access`'s lists, the one
notice, `not_allowed` in `/parley why`, across a restart on both backends."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import discord
import pytest

from admission.access import CHANNEL_REFUSAL, NOTICE, REGENERATE_NOT_ALLOWED
from tests.conftest import migrated_postgres_database
from tests.fakes.fake_discord import (
    ALICE_ID,
    BOB_ID,
    BOT_ID,
    CHANNEL_ID,
    OTHER_CHANNEL_ID,
    FakeDiscord,
    InteractionCall,
)
from tests.fakes.fake_llm import FakeLLM
from tests.support.e2e_support import (
    MEMBER,
    MODERATOR,
    RunningBot,
    assert_ephemeral_one_liner,
    command_payload,
    decided,
    eventually,
    reply_text,
    run_command,
    settled,
    use_message_command,
)

ADMIN = MODERATOR | discord.Permissions(manage_guild=True)
ROLE_NOTICE = NOTICE.format(why="an admin has blocked one of your roles from using it in this server")


async def mention(fake: FakeDiscord, author: int, channel_id: int = CHANNEL_ID) -> dict[str, Any]:
    return await fake.send_user_message(channel_id, author, f"<@{BOT_ID}> what's the weather like?")


async def why(fake: FakeDiscord, channel_id: int = CHANNEL_ID) -> str:
    return reply_text(await run_command(fake, "why", channel_id=channel_id))


async def access(
    fake: FakeDiscord, subcommand: str, *, role: int | None = None, permissions: discord.Permissions = ADMIN
) -> str:
    """`/parley-admin access <subcommand>` in #general, naming `role` as Discord's role picker does (the role's id
    as the option's value, the role itself under `resolved`)."""
    payload = command_payload(fake, "access", permissions=permissions)
    options = [] if role is None else [{"type": 8, "name": "role", "value": str(role)}]
    payload["data"]["options"] = [
        {"type": 2, "name": "access", "options": [{"type": 1, "name": subcommand, "options": options}]}
    ]
    if role is not None:
        payload["data"]["resolved"] = {"roles": {str(role): fake.role_payload(role)}}
    token = payload["token"]

    def calls() -> list[InteractionCall]:
        return [call for call in fake.interaction_calls if f"/{token}" in call.path]

    await fake.dispatch("INTERACTION_CREATE", payload)
    await fake.wait_for(lambda: len(calls()) >= 1, what=f"/parley-admin access {subcommand} answered")
    return reply_text(calls())


async def test_a_blocked_roles_mention_gets_one_notice_then_silence(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """BLOCKED_ROLES: Bob (who holds the role) is told why once, replying to him, then nothing; no model is called
    for him, `/parley why` says `not_allowed`, his messages are archived, and Alice is answered as before."""
    muted = fake.add_role("muted", members=[BOB_ID])
    client = await bot.start(blocked_roles=frozenset({muted}))
    first = await mention(fake, BOB_ID)
    [notice] = await fake.wait_for_posts(1)
    assert notice.content == ROLE_NOTICE and notice.reply_to == int(first["id"])
    second = await mention(fake, BOB_ID)
    assert (await decided(client, second)).reason == "not_allowed"
    await settled(fake)
    assert len(fake.posts_in(CHANNEL_ID)) == 1 and llm.requests == []
    # The embed as text: its title, its description, then the newest decision's field.
    assert "silent · not_allowed (" in (await why(fake)).splitlines()[2]

    await mention(fake, ALICE_ID)
    await fake.wait_for_posts(2)
    assert len(llm.requests) == 1
    assert client.archive is not None
    await client.archive.flush()
    archived = {message.message_id for message in await client.archive.recent(CHANNEL_ID)}
    assert {int(first["id"]), int(second["id"])} <= archived


async def test_a_channel_outside_the_allow_list_is_never_answered(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """ALLOWED_CHANNELS names #general: a mention in #random gets no answer and no notice, and is `not_allowed`."""
    client = await bot.start(allowed_channels=frozenset({CHANNEL_ID}))
    elsewhere = await mention(fake, ALICE_ID, OTHER_CHANNEL_ID)
    await mention(fake, ALICE_ID, OTHER_CHANNEL_ID)
    await settled(fake)
    assert fake.posts_in(OTHER_CHANNEL_ID) == [] and llm.requests == []
    assert any(
        entry.message_id == int(elsewhere["id"]) and entry.reason == "not_allowed"
        for entry in client.decisions.recent(OTHER_CHANNEL_ID)
    )
    await mention(fake, ALICE_ID)
    await fake.wait_for_posts(1)
    assert len(llm.requests) == 1


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_access_set_by_command_applies_from_the_next_message_and_survives_a_restart(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM, tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    """A role blocked by command silences its members from their next message, after a restart too; `show` names
    who blocked it; only Manage Server may change it; clearing it lets them in again."""
    database_url = f"sqlite:///{tmp_path / 'parley.db'}"
    if backend == "postgres":
        database_url = await migrated_postgres_database(request)
    muted = fake.add_role("muted", members=[BOB_ID])
    await bot.start(database_url=database_url)
    refused = await access(fake, "block", role=muted, permissions=MODERATOR)
    assert refused == "You need the Manage Server permission in this channel to use /parley-admin access block."
    said = await access(fake, "block", role=muted)
    assert said.startswith(f"Blocked the role <@&{muted}> from the next message on")
    await mention(fake, BOB_ID)
    [notice] = await fake.wait_for_posts(1)
    assert notice.content == ROLE_NOTICE

    await bot.stop()
    client = await bot.start(database_url=database_url)
    again = await mention(fake, BOB_ID)
    assert (await decided(client, again)).reason == "not_allowed"
    shown = await access(fake, "show", permissions=MODERATOR)
    assert f"**Roles blocked**: <@&{muted}> (by command by <@{ALICE_ID}> <t:" in shown
    assert llm.requests == []

    cleared = await access(fake, "clear", role=muted)
    assert cleared == f"Cleared the role <@&{muted}> from the block list from the next message on."
    await mention(fake, BOB_ID)
    await fake.wait_for_posts(3)  # the notice after the first block, one after the restart, and now the answer
    assert len(llm.requests) == 1


async def test_an_allowed_category_lets_its_channels_in_and_no_other(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """ALLOWED_CHANNELS names a category holding #general: a mention there is answered, one in #random is not."""
    category = fake.add_category("help desk", channels=[CHANNEL_ID])
    await bot.start(allowed_channels=frozenset({category}))
    await mention(fake, ALICE_ID, OTHER_CHANNEL_ID)
    await mention(fake, ALICE_ID)
    await fake.wait_for_posts(1)
    await settled(fake)
    assert fake.posts_in(OTHER_CHANNEL_ID) == [] and len(llm.requests) == 1


async def test_a_thread_follows_its_blocked_channel(bot: RunningBot, fake: FakeDiscord, llm: FakeLLM) -> None:
    """BLOCKED_CHANNELS names #general: a mention in a thread of it is not answered; #random's is."""
    await bot.start(blocked_channels=frozenset({CHANNEL_ID}))
    thread = await fake.create_thread(CHANNEL_ID, "a side topic")
    await mention(fake, ALICE_ID, thread)
    await settled(fake)
    assert fake.posts_in(thread) == [] and llm.requests == []
    await mention(fake, ALICE_ID, OTHER_CHANNEL_ID)
    await fake.wait_for_posts(1, channel_id=OTHER_CHANNEL_ID)


async def test_a_member_blocked_in_a_shared_server_is_not_answered_in_direct_messages(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """Bob holds a role the server blocks: his DMs get the notice once, then silence (his roles looked up once);
    Alice's DMs are answered."""
    muted = fake.add_role("muted", members=[BOB_ID])
    await bot.start(direct_messages=True, blocked_roles=frozenset({muted}))
    bobs = fake.dm_channel(BOB_ID)
    await fake.send_dm(BOB_ID, "hello?")
    [notice] = await fake.wait_for_posts(1, channel_id=bobs)
    assert notice.content == ROLE_NOTICE
    await fake.send_dm(BOB_ID, "hello??")
    await settled(fake)
    assert len(fake.posts_in(bobs)) == 1 and llm.requests == []
    # His roles were asked of Discord once, then kept: not once per message.
    lookups = [r for r in fake.requests if r.method == "GET" and r.path.endswith(f"/members/{BOB_ID}")]
    assert len(lookups) == 1
    await fake.send_dm(ALICE_ID, "hello!")
    await fake.wait_for_posts(1, channel_id=fake.dm_channel(ALICE_ID))
    assert len(llm.requests) == 1


async def test_regenerate_is_refused_once_the_asker_is_blocked(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """An answer is not written again for a member whose role was blocked since: no model call is made."""
    muted = fake.add_role("muted", members=[ALICE_ID])
    client = await bot.start()
    await mention(fake, ALICE_ID)
    await fake.wait_for_posts(1)
    await eventually(lambda: client.streams.latest(CHANNEL_ID) is not None)
    await access(fake, "block", role=muted)
    [answer] = fake.bot_messages(CHANNEL_ID)
    refused = await use_message_command(fake, "Regenerate", answer, user_id=ALICE_ID)
    assert assert_ephemeral_one_liner(refused) == REGENERATE_NOT_ALLOWED
    await settled(fake)
    assert len(llm.requests) == 1


async def test_catch_up_is_refused_to_a_blocked_role_and_outside_the_allowed_channels(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """/parley catchup is a model call for the member: a blocked role's member is told why, and in a channel
    outside the allow list anyone is told the channel is not served (they asked directly); no model is called."""
    muted = fake.add_role("muted", members=[BOB_ID])
    await bot.start(blocked_roles=frozenset({muted}), allowed_channels=frozenset({CHANNEL_ID}))
    await fake.send_user_message(CHANNEL_ID, ALICE_ID, "something said here")
    [bobs] = await run_command(fake, "catchup", permissions=MEMBER, user_id=BOB_ID)
    assert assert_ephemeral_one_liner([bobs]) == ROLE_NOTICE
    [elsewhere] = await run_command(fake, "catchup", permissions=MEMBER, user_id=ALICE_ID, channel_id=OTHER_CHANNEL_ID)
    assert assert_ephemeral_one_liner([elsewhere]) == CHANNEL_REFUSAL
    assert llm.requests == []
