"""Which model answers a member (profiles/member_models.py): their choice within MEMBER_MODELS, unless the channel's
own profile names a model; choices kept in a real archive."""

from __future__ import annotations

from pathlib import Path

import pytest

from archive import Archive
from archive.null import NULL_ARCHIVE
from archive.sqlite import SQLiteArchive
from profiles.channels import FIELDS, Profile, Source, Value
from profiles.member_models import MemberModels, ModelNotOffered, answering_model, model_choices, pins_model

OFFERED = frozenset({"fast", "deep"})
GUILD, ALICE = 10, 7


def profile_with(model: str, source: Source) -> Profile:
    values = {name: Value("", Source.DEFAULT) for name in FIELDS}
    return Profile(values | {"model": Value(model, source)})


SERVER_DEFAULT = profile_with("base", Source.SERVER_COMMAND)


class Holder:
    def __init__(self, archive: Archive) -> None:
        self.archive = archive


@pytest.mark.parametrize("source", [Source.DEFAULT, Source.SERVER_FILE, Source.SERVER_COMMAND])
def test_a_server_wide_or_default_model_is_the_default_members_choose_away_from(source: Source) -> None:
    profile = profile_with("base", source)
    assert not pins_model(profile)
    assert model_choices(profile, OFFERED) == ["base", "deep", "fast"]
    assert answering_model(profile, "fast", OFFERED) == "fast"
    assert answering_model(profile, None, OFFERED) == "base"


@pytest.mark.parametrize("source", [Source.CHANNEL_COMMAND, Source.CHANNEL_FILE])
def test_a_channels_own_model_answers_everyone_there(source: Source) -> None:
    profile = profile_with("pinned", source)
    assert pins_model(profile)
    assert model_choices(profile, OFFERED) == ["pinned"]
    assert answering_model(profile, "fast", OFFERED) == "pinned"


def test_a_choice_the_admins_took_off_the_list_is_ignored() -> None:
    assert answering_model(SERVER_DEFAULT, "retired", OFFERED) == "base"


async def test_a_choice_is_kept_and_the_profiles_own_model_keeps_nothing(tmp_path: Path) -> None:
    archive = await SQLiteArchive.open(tmp_path / "archive.db")
    try:
        members = MemberModels(Holder(archive), OFFERED)
        assert await members.choose(SERVER_DEFAULT, GUILD, ALICE, "deep") == "deep"
        assert await members.model_for(SERVER_DEFAULT, GUILD, ALICE) == "deep"
        # In a DM there is no server to keep a choice for.
        assert await members.model_for(SERVER_DEFAULT, None, ALICE) == "base"
        assert await members.choose(SERVER_DEFAULT, GUILD, ALICE, "base") is None
        assert await archive.member_model(GUILD, ALICE) is None
        with pytest.raises(ModelNotOffered):
            await members.choose(SERVER_DEFAULT, GUILD, ALICE, "gpt-9-ultra")
        assert await archive.member_model(GUILD, ALICE) is None
    finally:
        await archive.close()


async def test_without_member_models_or_an_archive_the_picker_is_off(tmp_path: Path) -> None:
    assert not MemberModels(Holder(NULL_ARCHIVE), frozenset()).on
    assert not MemberModels(Holder(NULL_ARCHIVE), OFFERED).kept
    archive = await SQLiteArchive.open(tmp_path / "archive.db")
    try:
        await archive.set_member_model(GUILD, ALICE, "deep")
        # Nothing offered: a kept choice is not even read.
        assert await MemberModels(Holder(archive), frozenset()).model_for(SERVER_DEFAULT, GUILD, ALICE) == "base"
    finally:
        await archive.close()
