"""Tests for the /parley operator commands: channel modes in the decider, the decision journal, the
replies' wording, and each command's behaviour and permission checks through the fake Discord."""

from __future__ import annotations

import typing
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import discord
import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from agent import build_judge
from bot import build_client
from commands.access import AccessOperated
from commands.admin import MODE_EFFECTS, AdminCommands, AdminOperated
from commands.embeds import MESSAGE_EMBED_CHARS_MAX, PARLEY_COLOUR, messages_of
from commands.knowledge import KnowledgeOperated
from commands.knowledge_pins import PinsOperated
from commands.memory import MemoryOperated
from commands.parley import (
    WHY_MAX_COUNT,
    ParleyCommands,
    ParleyOperated,
    decision_field,
    shard_of,
    status_embed,
    usage_fields,
    why_embeds,
)
from commands.profile import ProfileOperated
from commands.tree import refusal
from commands.usage_report import UsageOperated
from config import ChannelMode
from conversation import ChannelConversation, ConversationManager
from deciding.decider import Judge, ResponseDecider
from deciding.journal import LoggedDecision
from edge.gateway import point_at_discord
from ops.cli import parse_args
from records import CHANNEL_MODES, MessageRecord
from tests.deciding.test_journal import logged
from tests.fakes.fake_discord import ALICE_ID, BOB_ID, BOT_ID, CHANNEL_ID, GUILD_ID, FakeDiscord
from tests.fakes.fake_llm import FakeLLM, message_text
from tests.support.archive_contract_support import REFUSE_MODES, raw_db
from tests.support.e2e_support import (
    MEMBER,
    RunningBot,
    assert_ephemeral_one_liner,
    bot_settings,
    decided,
    eventually,
    is_callback,
    option,
    reply_embeds,
    run_command,
    say,
)
from usage.budget import UsageSummary

BOT, ALICE, BOB, CHANNEL, OTHER_CHANNEL = 1, 10, 11, 500, 501
T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
WINDOW = timedelta(seconds=60)

# Every command Parley registers, in the order the tree adds them.
ALL_COMMANDS = ["parley", "parley-admin", "remind", "ask", "Ask Parley", "Report to moderators", "Regenerate"]


# --- Modes in the decider ------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


class Channel:
    """One channel's conversation, fed message by message at the clock's time."""

    def __init__(self, clock: Clock, channel_id: int = CHANNEL) -> None:
        self.clock, self.channel_id = clock, channel_id
        self.manager = ConversationManager(600, clock=clock)
        self.conversation: ChannelConversation = self.manager.start(channel_id)
        self._ids = iter(range(1000, 10**6))

    def say(
        self,
        author: int,
        content: str = "and then?",
        *,
        mentions: frozenset[int] = frozenset(),
        reply_to: int | None = None,
    ) -> MessageRecord:
        record = MessageRecord(
            message_id=next(self._ids),
            channel_id=self.channel_id,
            author_id=author,
            author=f"user{author}",
            content=content,
            timestamp=self.clock.now,
            is_bot=author == BOT,
            mention_ids=mentions,
            reply_to_author_id=reply_to,
        )
        self.manager.record_message(self.channel_id, record)
        return record

    def answered(self, person: int) -> None:
        """The bot asked, then answered `person`'s question."""
        self.say(person, "how do I list files?", mentions=frozenset({BOT}))
        self.say(BOT, "use ls", reply_to=person)


def decider(clock: Clock, modes: dict[int, str], judge: Judge | None = None) -> ResponseDecider:
    return ResponseDecider(WINDOW.total_seconds(), judge, clock=clock, modes=modes)


async def reason(decider: ResponseDecider, channel: Channel, message: MessageRecord) -> str:
    return (await decider.decide(message, channel.conversation, BOT)).reason


def test_the_modes_offered_are_the_engines() -> None:
    """The command's choices, the engine's modes and the descriptions name the same three modes."""
    assert typing.get_args(ChannelMode) == CHANNEL_MODES == tuple(MODE_EFFECTS)


