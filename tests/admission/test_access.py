"""Access: the rule (who may use Parley where), each server's lists in the archive, and direct messages' rule."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import discord
import pytest

from admission.access import CHANNEL_REFUSAL, AccessVerdict, Asker, Lists, Place, verdict
from admission.access_gate import AccessGate
from admission.access_lists import AccessLists, Shown
from archive import AccessEntry, Archive
from archive.backends import open_archive
from config import Settings

GUILD, OTHER_GUILD = 1000, 1001
CHANNEL, OTHER_CHANNEL, CATEGORY = 2000, 2001, 2500
ALICE, BOB = 3000, 3001
MODS, MUTED = 4000, 4001

HERE = Place(CHANNEL, CATEGORY)
ALICE_PLAIN = Asker(ALICE, frozenset({GUILD}))
ALICE_MOD = Asker(ALICE, frozenset({GUILD, MODS}))
ONLY_ALICE = frozenset({ALICE})


# --- The rule ----------------------------------------------------------------------------------------


def test_empty_lists_allow_everyone_everywhere() -> None:
    assert verdict(HERE, ALICE_PLAIN, Lists()) is AccessVerdict.ALLOWED


@pytest.mark.parametrize(
    ("lists", "expected"),
    [
        (Lists(allowed_channels=frozenset({CHANNEL})), AccessVerdict.ALLOWED),
        (Lists(allowed_channels=frozenset({CATEGORY})), AccessVerdict.ALLOWED),
        (Lists(allowed_channels=frozenset({OTHER_CHANNEL})), AccessVerdict.CHANNEL_NOT_ALLOWED),
        (Lists(blocked_channels=frozenset({CHANNEL})), AccessVerdict.CHANNEL_BLOCKED),
        (Lists(blocked_channels=frozenset({CATEGORY})), AccessVerdict.CHANNEL_BLOCKED),
        # Block wins: a channel allowed by name in a blocked category, or allowed and blocked at once.
        (
            Lists(allowed_channels=frozenset({CHANNEL}), blocked_channels=frozenset({CATEGORY})),
            AccessVerdict.CHANNEL_BLOCKED,
        ),
        (
            Lists(allowed_channels=frozenset({CATEGORY}), blocked_channels=frozenset({CHANNEL})),
            AccessVerdict.CHANNEL_BLOCKED,
        ),
    ],
)
def test_channel_and_category_lists(lists: Lists, expected: AccessVerdict) -> None:
    """A list naming a category names its channels; a channel outside a set allow list, or blocked, is refused."""
    assert verdict(HERE, ALICE_MOD, lists) is expected


@pytest.mark.parametrize(
    ("asker", "lists", "expected"),
    [
        (ALICE_PLAIN, Lists(allowed_roles=frozenset({MODS})), AccessVerdict.NOT_ALLOWED_ROLE),
        (ALICE_MOD, Lists(allowed_roles=frozenset({MODS})), AccessVerdict.ALLOWED),
        (
            ALICE_PLAIN,
            Lists(allowed_roles=frozenset({MODS}), allowed_members=frozenset({ALICE})),
            AccessVerdict.ALLOWED,
        ),
        (ALICE_MOD, Lists(blocked_roles=frozenset({MODS})), AccessVerdict.ROLE_BLOCKED),
        (
            ALICE_MOD,
            Lists(allowed_roles=frozenset({MODS}), blocked_roles=frozenset({MODS})),
            AccessVerdict.ROLE_BLOCKED,
        ),
        (ALICE_MOD, Lists(allowed_members=ONLY_ALICE, blocked_members=ONLY_ALICE), AccessVerdict.MEMBER_BLOCKED),
        (ALICE_MOD, Lists(blocked_members=frozenset({BOB})), AccessVerdict.ALLOWED),
        # Blocking the @everyone role (the server's id) blocks every member.
        (ALICE_MOD, Lists(blocked_roles=frozenset({GUILD})), AccessVerdict.ROLE_BLOCKED),
    ],
)
def test_role_and_member_lists(asker: Asker, lists: Lists, expected: AccessVerdict) -> None:
    """An allow list of roles or members admits only those it names; any block wins over any allow."""
    assert verdict(HERE, asker, lists) is expected


def test_the_channel_is_judged_before_the_member() -> None:
    """A blocked member in a channel Parley does not serve gets the channel's silence, not a notice."""
    lists = Lists(allowed_channels=frozenset({OTHER_CHANNEL}), blocked_members=frozenset({ALICE}))
    assert verdict(HERE, ALICE_PLAIN, lists) is AccessVerdict.CHANNEL_NOT_ALLOWED


