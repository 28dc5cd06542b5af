"""End-to-end: channel profiles (persona, model, tools, mode) and role mentions of Parley (issue 22, parts 1 and 4)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import discord
import pytest

from tests.e2e.test_e2e import judge_or_echo
from tests.e2e.test_e2e_memory import run_group_command, string_option
from tests.fakes.fake_discord import (
    ALICE_ID,
    BOB_ID,
    BOT_ID,
    BOT_ROLE_ID,
    CHANNEL_ID,
    OTHER_BOT_ROLE_ID,
    OTHER_CHANNEL_ID,
    FakeDiscord,
)
from tests.fakes.fake_llm import MODEL_NAME, FakeLLM, message_text
from tests.support.e2e_support import (
    MEMBER,
    MODERATOR,
    RunningBot,
    assert_silent,
    bot_environment,
    command_payload,
    decided,
    option,
    run_bot_py,
    run_command,
    say,
)

STRONG = "strong-model"
PIRATE = "Talk like a pirate, matey."
ADMIN = MODERATOR | discord.Permissions(manage_guild=True)


def instructions(request: dict[str, Any]) -> str:
    return "\n".join(message_text(m) for m in request["messages"] if m["role"] in ("system", "developer"))


def tool_names(request: dict[str, Any]) -> set[str]:
    return {tool["function"]["name"] for tool in request.get("tools", [])}


async def ask(fake: FakeDiscord, llm: FakeLLM, channel_id: int = CHANNEL_ID) -> dict[str, Any]:
    """@mention Parley in a channel; returns the model request its answer made."""
    before, posts = len(llm.requests), len(fake.posts_in(channel_id))
    await fake.send_user_message(channel_id, ALICE_ID, f"<@{BOT_ID}> how are you?")
    await fake.wait_for_posts(posts + 1, channel_id=channel_id)
    [request] = llm.requests[before:]
    return request


async def profile(fake: FakeDiscord, subcommand: str, permissions: Any = MODERATOR, **options: str) -> str:
    """`/parley-admin profile <subcommand>` in #general with `options`; what Parley answered."""
    given = [string_option(name, value) for name, value in options.items()]
    return await run_group_command(fake, "profile", subcommand, given, permissions=permissions)