async def test_mention_only_answers_only_explicit_triggers() -> None:
    """Mention-only turns a follow-up into `mention_only`; mentions still count, gates keep their reasons."""
    clock = Clock()
    modes = {CHANNEL: "mention-only"}
    here, elsewhere = Channel(clock), Channel(clock, OTHER_CHANNEL)
    decide = decider(clock, modes)
    here.answered(ALICE)
    elsewhere.answered(ALICE)
    assert await reason(decide, here, here.say(ALICE)) == "mention_only"
    assert await reason(decide, here, here.say(ALICE, "again", mentions=frozenset({BOT}))) == "mention"
    assert await reason(decide, here, here.say(ALICE, "hey", mentions=frozenset({BOB}))) == "addressed_to_other"
    assert await reason(decide, elsewhere, elsewhere.say(ALICE)) == "followup"


async def test_a_mode_change_applies_from_the_next_message() -> None:
    """The decider reads the mapping it was given on every message, so a change needs no new decider."""
    clock = Clock()
    modes: dict[int, str] = {}
    channel = Channel(clock)
    decide = decider(clock, modes)
    channel.answered(ALICE)
    modes[CHANNEL] = "mention-only"
    assert await reason(decide, channel, channel.say(ALICE)) == "mention_only"
    channel.answered(ALICE)
    modes[CHANNEL] = "normal"
    assert await reason(decide, channel, channel.say(ALICE)) == "followup"


@pytest.mark.parametrize(("mode", "expected"), [("normal", "outside_window"), ("chatty", "followup")])
async def test_chatty_doubles_the_followup_window(mode: str, expected: str) -> None:
    """1.5 windows after the bot spoke is too late for a follow-up in normal mode, not in chatty; 2.5 is in both."""
    clock = Clock()
    channel = Channel(clock)
    channel.answered(ALICE)
    clock.now += WINDOW * 1.5
    assert await reason(decider(clock, {CHANNEL: mode}), channel, channel.say(ALICE)) == expected
    clock.now += WINDOW
    assert await reason(decider(clock, {CHANNEL: mode}), channel, channel.say(BOB)) == "outside_window"


@pytest.mark.parametrize(("mode", "judged"), [("normal", False), ("chatty", True)])
async def test_chatty_asks_the_judge_before_the_bot_has_spoken(mode: str, judged: bool) -> None:
    """With a judge, chatty mode puts a message to it even while the bot has not said anything yet."""
    asked: list[int] = []

    async def judge(message: MessageRecord, conversation: ChannelConversation) -> tuple[bool, str, float]:
        asked.append(message.message_id)
        return True, "a question for the bot", 0.75

    clock = Clock()
    channel = Channel(clock)
    channel.say(ALICE, "hi", mentions=frozenset({BOT}))
    decision = await decider(clock, {CHANNEL: mode}, judge).decide(channel.say(BOB), channel.conversation, BOT)
    assert (decision.reason, len(asked)) == (("judge_yes", 1) if judged else ("bot_silent", 0))


async def test_chatty_judge_is_asked_at_most_its_calls_per_minute(make_settings: Any) -> None:
    """A chatty channel's burst of messages reaches the judge model 3 times a minute; the rest are `judge_budget`."""
    asked: list[int] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        asked.append(len(messages))
        verdict = {"respond": False, "confidence": 0.9, "reason": "side talk"}
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, verdict)])

    clock = Clock()
    judge = build_judge(make_settings(), model=FunctionModel(model), bot_user_id=BOT)
    decide = ResponseDecider(
        WINDOW.total_seconds(),
        judge,
        clock=clock,
        modes={CHANNEL: "chatty", OTHER_CHANNEL: "chatty"},
        judge_calls_per_minute=3,
    )
    here, elsewhere = Channel(clock), Channel(clock, OTHER_CHANNEL)
    reasons = [await reason(decide, here, here.say(BOB, f"chatter {n}")) for n in range(10)]
    assert reasons == ["judge_no"] * 3 + ["judge_budget"] * 7
    assert len(asked) == 3
    assert await reason(decide, elsewhere, elsewhere.say(BOB)) == "judge_no"
    clock.now += timedelta(seconds=20)  # one call back, at 3 a minute
    assert [await reason(decide, here, here.say(BOB)) for _ in range(2)] == ["judge_no", "judge_budget"]
    assert len(asked) == decide.judge_calls == 5