def test_only_a_members_refusal_is_told() -> None:
    """Refusals about the member say why in one line; a channel's refusals say nothing."""
    for told in (AccessVerdict.MEMBER_BLOCKED, AccessVerdict.ROLE_BLOCKED, AccessVerdict.NOT_ALLOWED_ROLE):
        notice = told.notice
        assert notice is not None and notice.startswith("You can't use Parley here: ") and "\n" not in notice
    assert AccessVerdict.CHANNEL_BLOCKED.notice is None and AccessVerdict.CHANNEL_NOT_ALLOWED.notice is None
    assert AccessVerdict.ALLOWED.notice is None
    # Asked directly (a command), the channel's reason is said too, and a member's is the notice.
    assert AccessVerdict.CHANNEL_NOT_ALLOWED.refusal == CHANNEL_REFUSAL == AccessVerdict.CHANNEL_BLOCKED.refusal
    assert AccessVerdict.ROLE_BLOCKED.refusal == AccessVerdict.ROLE_BLOCKED.notice


# --- The lists: settings and the archive's entries -------------------------------------------------


@pytest.fixture
def settings(make_settings: Callable[..., Settings]) -> Settings:
    return make_settings(blocked_roles=frozenset({MUTED}), allowed_channels=frozenset({CATEGORY}))


@pytest.fixture
async def archive(archive_url: str) -> AsyncIterator[Archive]:
    """An empty archive on each backend in turn."""
    opened = await open_archive(archive_url, retention_days=0)
    yield opened
    await opened.close()


async def test_commands_add_to_the_settings_and_outlive_a_restart(archive_url: str, settings: Settings) -> None:
    """A server's entries join the settings' lists there only, and come back from the archive after a reopen."""
    lists = AccessLists(settings)
    archive = await open_archive(archive_url, retention_days=0)
    await lists.attach(archive)
    await lists.put(GUILD, OTHER_CHANNEL, "channel", "allow", ALICE)
    await lists.put(GUILD, BOB, "member", "block", ALICE)
    await archive.close()

    reopened = AccessLists(settings)
    archive = await open_archive(archive_url, retention_days=0)
    try:
        await reopened.attach(archive)
        here = reopened.lists_for(GUILD)
        assert here.allowed_channels == {CATEGORY, OTHER_CHANNEL} and here.blocked_members == {BOB}
        assert here.blocked_roles == {MUTED}
        assert reopened.lists_for(OTHER_GUILD) == Lists(
            allowed_channels=frozenset({CATEGORY}), blocked_roles=frozenset({MUTED})
        )
    finally:
        await archive.close()


async def test_allowing_a_blocked_target_replaces_its_entry_and_clear_drops_it(
    archive: Archive, settings: Settings
) -> None:
    """One entry per target: the latest command's; clearing it leaves the settings' lists as they were."""
    lists = AccessLists(settings)
    await lists.attach(archive)
    await lists.put(GUILD, MODS, "role", "block", ALICE)
    await lists.put(GUILD, MODS, "role", "allow", BOB)
    assert [(entry.listed, entry.set_by) for entry in await archive.access_entries(GUILD)] == [("allow", BOB)]
    assert lists.lists_for(GUILD).allowed_roles == {MODS} and lists.lists_for(GUILD).blocked_roles == {MUTED}

    cleared = await lists.clear(GUILD, MODS)
    assert cleared is not None and cleared.set_by == BOB
    assert await lists.clear(GUILD, MODS) is None
    assert await archive.access_entries() == []
    assert lists.lists_for(GUILD).allowed_roles == frozenset()


async def test_show_names_the_setting_or_the_setter_and_time(archive: Archive, settings: Settings) -> None:
    """The settings' entries name their variable; the commands' their setter and when, in the order set."""
    lists = AccessLists(settings)
    await lists.attach(archive)
    await lists.put(GUILD, CHANNEL, "channel", "block", ALICE)
    await lists.put(GUILD, BOB, "member", "block", ALICE)
    shown = lists.shown(GUILD)
    assert shown[:2] == [
        Shown(CATEGORY, "channel", "allow", setting="ALLOWED_CHANNELS"),
        Shown(MUTED, "role", "block", setting="BLOCKED_ROLES"),
    ]
    assert [(entry.target_id, entry.kind, entry.listed, entry.set_by) for entry in shown[2:]] == [
        (CHANNEL, "channel", "block", ALICE),
        (BOB, "member", "block", ALICE),
    ]
    assert all(entry.set_at is not None and entry.setting is None for entry in shown[2:])
    assert [entry.setting for entry in lists.shown(OTHER_GUILD)] == ["ALLOWED_CHANNELS", "BLOCKED_ROLES"]


