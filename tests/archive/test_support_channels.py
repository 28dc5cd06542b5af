"""Contract tests for the support desk's tables (archive/support_channels.py): the channels in support mode and the
forum posts waiting for their hand-off; on both backends."""

from __future__ import annotations

from datetime import timedelta

from archive import Archive, SupportHandoff
from tests.support.archive_contract_support import CHANNEL, GUILD, NOW, OTHER_CHANNEL

ADMIN = 100
OTHER_GUILD, ELSEWHERE = 11, 30


async def test_a_channel_is_put_in_support_mode_and_taken_out(archive: Archive) -> None:
    await archive.set_support(CHANNEL, GUILD, True, set_by=ADMIN, now=NOW)
    await archive.set_support(CHANNEL, GUILD, True, set_by=ADMIN)  # twice is no error
    await archive.set_support(ELSEWHERE, OTHER_GUILD, True, set_by=ADMIN)
    assert await archive.support_channels() == {CHANNEL: GUILD, ELSEWHERE: OTHER_GUILD}

    await archive.set_support(CHANNEL, GUILD, False, set_by=ADMIN)
    await archive.set_support(CHANNEL, GUILD, False, set_by=ADMIN)  # off twice is no error either
    assert await archive.support_channels() == {ELSEWHERE: OTHER_GUILD}


async def test_a_deleted_channel_or_server_takes_its_support_mode_along(archive: Archive) -> None:
    for channel, guild in ((CHANNEL, GUILD), (OTHER_CHANNEL, GUILD), (ELSEWHERE, OTHER_GUILD)):
        await archive.set_support(channel, guild, True, set_by=ADMIN)

    archive.delete_channel(CHANNEL)
    await archive.flush()
    assert await archive.support_channels() == {OTHER_CHANNEL: GUILD, ELSEWHERE: OTHER_GUILD}
    archive.delete_guild(GUILD)
    await archive.flush()
    assert await archive.support_channels() == {ELSEWHERE: OTHER_GUILD}


POST, OTHER_POST, ASKER = 1000, 1001, 50


async def test_a_forum_posts_hand_off_waits_until_due_and_is_claimed_once(archive: Archive) -> None:
    await archive.await_handoff(SupportHandoff(POST, GUILD, ASKER, NOW + timedelta(hours=1)))
    await archive.await_handoff(SupportHandoff(POST, GUILD, ASKER, NOW + timedelta(hours=5)))  # kept as it was
    await archive.await_handoff(SupportHandoff(OTHER_POST, GUILD, ASKER, NOW + timedelta(hours=2)))
    assert await archive.due_handoffs(NOW) == []
    due = await archive.due_handoffs(NOW + timedelta(hours=3))
    assert [(handoff.message_id, handoff.due_at) for handoff in due] == [
        (POST, NOW + timedelta(hours=1)),
        (OTHER_POST, NOW + timedelta(hours=2)),
    ]
    assert await archive.claim_handoff(POST, "first")
    assert not await archive.claim_handoff(POST, "second")  # another process, or a later run
    await archive.drop_handoff(OTHER_POST)
    assert not await archive.claim_handoff(OTHER_POST, "first")
    assert await archive.due_handoffs(NOW + timedelta(days=9)) == []


async def test_a_hand_off_goes_with_its_askers_erasure_its_thread_and_its_server(archive: Archive) -> None:
    later = NOW + timedelta(days=1)
    for post, asker in ((POST, ASKER), (OTHER_POST, ASKER + 1), (OTHER_POST + 1, ASKER + 1)):
        await archive.await_handoff(SupportHandoff(post, GUILD, asker, NOW))
    await archive.erase_member(GUILD, ASKER, [])
    assert [handoff.message_id for handoff in await archive.due_handoffs(later)] == [OTHER_POST, OTHER_POST + 1]
    archive.delete_channel(OTHER_POST)  # the post's thread
    await archive.flush()
    assert [handoff.message_id for handoff in await archive.due_handoffs(later)] == [OTHER_POST + 1]
    archive.delete_guild(GUILD)
    await archive.flush()
    assert await archive.due_handoffs(later) == []