# --- What the replies say -----------------------------------------------------------------------


def test_why_field_shows_verdict_reason_confidence_author_and_link() -> None:
    """A judged decision shows its confidence; names and text are escaped; the link opens the message."""
    message_id = 1301000000000000000
    entry = LoggedDecision(message_id, "bob_*", "is **that** it?", False, "judge_no", "judge", 0.8)
    field = decision_field(entry, GUILD_ID, CHANNEL_ID)
    assert field.name == "silent · judge_no (judge, confidence 0.80)"
    assert field.value.startswith(r"**bob\_\***") and r"“is \*\*that\*\* it?”" in field.value
    assert field.value.endswith(f"[jump](https://discord.com/channels/{GUILD_ID}/{CHANNEL_ID}/{message_id})")
    assert f"<t:{int(discord.utils.snowflake_time(message_id).timestamp())}:R>" in field.value


def test_why_without_decisions_says_so() -> None:
    """An empty channel gets one embed that says so, not an empty list."""
    [embed] = why_embeds([], GUILD_ID, CHANNEL_ID, PARLEY_COLOUR)
    assert embed.description == f"No decisions recorded in <#{CHANNEL_ID}> yet." and not embed.fields


def test_why_is_timed_by_its_newest_decision() -> None:
    """The embed's timestamp, which Discord shows in each reader's zone, is when the newest decision's message came."""
    entries = [logged(1301000000000000000 + number) for number in (5, 4)]
    [embed] = why_embeds(entries, GUILD_ID, CHANNEL_ID, discord.Colour.red())
    assert embed.timestamp == discord.utils.snowflake_time(entries[0].message_id)
    assert embed.colour == discord.Colour.red() and len(embed.fields) == 2


def test_status_lists_participants_as_mentions_and_caps_them() -> None:
    """Participants render as mentions (up to 20, then a count), with turns, tokens, the mode and the shard."""
    conversation = ConversationManager().start(CHANNEL)
    conversation.participants.update(range(100, 125))
    conversation.bot_turns = 3
    today = UsageSummary(date(2026, 3, 10), 0, 0, [])
    embed = status_embed(conversation, CHANNEL, "chatty", today, 0, shard="0 of 1", servers="", colour=PARLEY_COLOUR)
    fields = {field.name: field.value or "" for field in embed.fields}
    assert fields["Participants"].startswith("<@100>, <@101>") and fields["Participants"].endswith("<@119> and 5 more")
    assert "<@120>" not in fields["Participants"]
    assert (fields["Bot turns"], fields["Model history"]) == ("3", "about 0 tokens in 0 messages")
    assert (fields["Mode"], fields["Shard"]) == ("chatty", "0 of 1") and "MCP servers" not in fields
    assert embed.timestamp == conversation.started_at
    assert embed.description is not None and f"<t:{int(conversation.started_at.timestamp())}:R>" in embed.description


def test_status_without_a_conversation_says_what_starts_one() -> None:
    """No conversation: the mode, shard and tokens still show, the archive's recheck under the description, and the
    MCP servers when there are some."""
    today = UsageSummary(date(2026, 3, 10), 0, 0, [])
    recheck = "Recheck of the archive against Discord: 1/2 channels done"
    embed = status_embed(
        None, CHANNEL, "normal", today, 0, shard="1 of 2", servers="docs up", colour=PARLEY_COLOUR, recheck=recheck
    )
    assert embed.description is not None and embed.description.startswith(f"No conversation in <#{CHANNEL}>")
    assert embed.description.endswith(f"starts one.\n{recheck}")
    assert [field.name for field in embed.fields] == ["Mode", "Shard", "Tokens today (UTC)", "MCP servers"]
    assert embed.fields[-1].value == "docs up" and embed.timestamp is None


