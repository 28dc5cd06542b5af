"""End-to-end: `/parley model`, a member's own model among MEMBER_MODELS (issue 48, part 2)."""

from __future__ import annotations

from typing import Any

from tests.e2e.test_e2e_privacy import erase_by_command, export_of
from tests.e2e.test_e2e_profiles import ADMIN, ask, profile
from tests.fakes.fake_discord import ALICE_ID, BOB_ID, FakeDiscord
from tests.fakes.fake_llm import MODEL_NAME, FakeLLM
from tests.support.e2e_support import (
    MEMBER,
    RunningBot,
    _in_channel,
    _interact,
    _interaction,
    run_command,
    token_of,
)

FAST = "fast-model"
DEEP = "deep-model"
PINNED = "pinned-model"


async def open_menu(fake: FakeDiscord, user_id: int = ALICE_ID) -> tuple[str, dict[str, Any]]:
    """`/parley model`: what Parley said, and the message holding the menu (empty when it showed none)."""
    [call] = await run_command(fake, "model", user_id=user_id, permissions=MEMBER)
    assert call.body is not None
    data = call.body.get("data", {})
    if not data.get("components"):
        return data.get("content", ""), {}
    # The message as Discord shows it: the menu is on it.
    return data["content"], fake.original_response(token_of(call)) | {"components": data["components"]}


def options(menu: dict[str, Any]) -> dict[str, bool]:
    """The menu's models, each with whether it is marked as the member's current one."""
    [row] = menu["components"]
    [select] = row["components"]
    return {option["value"]: option.get("default", False) for option in select["options"]}


async def choose(fake: FakeDiscord, menu: dict[str, Any], model: str, user_id: int = ALICE_ID) -> str:
    """Pick `model` in the menu (whatever it offers: a request can say anything); what the menu's message says then."""
    [row] = menu["components"]
    [select] = row["components"]
    payload = _interaction(fake, 3, {"custom_id": select["custom_id"], "component_type": 3, "values": [model]})
    payload["message"] = menu
    _in_channel(fake, payload, user_id, MEMBER)
    [call] = await _interact(fake, payload, f"{model} chosen")
    assert call.body is not None
    return str(call.body["data"]["content"])


async def test_a_member_picks_a_model_and_their_next_answer_goes_to_it(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """The menu offers the channel's model (marked, the default) and MEMBER_MODELS; the choice is the model of the
    member's next answer, shown in /parley status, and leaves other members' answers on the channel's model."""
    await bot.start(member_models=frozenset({FAST, DEEP}))
    said, menu = await open_menu(fake)
    assert said.startswith(f"Parley answers you here with `{MODEL_NAME}`")
    assert options(menu) == {MODEL_NAME: True, DEEP: False, FAST: False}
    assert await choose(fake, menu, DEEP) == f"Parley answers you on this server with `{DEEP}`."
    assert (await ask(fake, llm))["model"] == DEEP
    [status] = await run_command(fake, "status", permissions=MEMBER)
    assert status.body is not None
    fields = {field["name"]: field["value"] for field in status.body["data"]["embeds"][0]["fields"]}
    assert fields["Your model"] == f"`{DEEP}` (/parley model)"
    _, again = await open_menu(fake)
    assert options(again)[DEEP] is True
    # Back to the channel's model: nothing of it is kept.
    await choose(fake, again, MODEL_NAME)
    assert (await ask(fake, llm))["model"] == MODEL_NAME
    assert (await export_of(fake))["model_choice"] is None


async def test_a_model_not_on_the_list_cannot_be_chosen(bot: RunningBot, fake: FakeDiscord, llm: FakeLLM) -> None:
    """A request naming a model the admins do not offer changes nothing; the answer keeps the channel's model."""
    await bot.start(member_models=frozenset({FAST}))
    _, menu = await open_menu(fake)
    assert await choose(fake, menu, "gpt-9-ultra") == "`gpt-9-ultra` is not offered here."
    assert (await ask(fake, llm))["model"] == MODEL_NAME


async def test_without_member_models_there_is_no_menu(bot: RunningBot, fake: FakeDiscord) -> None:
    await bot.start()
    said, menu = await open_menu(fake)
    assert said == "Members don't choose models on this server: its admins offer none (MEMBER_MODELS is empty)."
    assert menu == {}


async def test_a_channel_whose_profile_pins_a_model_ignores_the_choice(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """A model set for #general by its profile answers everyone there, a member's choice notwithstanding."""
    await bot.start(member_models=frozenset({FAST}), models=frozenset({PINNED}))
    _, menu = await open_menu(fake)
    await choose(fake, menu, FAST)
    assert (await ask(fake, llm))["model"] == FAST
    await profile(fake, "set", permissions=ADMIN, setting="model", value=PINNED)
    assert (await ask(fake, llm))["model"] == PINNED
    said, pinned_menu = await open_menu(fake)
    assert f"This channel's profile sets its model ({PINNED}) for everyone" in said
    assert options(pinned_menu) == {PINNED: True}


async def test_the_choice_is_exported_and_erased_with_the_members_data(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    await bot.start(member_models=frozenset({FAST}))
    _, menu = await open_menu(fake)
    await choose(fake, menu, FAST)
    _, bobs = await open_menu(fake, BOB_ID)
    await choose(fake, bobs, FAST, BOB_ID)
    assert (await export_of(fake))["model_choice"] == FAST
    await erase_by_command(fake)
    assert (await export_of(fake))["model_choice"] is None
    assert (await ask(fake, llm))["model"] == MODEL_NAME
    # Bob's is his own: erasing Alice's data leaves it.
    assert (await export_of(fake, BOB_ID))["model_choice"] == FAST
