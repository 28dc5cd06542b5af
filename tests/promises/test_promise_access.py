"""Promise: whichever way I ask Parley, it decides for me with my real roles in the server: if an admin blocked a
role I hold I am refused, if they allowed only a role I hold I am served, and the limits my role has apply to me;
even when Parley reads my question back from history, or my DM reaches a process that does not serve the server.

Each row is one way in (its name), under one rule naming Bob's role: BLOCKED_ROLES (refused), ALLOWED_ROLES
(served), or ROLE_LIMITS whose tokens he has spent (refused). Bob's roles are known only from Discord: a question
read from history carries none, and a process that does not serve a server has none of its members.

Not rows: a reminder's post makes no model call, so no ROLE_LIMITS row there (nor for setting one); a DM belongs to
no server, so no server's ROLE_LIMITS applies to it; a digest is asked for by no member, so it decides for none.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import migrated_postgres_database
from tests.fakes.fake_discord import BOB_ID, FakeDiscord
from tests.fakes.fake_llm import FakeLLM
from tests.promises.promise_access_support import (
    ALLOWED,
    BLOCKED,
    LIMITED,
    ROLE,
    Path_,
    Rule,
    World,
    ask,
    ask_menu,
    catchup,
    direct_message,
    direct_message_served_by_another_process,
    direct_message_shared_only_on_another_shard,
    gap,
    live,
    regenerate,
    reminder_posted,
    reminder_set,
    support_question,
)
from tests.support.e2e_support import RunningBot

# (path, the rules it is checked under, the backends: those where the path reads or writes the archive)
BOTH = ("sqlite", "postgres")
PATHS: list[tuple[str, Path_, tuple[Rule, ...], tuple[str, ...]]] = [
    ("live-message", live, (BLOCKED, ALLOWED, LIMITED), ("sqlite",)),
    ("gap-answer", gap, (BLOCKED, ALLOWED, LIMITED), BOTH),
    ("direct-message", direct_message, (BLOCKED, ALLOWED), ("sqlite",)),
    ("direct-message-other-process", direct_message_served_by_another_process, (BLOCKED, ALLOWED), ("postgres",)),
    ("direct-message-other-shard", direct_message_shared_only_on_another_shard, (BLOCKED, ALLOWED), ("postgres",)),
    ("ask", ask, (BLOCKED, ALLOWED, LIMITED), ("sqlite",)),
    ("ask-parley-menu", ask_menu, (BLOCKED, ALLOWED, LIMITED), ("sqlite",)),
    ("regenerate-gap-answer", regenerate, (BLOCKED, ALLOWED, LIMITED), ("sqlite",)),
    ("catchup", catchup, (BLOCKED, ALLOWED, LIMITED), BOTH),
    ("reminder-set", reminder_set, (BLOCKED, ALLOWED), ("sqlite",)),
    ("reminder-posted", reminder_posted, (BLOCKED, ALLOWED), BOTH),
    ("support-desk-answer", support_question, (BLOCKED, ALLOWED, LIMITED), ("sqlite",)),
]
ROWS = [
    pytest.param(path, rule, backend, id=f"{name}-{rule.name}-{backend}")
    for name, path, rules, backends in PATHS
    for rule in rules
    for backend in backends
]


@pytest.mark.parametrize(("path", "rule", "backend"), ROWS)
async def test_every_path_decides_with_the_members_real_roles(
    bot: RunningBot,
    fake: FakeDiscord,
    llm: FakeLLM,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    path: Path_,
    rule: Rule,
    backend: str,
) -> None:
    fake.give_role(BOB_ID, ROLE)
    database_url = f"sqlite:///{tmp_path / 'parley.db'}"
    if backend == "postgres":
        database_url = await migrated_postgres_database(request)
    world = World(fake, llm, bot, tmp_path, rule, database_url)
    try:
        served = await path(world)
    finally:
        await world.stop()
    assert served is rule.served, f"Bob was {'served' if served else 'refused'} under {rule.name}"


MEMBER_ROUTE = "GET /guilds/{guild_id}/members/{user_id}"
SERVERS_ROUTE = "GET /users/@me/guilds"
# The paths where Bob's roles are asked of Discord (not carried by the payload that brought him), and what fails.
LOOKED_UP = [
    pytest.param(path, route, id=name)
    for name, path, route in [
        ("gap-answer", gap, MEMBER_ROUTE),
        ("direct-message", direct_message, MEMBER_ROUTE),
        ("direct-message-other-shard", direct_message_shared_only_on_another_shard, SERVERS_ROUTE),
        ("regenerate-gap-answer", regenerate, MEMBER_ROUTE),
        ("reminder-posted", reminder_posted, MEMBER_ROUTE),
    ]
]


@pytest.mark.parametrize(("path", "route"), LOOKED_UP)
async def test_when_discord_cannot_say_which_roles_a_member_holds_they_are_not_served(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM, tmp_path: Path, path: Path_, route: str
) -> None:
    """Looking Bob up (or listing the servers to look him up in) fails: judged without his roles, the blocked role
    he holds would let him through, so he is not served this time (a reminder waits for a later pass)."""
    fake.give_role(BOB_ID, ROLE)
    fake.failing_routes.add(route)
    world = World(fake, llm, bot, tmp_path, BLOCKED, f"sqlite:///{tmp_path / 'parley.db'}")
    try:
        served = await path(world)
    finally:
        await world.stop()
    assert not served
    asked = f"/members/{BOB_ID}" if route == MEMBER_ROUTE else "/users/@me/guilds"
    assert any(asked in request.path and request.status == 403 for request in fake.requests)


def test_no_path_reads_a_members_roles_but_through_the_access_gate() -> None:
    """The promise lives in one place: only edge/member_roles.py (behind `AccessGate.asker`) reads a member's roles
    off a discord.py object, so a new path cannot judge a member by the roles a payload happens to carry."""
    root = Path(__file__).resolve().parents[2]
    readers = sorted(
        path.relative_to(root).as_posix()
        for path in root.rglob("*.py")
        if not {"tests", ".venv", ".git"} & set(path.relative_to(root).parts)
        and re.search(r"role_ids_of\(|\.roles\b", path.read_text(encoding="utf-8"))
    )
    assert readers == ["discord_io.py", "edge/member_roles.py"]
