"""Contract tests for the channels whose pins are taken into the knowledge base (archive/pin_channels.py); on both
backends."""

from __future__ import annotations

from archive import Archive
from tests.support.archive_contract_support import CHANNEL, GUILD, NOW, OTHER_CHANNEL

ADMIN = 100
OTHER_GUILD, ELSEWHERE = 11, 30


async def test_a_channel_is_opted_in_and_out(archive: Archive) -> None:
    await archive.set_pins_taken(CHANNEL, GUILD, True, set_by=ADMIN, now=NOW)
    await archive.set_pins_taken(OTHER_CHANNEL, GUILD, True, set_by=ADMIN, now=NOW)
    await archive.set_pins_taken(CHANNEL, GUILD, True, set_by=ADMIN)  # twice is no error
    await archive.set_pins_taken(ELSEWHERE, OTHER_GUILD, True, set_by=ADMIN)

    assert await archive.pins_taken(CHANNEL) and not await archive.pins_taken(99)
    assert await archive.pin_channels(GUILD) == {CHANNEL: GUILD, OTHER_CHANNEL: GUILD}
    await archive.set_pins_taken(CHANNEL, GUILD, False, set_by=ADMIN)
    await archive.set_pins_taken(CHANNEL, GUILD, False, set_by=ADMIN)  # off twice is no error either
    assert not await archive.pins_taken(CHANNEL)
    assert await archive.pin_channels() == {OTHER_CHANNEL: GUILD, ELSEWHERE: OTHER_GUILD}


async def test_a_deleted_channel_or_server_takes_its_setting_along(archive: Archive) -> None:
    for channel, guild in ((CHANNEL, GUILD), (OTHER_CHANNEL, GUILD), (ELSEWHERE, OTHER_GUILD)):
        await archive.set_pins_taken(channel, guild, True, set_by=ADMIN)

    archive.delete_channel(CHANNEL)
    await archive.flush()
    assert await archive.pin_channels() == {OTHER_CHANNEL: GUILD, ELSEWHERE: OTHER_GUILD}
    archive.delete_guild(GUILD)
    await archive.flush()
    assert await archive.pin_channels() == {ELSEWHERE: OTHER_GUILD}