def test_usage_shows_the_budget_and_when_it_resets_and_the_top_members() -> None:
    """Status's usage fields: the server against its budget with the next UTC midnight, the channel, top members."""
    summary = UsageSummary(date(2026, 3, 10), 12345, 2345, [(100, 9000), (101, 3345)])
    midnight = int(datetime(2026, 3, 11, tzinfo=UTC).timestamp())
    tokens, top = usage_fields(summary, 100_000)
    assert tokens.value.splitlines() == [
        f"This server: 12,345 of 100,000 (resets <t:{midnight}:R>)",
        "This channel: 2,345",
    ]
    assert (top.name, top.value) == ("Top members today", "<@100> 9,000, <@101> 3,345")
    [tokens] = usage_fields(UsageSummary(date(2026, 3, 10), 0, 0, []), 0)
    assert tokens.value == "This server: 0 (no daily budget)\nThis channel: 0"


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (discord.app_commands.MissingPermissions(["manage_channels"]), "You need the Manage Channels permission"),
        (discord.app_commands.NoPrivateMessage(), "only in a server channel"),
        (discord.app_commands.CommandNotFound("parley", []), "python bot.py --sync"),
        (discord.app_commands.AppCommandError("boom"), "Sorry, that command failed"),
    ],
)
def test_every_refusal_is_one_line(error: discord.app_commands.AppCommandError, expected: str) -> None:
    """Each way a command can be turned down is explained in one line."""
    text = refusal(error, "parley mode")
    assert expected in text and "\n" not in text


def test_members_see_parley_and_only_admins_see_parley_admin(make_settings) -> None:
    """Discord gets two guild-only groups: `/parley` with no default permissions, so every member sees it, and
    `/parley-admin` shown by default to Manage Messages; their options are bounded."""
    client = build_client(make_settings(llm_base_url="http://127.0.0.1:9/v1", database_url=""))
    groups = {group.name: group for group in client.tree.get_commands(type=discord.AppCommandType.chat_input)}
    assert isinstance(groups["parley"], ParleyCommands) and isinstance(groups["parley-admin"], AdminCommands)
    members, admins = (groups[name].to_dict(client.tree) for name in ("parley", "parley-admin"))
    assert members["dm_permission"] is False and admins["dm_permission"] is False
    assert members["default_member_permissions"] is None
    assert admins["default_member_permissions"] == discord.Permissions(manage_messages=True).value
    options = {option["name"]: option for option in members["options"]}
    assert list(options) == ["why", "status", "memory", "catchup", "model", "privacy"]
    assert [sub["name"] for sub in options["memory"]["options"]] == ["list", "forget"]
    assert [sub["name"] for sub in options["privacy"]["options"]] == ["optout", "optin", "export", "erase"]
    [count] = options["why"]["options"]
    assert (count["min_value"], count["max_value"], count["required"]) == (1, 25, False)
    options = {option["name"]: option for option in admins["options"]}
    assert list(options) == [
        "mode",
        "threads",
        "forget",
        "usage",
        "context",
        "profile",
        "access",
        "digest",
        "knowledge",
        "support",
        "moderation",
        "actions",
        "schedule",
    ]
    assert [sub["name"] for sub in options["schedule"]["options"]] == ["add", "list", "remove", "run"]
    prompt, when, channel = options["schedule"]["options"][0]["options"]
    assert (prompt["max_length"], when["max_length"], channel["required"]) == (1500, 100, False)
    assert [sub["name"] for sub in options["support"]["options"]] == ["on", "off", "show", "report"]
    assert [sub["name"] for sub in options["context"]["options"]] == ["save", "list", "restore"]
    report = options["support"]["options"][-1]
    [period] = report["options"]
    assert (report["name"], period["name"], period["required"]) == ("report", "period", False)
    assert [choice["value"] for choice in period["choices"]] == ["week", "month"]
    moderation = [sub["name"] for sub in options["moderation"]["options"]]
    assert moderation == ["channel", "rules", "watch", "words", "cases"]
    assert [sub["name"] for sub in options["actions"]["options"]] == ["on", "off", "show"]
    knowledge = {sub["name"]: sub for sub in options["knowledge"]["options"]}
    assert list(knowledge) == ["add", "list", "remove", "pins"]
    # The pins setting: a choice of three, required.
    [setting] = knowledge["pins"]["options"]
    choices = [choice["value"] for choice in setting["choices"]]
    assert (setting["name"], choices, setting["required"]) == ("setting", ["on", "off", "status"], True)
    # Discord's attachment picker (type 11) for the file, required.
    [file, _] = knowledge["add"]["options"]
    assert (file["name"], file["type"], file["required"]) == ("file", 11, True)
    access = {sub["name"]: sub for sub in options["access"]["options"]}
    assert list(access) == ["allow", "block", "clear", "show"]
    # One picker per kind of target, none required: the command refuses anything but exactly one.
    targets = {option["name"]: option for option in access["block"]["options"]}
    assert {name: (option["type"], option["required"]) for name, option in targets.items()} == {
        "channel": (7, False),
        "role": (8, False),
        "member": (6, False),
    }
    assert discord.ChannelType.category.value in targets["channel"]["channel_types"]
    [mode] = options["mode"]["options"]
    assert [choice["value"] for choice in mode["choices"]] == list(CHANNEL_MODES)
    [setting] = options["threads"]["options"]
    assert [choice["value"] for choice in setting["choices"]] == ["on", "off"]
    [period] = options["usage"]["options"]
    assert [choice["value"] for choice in period["choices"]] == ["day", "week", "month"]
    digest = {sub["name"]: sub for sub in options["digest"]["options"]}
    assert list(digest) == ["on", "off", "show"]
    every, hour, weekday = digest["on"]["options"]
    assert [choice["value"] for choice in every["choices"]] == ["daily", "weekly"]
    assert (hour["min_value"], hour["max_value"], hour["required"]) == (0, 23, False)
    assert [choice["value"] for choice in weekday["choices"]][::6] == ["monday", "sunday"]


