"""End-to-end: ALLOWED_SERVERS (issue 44, "costs capped by default"): a server not in it is left, at start and when
Parley is added to it, and answered nothing while the leave is under way; a public application without it gets one
warning line at start."""

from __future__ import annotations

import logging

import pytest

from admission.access import SERVER_REFUSAL
from edge.servers import PUBLIC_BOT_WARNING
from tests.fakes.fake_discord import ALICE_ID, BOT_ID, CHANNEL_ID, GUILD_ID, FakeDiscord
from tests.fakes.fake_llm import FakeLLM
from tests.support.e2e_support import (
    MEMBER,
    MODERATOR,
    RunningBot,
    decided,
    option,
    reply_text,
    run_command,
    settled,
    use_message_command,
    use_top_command,
)

# A server id that is not the fake's: ALLOWED_SERVERS naming only it leaves the fake's own server out.
ELSEWHERE = 80351110224678912
LEAVE = "DELETE /users/@me/guilds/{guild_id}"


def lines(caplog: pytest.LogCaptureFixture, start: str) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.getMessage().startswith(start)]


async def test_a_server_not_allowed_is_left_at_start_and_when_parley_is_added(
    bot: RunningBot, fake: FakeDiscord, caplog: pytest.LogCaptureFixture
) -> None:
    """A server Parley was added to while it was away is left once it connects, one added while it runs at once; one
    log line each names the server; the allowed server stays."""
    caplog.set_level(logging.INFO, logger="parley")
    stranger, _ = await fake.add_guild("Stranger's server")
    await bot.start(allowed_servers=frozenset({GUILD_ID}))
    await fake.wait_for(lambda: fake.left_guilds == [stranger], what="the stranger's server left")
    another, _ = await fake.add_guild("Another")
    await fake.wait_for(lambda: fake.left_guilds == [stranger, another], what="the added server left")
    assert list(fake.guilds) == [GUILD_ID]
    assert lines(caplog, "leaving server") == [
        f"leaving server {stranger} (Stranger's server): it is not in ALLOWED_SERVERS",
        f"leaving server {another} (Another): it is not in ALLOWED_SERVERS",
    ]


async def test_without_allowed_servers_no_server_is_left(bot: RunningBot, fake: FakeDiscord) -> None:
    """Unset, ALLOWED_SERVERS leaves every server Parley is added to served, as before."""
    await bot.start()
    added, _ = await fake.add_guild("Added")
    await settled(fake)
    assert added in fake.guilds and fake.left_guilds == []


async def test_a_server_being_left_gets_no_answer_and_costs_no_model_call(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """Attack: while Discord has not yet taken the leave, a member there mentions Parley, uses /ask and Ask Parley,
    and an admin asks for a catch-up: no answer (each command is refused in one line only its user sees), no model
    call; the leave lands once Discord answers."""
    fake.held_routes.add(LEAVE)
    client = await bot.start(allowed_servers=frozenset({ELSEWHERE}))
    await fake.wait_for(lambda: LEAVE in fake.reached_held_routes, what="the leave under way")
    mention = await fake.send_user_message(CHANNEL_ID, ALICE_ID, f"<@{BOT_ID}> what's the weather like?")
    assert (await decided(client, mention)).reason == "not_allowed"
    asked = await use_top_command(fake, "ask", [option("question", "what's the weather like?")], permissions=MEMBER)
    about = await use_message_command(fake, "Ask Parley", mention)
    caught_up = await run_command(fake, "catchup", permissions=MODERATOR)
    await settled(fake)
    assert [reply_text(calls) for calls in (asked, about, caught_up)] == [SERVER_REFUSAL] * 3
    assert fake.posts_in(CHANNEL_ID) == [] and llm.requests == []
    fake.release(LEAVE)
    await fake.wait_for(lambda: fake.left_guilds == [GUILD_ID], what="the leave landed")


@pytest.mark.parametrize(
    ("public", "allowed", "warned"),
    [(True, frozenset(), True), (True, frozenset({GUILD_ID}), False), (False, frozenset(), False)],
    ids=["public-without-allowed-servers", "public-with-allowed-servers", "not-public"],
)
async def test_a_public_application_without_allowed_servers_is_one_warning_line(
    bot: RunningBot,
    fake: FakeDiscord,
    caplog: pytest.LogCaptureFixture,
    public: bool,
    allowed: frozenset[int],
    warned: bool,
) -> None:
    """Public Bot on and no ALLOWED_SERVERS: one warning line at start with both fixes; otherwise none."""
    caplog.set_level(logging.INFO, logger="parley")
    fake.bot_public = public
    await bot.start(allowed_servers=allowed)
    warnings = lines(caplog, "This bot application is public")
    assert warnings == ([PUBLIC_BOT_WARNING] if warned else [])
    assert not warned or ("Public Bot off" in PUBLIC_BOT_WARNING and "ALLOWED_SERVERS" in PUBLIC_BOT_WARNING)
