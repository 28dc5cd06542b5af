"""Contract tests for the channels in support mode (archive/support_channels.py); on both backends."""

from __future__ import annotations

from archive import Archive
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