def test_only_sync_flag_forces_registration() -> None:
    """`--sync` forces registration; no argument keeps the plain start."""
    assert parse_args([]).sync is False
    assert parse_args(["--sync"]).sync is True


# --- The commands through the fake Discord -----------------------------------------------------


async def test_why_shows_count_decisions_newest_first(bot: RunningBot, fake: FakeDiscord) -> None:
    """`count` limits the list, newest first; a learned decision shows its score; idle silence is `no_conversation`."""
    client = await bot.start()
    await decided(client, await say(fake, BOB_ID, "anyone around?"))
    await say(fake, ALICE_ID, f"<@{BOT_ID}> how do I list files?")
    await fake.wait_for_posts(1)
    # Bob answering Alice makes her next line a `cut_in` for the rules: the learned tier weighs it.
    await decided(client, await say(fake, BOB_ID, f"<@{ALICE_ID}> ls -a shows them"))
    await decided(client, await say(fake, ALICE_ID, "and hidden ones?"))
    [embed] = reply_embeds(await run_command(fake, "why", [option("count", 3)]))
    newest, bobs, older = embed["fields"]
    assert embed["description"].startswith("Last 3 decisions")
    assert bobs["name"].startswith("silent · addressed_to_other") and older["name"].startswith("answered · mention")
    assert "(learned, score " in newest["name"] and "and hidden ones?" in newest["value"]
    [embed] = reply_embeds(await run_command(fake, "why"))
    oldest = embed["fields"][-1]
    assert oldest["name"] == "silent · no_conversation (start)"
    assert oldest["value"].startswith("**Bob**") and "anyone around?" in oldest["value"]


def test_the_largest_why_keeps_discords_embed_limits() -> None:
    """`/parley why` at its largest (25 decisions, markdown-heavy names and excerpts) is paged over embeds, none over
    Discord's limits, and nothing is cut."""
    entries = [
        logged(1301000000000000000 + number, "already_followed_up", author="*_" * 16, excerpt="*_~`|" * 12)
        for number in range(WHY_MAX_COUNT)
    ]
    embeds = why_embeds(entries, GUILD_ID, CHANNEL_ID, PARLEY_COLOUR)
    assert sum(len(embed.fields) for embed in embeds) == WHY_MAX_COUNT and len(embeds) > 1
    assert all(len(embed) <= MESSAGE_EMBED_CHARS_MAX for embed in embeds)
    assert all(sum(map(len, message)) <= MESSAGE_EMBED_CHARS_MAX for message in messages_of(embeds))