async def test_a_channel_profile_gives_its_persona_and_model_there_only(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """Persona and model set for #general go into its request; #random's request keeps the defaults."""
    await bot.start(models=frozenset({STRONG}))
    said = await profile(fake, "set", setting="persona", value=PIRATE)
    assert said == f"In <#{CHANNEL_ID}> the persona is “{PIRATE}” from the next message on."
    await profile(fake, "set", setting="model", value=STRONG)

    here = await ask(fake, llm, CHANNEL_ID)
    assert here["model"] == STRONG
    assert PIRATE in instructions(here) and "configured the following instructions" in instructions(here)
    assert "one voice among several people" in instructions(here)

    there = await ask(fake, llm, OTHER_CHANNEL_ID)
    assert there["model"] == MODEL_NAME and PIRATE not in instructions(there)


async def test_a_model_outside_the_allow_list_is_refused(bot: RunningBot, fake: FakeDiscord, llm: FakeLLM) -> None:
    """A model MODELS does not name is refused in one line listing the allowed ones; the answer keeps its model."""
    await bot.start(models=frozenset({STRONG}))
    said = await profile(fake, "set", setting="model", value="gpt-9-ultra")
    assert said == (f"Not changed: model 'gpt-9-ultra' is not allowed here: choose {MODEL_NAME}, {STRONG}.")
    assert (await ask(fake, llm))["model"] == MODEL_NAME


async def test_show_names_where_each_value_comes_from(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM, tmp_path: Path
) -> None:
    """Command, channel file entry, server file entry and default are each named, the command's with its setter."""
    file = tmp_path / "profiles.toml"
    file.write_text(
        f'[servers.{fake.guild_id}]\npersona = "Be brief."\ntools = ["archive"]\n\n'
        f'[channels.{CHANNEL_ID}]\nmode = "chatty"\n'
    )
    await bot.start(models=frozenset({STRONG}), profiles_file=file)
    await profile(fake, "set", setting="model", value=STRONG)
    lines = (await profile(fake, "show", permissions=MEMBER)).splitlines()
    # The embed as text: its title and description, then each field's name and value, its source on a line below.
    assert lines[:2] == ["Parley's profile", f"In <#{CHANNEL_ID}>: each value, and where it comes from."]
    assert lines[2:5] == ["Persona: “Be brief.”", "the server's entry in PROFILES_FILE", f"Model: `{STRONG}`"]
    assert lines[5].startswith(f"set for this channel by command by <@{ALICE_ID}> <t:")
    assert lines[6:12] == [
        f"Judge model: `{MODEL_NAME}`",
        "default: JUDGE_MODEL",
        "Tools: `archive`",
        "the server's entry in PROFILES_FILE",
        "Mode: `chatty`",
        "this channel's entry in PROFILES_FILE",
    ]


async def test_the_command_overrides_the_file_and_reset_brings_it_back(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM, tmp_path: Path
) -> None:
    """A command's persona wins over the file's; reset drops it and the file's applies again."""
    file = tmp_path / "profiles.toml"
    file.write_text(f'[channels.{CHANNEL_ID}]\npersona = "From the file."\n')
    await bot.start(profiles_file=file)
    await profile(fake, "set", setting="persona", value=PIRATE)
    request = await ask(fake, llm)
    assert PIRATE in instructions(request) and "From the file." not in instructions(request)
    said = await profile(fake, "reset", setting="persona")
    assert said.startswith(f"Reset **persona** of <#{CHANNEL_ID}> from the next message on")
    assert "From the file." in instructions(await ask(fake, llm))


async def test_the_server_default_needs_manage_server_and_applies_to_every_channel(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """Manage Channels cannot set the server default; Manage Server can, and #random then uses it."""
    await bot.start(models=frozenset({STRONG}))
    refused = await profile(fake, "set", setting="model", value=STRONG, scope="server")
    assert refused == "You need the Manage Server permission to change the server default profile."
    assert (await ask(fake, llm, OTHER_CHANNEL_ID))["model"] == MODEL_NAME
    await run_group_command(
        fake,
        "profile",
        "set",
        [string_option("setting", "model"), string_option("value", STRONG), string_option("scope", "server")],
        permissions=ADMIN,
    )
    assert (await ask(fake, llm, OTHER_CHANNEL_ID))["model"] == STRONG


async def test_set_needs_manage_channels(bot: RunningBot, fake: FakeDiscord, llm: FakeLLM) -> None:
    """A member without Manage Channels is told so, and the channel's persona stays unset."""
    await bot.start()
    said = await profile(fake, "set", permissions=MEMBER, setting="persona", value=PIRATE)
    assert said == "You need the Manage Channels permission in this channel to use /parley-admin profile set."
    assert PIRATE not in instructions(await ask(fake, llm))


async def test_the_tools_offered_follow_the_profile(bot: RunningBot, fake: FakeDiscord, llm: FakeLLM) -> None:
    """With tools set to memory the model is offered remember and recall only; with none, no tools."""
    await bot.start()
    assert {"search_history", "remember"} <= tool_names(await ask(fake, llm))
    await profile(fake, "set", setting="tools", value="memory")
    request = await ask(fake, llm)
    assert tool_names(request) == {"remember", "recall"} and "`remember` saves a fact" in instructions(request)
    assert "Your tools read this channel's older messages" not in instructions(request)
    await profile(fake, "set", setting="tools", value="none")
    assert tool_names(await ask(fake, llm)) == set()


async def test_mode_is_a_profile_field_and_its_shortcut_still_works(bot: RunningBot, fake: FakeDiscord) -> None:
    """`/parley-admin mode` sets the channel's mode, which `show` lists as set by command, and the decider follows
    it."""
    client = await bot.start()
    await run_command(fake, "mode", [option("mode", "mention-only")])
    assert client.decider.modes[CHANNEL_ID] == "mention-only"
    shown = await profile(fake, "show")
    assert f"Mode: `mention-only`\nset for this channel by command by <@{ALICE_ID}> <t:" in shown
    await profile(fake, "set", setting="mode", value="chatty")
    assert client.decider.modes[CHANNEL_ID] == "chatty"


async def test_a_profile_survives_a_restart(bot: RunningBot, fake: FakeDiscord, llm: FakeLLM) -> None:
    """Persona and model set by command still apply after the bot restarts on the same archive."""
    await bot.start(models=frozenset({STRONG}))
    await profile(fake, "set", setting="persona", value=PIRATE)
    await profile(fake, "set", setting="model", value=STRONG)
    await bot.stop()
    await bot.start(models=frozenset({STRONG}))
    request = await ask(fake, llm)
    assert request["model"] == STRONG and PIRATE in instructions(request)


@pytest.mark.slow
async def test_a_malformed_profiles_file_stops_the_bot_with_one_line(
    fake: FakeDiscord, llm: FakeLLM, tmp_path: Path
) -> None:
    """Invalid TOML in PROFILES_FILE: exit 2 and one line naming the file, the line and the problem."""
    file = tmp_path / "profiles.toml"
    file.write_text(f'[channels.{CHANNEL_ID}]\npersona = "unclosed\nmode = "chatty"\n')
    env = bot_environment(fake, llm, tmp_path / "parley.db", PROFILES_FILE=str(file))
    code, stderr = await run_bot_py(env, tmp_path)
    assert code == 2
    assert stderr.splitlines() == [
        f"Configuration error: PROFILES_FILE {file}, line 2: not valid TOML: Illegal character '\\n' (column 20)"
    ]
    assert fake.identifies == []


@pytest.mark.slow
async def test_a_model_outside_the_allow_list_in_the_file_stops_the_bot(
    fake: FakeDiscord, llm: FakeLLM, tmp_path: Path
) -> None:
    """A file naming a model MODELS does not allow: exit 2, one line with the setting's line number."""
    file = tmp_path / "profiles.toml"
    file.write_text(f'# support desk\n[channels.{CHANNEL_ID}]\npersona = "Terse."\nmodel = "gpt-9-ultra"\n')
    env = bot_environment(fake, llm, tmp_path / "parley.db", PROFILES_FILE=str(file), MODELS=STRONG)
    code, stderr = await run_bot_py(env, tmp_path)
    assert code == 2
    assert stderr.splitlines() == [
        f"Configuration error: PROFILES_FILE {file}, line 4: model 'gpt-9-ultra' is not allowed here:"
        f" choose {MODEL_NAME}, {STRONG}"
    ]


# --- Part 4: a role mention is a mention -------------------------------------------------------


async def test_a_mention_of_parleys_own_role_starts_a_conversation(bot: RunningBot, fake: FakeDiscord) -> None:
    """Picking Parley's integration role instead of its user still gets an answer, decided as a mention."""
    client = await bot.start()
    message = await say(fake, ALICE_ID, f"<@&{BOT_ROLE_ID}> how do I list files?")
    [post] = await fake.wait_for_posts(1, channel_id=CHANNEL_ID)
    assert post.reply_to == int(message["id"])
    assert (await decided(client, message)).reason == "mention"


async def test_a_mention_of_another_role_starts_nothing(bot: RunningBot, fake: FakeDiscord) -> None:
    """Another bot's integration role mentioned: Parley stays silent."""
    await bot.start()
    await say(fake, ALICE_ID, f"<@&{OTHER_BOT_ROLE_ID}> how do I list files?")
    await assert_silent(fake, 0)


async def test_typing_a_model_suggests_the_allowed_ones(bot: RunningBot, fake: FakeDiscord) -> None:
    """While `value` is typed for `model`, Discord is offered the allowed models that contain what was typed."""
    await bot.start(models=frozenset({STRONG, "cheap-model"}))
    payload = command_payload(fake, "profile")
    payload["type"] = 4  # APPLICATION_COMMAND_AUTOCOMPLETE
    typed = [string_option("setting", "model"), {**string_option("value", "-mo"), "focused": True}]
    payload["data"]["options"] = [
        {"type": 2, "name": "profile", "options": [{"type": 1, "name": "set", "options": typed}]}
    ]
    await fake.dispatch("INTERACTION_CREATE", payload)
    await fake.wait_for(lambda: any(payload["token"] in call.path for call in fake.interaction_calls))
    [call] = [call for call in fake.interaction_calls if payload["token"] in call.path]
    assert call.body is not None and call.body["type"] == 8  # APPLICATION_COMMAND_AUTOCOMPLETE_RESULT
    assert [choice["value"] for choice in call.body["data"]["choices"]] == [MODEL_NAME, "cheap-model", STRONG]


async def test_the_judge_runs_on_the_channels_judge_model(bot: RunningBot, fake: FakeDiscord, llm: FakeLLM) -> None:
    """With a judge model in the channel's profile, the judge's request goes to it and the answer's to the default."""
    llm.handler = judge_or_echo(True)
    await bot.start(use_llm_judge=True, models=frozenset({STRONG}))
    await profile(fake, "set", setting="judge_model", value=STRONG)
    await say(fake, ALICE_ID, f"<@{BOT_ID}> how do I mount a disk?")
    await fake.wait_for_posts(1)
    await say(fake, BOB_ID, "is that the same on fedora")
    await fake.wait_for_posts(2)
    judged = [request for request in llm.requests if "final_result" in tool_names(request)]
    assert [request["model"] for request in judged] == [STRONG]
    assert {request["model"] for request in llm.requests if request not in judged} == {MODEL_NAME}
