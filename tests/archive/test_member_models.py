"""Contract tests for members' model choices (archive/member_models.py), on both backends: kept per member and
server, replaced, cleared, erased with the member's data and gone with the server."""

from __future__ import annotations

from archive import Archive
from tests.support.archive_contract_support import GUILD, NOW

ALICE, BOB = 7, 8
OTHER_GUILD = 11


async def test_a_choice_is_kept_per_member_and_server_and_replaced(archive: Archive) -> None:
    assert await archive.member_model(GUILD, ALICE) is None
    await archive.set_member_model(GUILD, ALICE, "fast-model", now=NOW)
    await archive.set_member_model(GUILD, ALICE, "deep-model")
    await archive.set_member_model(OTHER_GUILD, ALICE, "fast-model")
    assert await archive.member_model(GUILD, ALICE) == "deep-model"
    assert await archive.member_model(OTHER_GUILD, ALICE) == "fast-model"
    assert await archive.member_model(GUILD, BOB) is None
    await archive.set_member_model(GUILD, ALICE, None)
    await archive.set_member_model(GUILD, ALICE, None)  # nothing to clear is no error
    assert await archive.member_model(GUILD, ALICE) is None
    assert await archive.member_model(OTHER_GUILD, ALICE) == "fast-model"


async def test_an_erasure_takes_the_members_choice_in_that_server_only(archive: Archive) -> None:
    await archive.set_member_model(GUILD, ALICE, "fast-model")
    await archive.set_member_model(GUILD, BOB, "fast-model")
    await archive.set_member_model(OTHER_GUILD, ALICE, "deep-model")
    await archive.erase_member(GUILD, ALICE, [])
    assert await archive.member_model(GUILD, ALICE) is None
    assert await archive.member_model(GUILD, BOB) == "fast-model"
    assert await archive.member_model(OTHER_GUILD, ALICE) == "deep-model"


async def test_a_server_left_takes_its_choices_along(archive: Archive) -> None:
    await archive.set_member_model(GUILD, ALICE, "fast-model")
    await archive.set_member_model(OTHER_GUILD, ALICE, "deep-model")
    archive.delete_guild(GUILD)
    await archive.flush()
    assert await archive.member_model(GUILD, ALICE) is None
    assert await archive.member_model(OTHER_GUILD, ALICE) == "deep-model"