async def test_a_long_why_arrives_as_several_ephemeral_posts(bot: RunningBot, fake: FakeDiscord) -> None:
    """25 long decisions are more than one message's embeds hold: the callback, then ephemeral follow-ups, each
    within Discord's limits (the fake refuses any that is not)."""
    client = await bot.start()
    for number in range(25):
        entry = logged(1301000000000000000 + number, author="a" * 32, excerpt="x" * 59 + "…")
        client.decisions.add(CHANNEL_ID, entry)
    expected = messages_of(why_embeds(client.decisions.recent(CHANNEL_ID), GUILD_ID, CHANNEL_ID, PARLEY_COLOUR))
    calls = await run_command(fake, "why", [option("count", 25)], posts=len(expected))
    assert len(calls) == len(expected) > 1
    assert is_callback(calls[0]) and all("/webhooks/" in call.path for call in calls[1:])
    assert all(call.body is not None and call.body.get("data", call.body)["flags"] & 64 for call in calls)
    embeds = reply_embeds(calls)
    assert sum(len(embed["fields"]) for embed in embeds) == 25
    assert embeds[1]["title"] == "Why Parley answered or stayed silent (continued)"


def stored_modes(tmp_path: Path) -> list[tuple[int, str, int]]:
    """The modes in the archive's file: (channel, mode, set by)."""
    with raw_db(tmp_path / "parley.db") as db:
        return db.execute("SELECT scope_id, value, set_by FROM profile_settings WHERE field = 'mode'").fetchall()


async def test_mode_needs_manage_channels(bot: RunningBot, fake: FakeDiscord, tmp_path: Path) -> None:
    """A member without Manage Channels is told so in one line, and the mode stays as it was."""
    client = await bot.start()
    text = assert_ephemeral_one_liner(await run_command(fake, "mode", [option("mode", "chatty")], permissions=MEMBER))
    assert text == "You need the Manage Channels permission in this channel to use /parley-admin mode."
    assert client.mode_of(CHANNEL_ID) == "normal"
    assert stored_modes(tmp_path) == []


async def test_mode_is_set_and_stored(bot: RunningBot, fake: FakeDiscord, tmp_path: Path) -> None:
    """A moderator's mode change answers what it does, applies at once and is in the archive."""
    client = await bot.start()
    text = assert_ephemeral_one_liner(await run_command(fake, "mode", [option("mode", "chatty")]))
    assert text.startswith(f"<#{CHANNEL_ID}> is **chatty** from the next message on: ") and "restarts" not in text
    assert client.mode_of(CHANNEL_ID) == "chatty" and client.decider.modes[CHANNEL_ID] == "chatty"
    assert stored_modes(tmp_path) == [(CHANNEL_ID, "chatty", ALICE_ID)]


async def test_mode_that_cannot_be_saved_is_refused_and_unchanged(
    bot: RunningBot, fake: FakeDiscord, tmp_path: Path
) -> None:
    """If the archive drops the mode's write, the moderator is told in one line and the old mode stays."""
    client = await bot.start()
    with raw_db(tmp_path / "parley.db") as db:
        db.execute(REFUSE_MODES.format("INSERT"))
    text = assert_ephemeral_one_liner(await run_command(fake, "mode", [option("mode", "chatty")]))
    assert text == "The mode could not be saved, so it is unchanged; the details are in Parley's log."
    assert client.mode_of(CHANNEL_ID) == "normal" and CHANNEL_ID not in client.decider.modes