async def test_a_deleted_server_takes_its_entries_along_but_a_deleted_channel_does_not(archive: Archive) -> None:
    """Leaving a server drops all of that server's entries; a deleted channel's entry stays, since dropping the only
    allowed channel's would leave an empty allow list, which allows every channel."""
    for entry in (
        AccessEntry(GUILD, CHANNEL, "channel", "block", ALICE, 1),
        AccessEntry(GUILD, MODS, "role", "allow", ALICE, 2),
        AccessEntry(OTHER_GUILD, MODS, "role", "block", ALICE, 3),
    ):
        await archive.set_access_entry(entry)
    archive.delete_channel(CHANNEL)
    await archive.flush()
    assert [entry.target_id for entry in await archive.access_entries(GUILD)] == [CHANNEL, MODS]
    archive.delete_guild(GUILD)
    await archive.flush()
    assert await archive.access_entries() == [AccessEntry(OTHER_GUILD, MODS, "role", "block", ALICE, 3)]


async def test_without_an_archive_entries_last_in_memory(settings: Settings) -> None:
    lists = AccessLists(settings)
    await lists.put(GUILD, BOB, "member", "block", ALICE)
    assert lists.lists_for(GUILD).blocked_members == {BOB}
    lists.forget(GUILD)
    assert lists.lists_for(GUILD).blocked_members == frozenset()


# --- Direct messages ---------------------------------------------------------------------------------


class Servers:
    """`MemberRoles` as a test sets it: which servers each member is in, with which roles; counts the look-ups."""

    def __init__(self, roles: dict[tuple[int, int], frozenset[int]], servers: tuple[int, ...]) -> None:
        self.roles = roles
        self.servers = servers
        self.asked: list[tuple[int, int]] = []

    async def server_ids(self) -> list[int]:
        return list(self.servers)

    async def roles_in(self, guild_id: int, member_id: int) -> frozenset[int] | None:
        self.asked.append((guild_id, member_id))
        return self.roles.get((guild_id, member_id))

    def carried_roles(self, guild_id: int, user: discord.abc.Snowflake) -> frozenset[int] | None:
        return None

    async def member_in(self, guild_id: int, member_id: int) -> discord.Member | None:
        raise AssertionError("the access rule reads roles only")


async def test_a_direct_message_follows_the_strictest_shared_server(make_settings: Callable[..., Settings]) -> None:
    """Blocked (or left out by an allow list) in any server they share with Parley, a member is refused in DMs;
    a server they are not in does not count, and only servers whose lists name roles or members are asked."""
    lists = AccessLists(make_settings())
    await lists.put(GUILD, MUTED, "role", "block", ALICE)
    await lists.put(OTHER_GUILD, MODS, "role", "allow", ALICE)
    await lists.put(3, CHANNEL, "channel", "block", ALICE)  # a channel list says nothing about DMs
    members = Servers(
        {(GUILD, ALICE): frozenset({GUILD}), (OTHER_GUILD, ALICE): frozenset({MODS}), (GUILD, BOB): frozenset({MUTED})},
        (GUILD, OTHER_GUILD, 3),
    )
    gate = AccessGate(lists, members)
    assert await gate.verdict(0, Place(CHANNEL), Asker(ALICE)) is AccessVerdict.ALLOWED
    assert await gate.verdict(0, Place(CHANNEL), Asker(BOB)) is AccessVerdict.ROLE_BLOCKED
    assert {guild_id for guild_id, _ in members.asked} == {GUILD, OTHER_GUILD}

    members.roles[(OTHER_GUILD, ALICE)] = frozenset()  # no longer a mod in the server that limits Parley to mods
    assert await gate.verdict(0, Place(CHANNEL), Asker(ALICE)) is AccessVerdict.NOT_ALLOWED_ROLE


async def test_the_settings_block_in_direct_messages_without_asking_discord(
    make_settings: Callable[..., Settings],
) -> None:
    gate = AccessGate(AccessLists(make_settings(blocked_members=frozenset({BOB}))), Servers({}, (GUILD,)))
    assert await gate.verdict(0, Place(CHANNEL), Asker(BOB)) is AccessVerdict.MEMBER_BLOCKED
    assert await gate.verdict(0, Place(CHANNEL), Asker(ALICE)) is AccessVerdict.ALLOWED
    assert isinstance(gate.members, Servers) and gate.members.asked == []


def test_a_member_is_told_once_per_server_within_a_bounded_memory(make_settings: Callable[..., Settings]) -> None:
    gate = AccessGate(AccessLists(make_settings()), Servers({}, ()), told_kept=2)
    assert gate.first_time(GUILD, ALICE) and not gate.first_time(GUILD, ALICE)
    assert gate.first_time(OTHER_GUILD, ALICE) and gate.first_time(GUILD, BOB)
    # Three told, two kept: the longest-told (Alice in GUILD, refreshed before the others) is forgotten first.
    assert gate.first_time(GUILD, ALICE)