async def test_mode_without_archive_says_it_lasts_until_restart(bot: RunningBot, fake: FakeDiscord) -> None:
    """With the archive off the mode is kept in memory, and the reply says so."""
    client = await bot.start(database_url="")
    text = assert_ephemeral_one_liner(await run_command(fake, "mode", [option("mode", "mention-only")]))
    assert text.endswith("It lasts until Parley restarts: the archive is off.")
    assert client.mode_of(CHANNEL_ID) == "mention-only"


async def test_unknown_mode_is_refused(bot: RunningBot, fake: FakeDiscord) -> None:
    """A value outside the choices (a hand-made request) is refused in one line and changes nothing."""
    client = await bot.start()
    text = assert_ephemeral_one_liner(await run_command(fake, "mode", [option("mode", "loud")]))
    assert text == "Unknown mode 'loud': choose mention-only, normal or chatty."
    assert client.mode_of(CHANNEL_ID) == "normal"


async def test_forget_needs_manage_messages(bot: RunningBot, fake: FakeDiscord) -> None:
    """A member without Manage Messages is told so in one line, and the conversation goes on."""
    client = await bot.start()
    await say(fake, ALICE_ID, f"<@{BOT_ID}> hi")
    await fake.wait_for_posts(1)
    text = assert_ephemeral_one_liner(await run_command(fake, "forget", permissions=MEMBER))
    assert text == "You need the Manage Messages permission in this channel to use /parley-admin forget."
    assert client.manager.get(CHANNEL_ID) is not None


async def test_forget_ends_the_conversation_and_drops_its_model_history(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """After forget there is no conversation; the next mention's model call carries nothing said before it."""
    client = await bot.start()
    await say(fake, ALICE_ID, f"<@{BOT_ID}> remember the word pineapple")
    await fake.wait_for_posts(1)
    text = assert_ephemeral_one_liner(await run_command(fake, "forget"))
    assert text.startswith("Conversation ended and its model history dropped")
    assert client.manager.get(CHANNEL_ID) is None
    again = assert_ephemeral_one_liner(await run_command(fake, "forget"))
    assert again.startswith("There was no conversation in this channel; the next @mention still starts afresh")
    await say(fake, ALICE_ID, f"<@{BOT_ID}> what was the word?")
    await fake.wait_for_posts(2)
    messages = llm.requests[-1]["messages"]
    assert "assistant" not in [message["role"] for message in messages]
    assert not any("pineapple" in message_text(message) for message in messages)


async def test_status_is_an_embed_that_pings_no_one(bot: RunningBot, fake: FakeDiscord) -> None:
    """Status is an ephemeral embed in the server's colour (Parley's role's) under allowed_mentions none: participants
    as mentions, turns, tokens, mode and shard, timed by the conversation's start."""
    fake.bot_role_colour = 0xE91E63
    client = await bot.start(server_tokens_per_day=0)  # a server without a daily budget, as its tokens field says
    [embed] = reply_embeds(await run_command(fake, "status"))
    assert embed["description"].startswith(f"No conversation in <#{CHANNEL_ID}> right now") and "timestamp" not in embed
    await say(fake, ALICE_ID, f"<@{BOT_ID}> hi")
    await fake.wait_for_posts(1)
    await say(fake, BOB_ID, "hello all")
    conversation = client.manager.get(CHANNEL_ID)
    assert conversation is not None
    await eventually(lambda: conversation.bot_turns == 1 and BOB_ID in conversation.participants)
    [call] = await run_command(fake, "status")
    assert call.body is not None
    data = call.body["data"]
    assert data["flags"] & 64 and data["allowed_mentions"] == {"parse": []}
    [embed] = data["embeds"]
    assert embed["color"] == 0xE91E63
    assert datetime.fromisoformat(embed["timestamp"]) == conversation.started_at
    fields = {field["name"]: field["value"] for field in embed["fields"]}
    assert fields["Participants"] == f"<@{ALICE_ID}>, <@{BOB_ID}>"
    assert fields["Bot turns"] == "1" and fields["Model history"].startswith("about ")
    assert (fields["Mode"], fields["Shard"]) == ("normal", "0 of 1")
    spent = client.usage.server_tokens(GUILD_ID)
    assert spent > 0
    assert fields["Tokens today (UTC)"] == f"This server: {spent:,} (no daily budget)\nThis channel: {spent:,}"
    assert fields["Top members today"] == f"<@{ALICE_ID}> {spent:,}"


async def test_replies_fall_back_to_parleys_colour(bot: RunningBot, fake: FakeDiscord) -> None:
    """Where Parley's role has no colour, its embeds take Parley's own rather than Discord's grey default."""
    await bot.start()
    [embed] = reply_embeds(await run_command(fake, "status"))
    assert embed["color"] == PARLEY_COLOUR.value


async def test_unknown_subcommand_is_refused(bot: RunningBot, fake: FakeDiscord) -> None:
    """A subcommand this code does not know (stale registration) is answered in one line pointing at --sync."""
    await bot.start()
    text = assert_ephemeral_one_liner(await run_command(fake, "louder"))
    assert "python bot.py --sync" in text


async def test_commands_in_direct_messages_are_refused(bot: RunningBot, fake: FakeDiscord) -> None:
    """Outside a server channel every command answers one line and does nothing."""
    client = await bot.start()
    # Typed as the commands see it: mypy checks that the client is what each command module declares of it.
    views: tuple[
        AccessOperated, AdminOperated, KnowledgeOperated, PinsOperated, MemoryOperated, ParleyOperated,
        ProfileOperated, UsageOperated,
    ] = (client, client, client, client, client, client, client, client)  # fmt: skip
    assert views[-1].usage.summary(GUILD_ID, CHANNEL_ID).server_tokens == 0
    text = assert_ephemeral_one_liner(await run_command(fake, "status", in_guild=False))
    assert text == "Parley's commands work only in a server channel, not in direct messages."


# --- Registering the commands with Discord -----------------------------------------------------


async def logged_in(fake: FakeDiscord, llm: FakeLLM, tmp_path: Path, *, sync: bool, **overrides: Any) -> None:
    """Log a client in (which runs setup_hook) and close it again."""
    settings = bot_settings(fake, llm, tmp_path, database_url="", **overrides)
    point_at_discord(settings)
    client = build_client(settings, sync_commands=sync)
    try:
        await client.login(settings.discord_token.get_secret_value())
    finally:
        await client.close()


async def test_without_archive_a_file_remembers_the_registration(
    fake: FakeDiscord, llm: FakeLLM, tmp_path: Path, discord_endpoints, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the archive off, the first start registers the commands and notes it under data/; the next does not."""
    monkeypatch.chdir(tmp_path)
    await logged_in(fake, llm, tmp_path, sync=False)
    await logged_in(fake, llm, tmp_path, sync=False)
    assert [command["name"] for command in fake.commands[None]] == ALL_COMMANDS
    assert [request.method for request in fake.requests if request.path.endswith("/commands")] == ["PUT"]
    assert (tmp_path / "data" / "command-sync.json").is_file()


async def test_sync_registers_global_commands(
    fake: FakeDiscord, llm: FakeLLM, tmp_path: Path, discord_endpoints, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--sync without GUILD_ID registers /parley globally."""
    monkeypatch.chdir(tmp_path)
    await logged_in(fake, llm, tmp_path, sync=True)
    assert [command["name"] for command in fake.commands[None]] == ALL_COMMANDS


async def test_sync_with_guild_id_registers_in_that_guild(
    fake: FakeDiscord, llm: FakeLLM, tmp_path: Path, discord_endpoints, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--sync with GUILD_ID registers /parley in that guild alone, for instant use while developing."""
    monkeypatch.chdir(tmp_path)
    await logged_in(fake, llm, tmp_path, sync=True, guild_id=GUILD_ID)
    assert list(fake.commands) == [GUILD_ID]
    assert [command["name"] for command in fake.commands[GUILD_ID]] == ALL_COMMANDS


def test_status_names_the_shard_discord_routes_the_server_to() -> None:
    """/parley status names the shard by Discord's rule, (server id >> 22) % shard count."""
    server = (5 << 22) | 12345
    assert shard_of(server, 4) == "1 of 4"
    assert shard_of(server, None) == "0 of 1"
