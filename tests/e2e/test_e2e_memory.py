"""End-to-end: facts remembered through the model's tools, recalled later in their scope, and forgotten on request."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from tests.fakes.fake_discord import (
    ALICE_ID,
    BOB_ID,
    BOT_ID,
    CHANNEL_ID,
    OTHER_CHANNEL_ID,
    FakeDiscord,
    InteractionCall,
)
from tests.fakes.fake_llm import FakeLLM, Reply, ToolCall, last_user_text, message_text
from tests.support.e2e_support import (
    MEMBER,
    MODERATOR,
    RunningBot,
    click,
    command_payload,
    eventually,
    reply_text,
    run_command,
    say,
)

FACT = "Alice deploys on Fridays"
TIMEOUT = 0.3  # seconds of quiet that end a conversation in these tests


class MemoryModel:
    """A model that calls `remember` when asked to remember, `recall` when asked what it knows, and then
    quotes the tool's result as its answer; it notes how many memories were on disk when each result came."""

    def __init__(self, database: Path) -> None:
        self.database = database
        self.on_disk_at_results: list[int] = []
        self.tool_results: list[str] = []

    def __call__(self, request: dict[str, Any]) -> Reply:
        last = request["messages"][-1]
        if last["role"] == "tool":
            result = message_text(last)
            self.tool_results.append(result)
            with sqlite3.connect(self.database) as db:
                ((count,),) = db.execute("SELECT count(*) FROM memories")
            self.on_disk_at_results.append(count)
            return f"tool said: {result}"
        asked = newest_message(request)
        if "please remember" in asked:
            return ToolCall("remember", {"fact": FACT, "about_the_speaker": True})
        if "when do" in asked:
            return ToolCall("recall", {"query": "when deploys"})
        return "ok"


def newest_message(request: dict[str, Any]) -> str:
    """The text of the message being answered, without the context quoted before it."""
    prompt = last_user_text(request)
    return prompt[prompt.rindex("<new_message") :]


def memory_bot(bot: RunningBot, llm: FakeLLM, tmp_path: Path) -> MemoryModel:
    model = MemoryModel(tmp_path / "parley.db")
    llm.handler = model
    return model


async def ask(fake: FakeDiscord, author: int, text: str, channel_id: int = CHANNEL_ID) -> dict[str, Any]:
    """Mention Parley and wait for its answer in that channel; returns the question."""
    before = len(fake.posts_in(channel_id))
    question = await fake.send_user_message(channel_id, author, f"<@{BOT_ID}> {text}")
    await fake.wait_for_posts(before + 1, channel_id)
    return question


async def run_group_command(
    fake: FakeDiscord,
    group: str,
    subcommand: str,
    options: list[dict[str, Any]] | None = None,
    *,
    user_id: int = ALICE_ID,
    permissions: Any = MEMBER,
) -> str:
    """Use `/parley <group> <subcommand>` in #general; returns what the bot answered."""
    payload = command_payload(fake, group, user_id=user_id, permissions=permissions)
    payload["data"]["options"] = [
        {"type": 2, "name": group, "options": [{"type": 1, "name": subcommand, "options": options or []}]}
    ]
    token = payload["token"]

    def calls() -> list[InteractionCall]:
        return [call for call in fake.interaction_calls if f"/{token}" in call.path]

    await fake.dispatch("INTERACTION_CREATE", payload)
    await fake.wait_for(lambda: len(calls()) >= 1, what=f"/parley {group} {subcommand} answered")
    return reply_text(calls())


async def ask_to_remember(fake: FakeDiscord, author: int = ALICE_ID, channel_id: int = CHANNEL_ID) -> dict[str, Any]:
    """Ask Parley to remember FACT and approve its call (`remember` asks first: its entry in tools/registry.py); wait
    for the answer. Returns the question."""
    question = await fake.send_user_message(channel_id, author, f"<@{BOT_ID}> please remember that I deploy on Fridays")

    def prompts() -> list[dict[str, Any]]:
        return [m for m in fake.bot_messages(channel_id) if m["content"].startswith("May I run `remember`")]

    await fake.wait_for(lambda: bool(prompts()), what="the approval prompt")
    [prompt] = prompts()
    [approve] = [b["custom_id"] for row in prompt["components"] for b in row["components"] if b["label"] == "Approve"]
    await click(fake, prompt, approve, user_id=author)
    await fake.wait_for(
        lambda: any("tool said: Remembered" in m["content"] for m in fake.bot_messages(channel_id)), what="the answer"
    )
    return question


def memories_on_disk(tmp_path: Path) -> int:
    with sqlite3.connect(tmp_path / "parley.db") as db:
        ((count,),) = db.execute("SELECT count(*) FROM memories")
    return int(count)


def string_option(name: str, value: str) -> dict[str, Any]:
    return {"type": 3, "name": name, "value": value}


async def test_a_fact_is_on_disk_before_the_answer_and_recalled_after_the_timeout_and_a_restart(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM, tmp_path: Path
) -> None:
    """`remember` commits before the model even sees its result; a later conversation, after a restart, recalls it."""
    model = memory_bot(bot, llm, tmp_path)
    client = await bot.start(conversation_timeout_seconds=TIMEOUT)
    await ask_to_remember(fake)
    assert model.on_disk_at_results == [1]
    assert "Remembered" in fake.posts_in(CHANNEL_ID)[-1].content
    bot.clock.advance(TIMEOUT * 1.5)
    assert client.manager.get(CHANNEL_ID) is None
    await ask(fake, ALICE_ID, "when do I deploy?")
    assert FACT in model.tool_results[-1]
    await bot.stop()
    await bot.start(conversation_timeout_seconds=TIMEOUT)
    await ask(fake, ALICE_ID, "when do I deploy?")
    assert FACT in model.tool_results[-1]


async def test_a_fact_about_alice_from_another_channel_reaches_alice_but_not_bob(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM, tmp_path: Path
) -> None:
    """A fact Alice told about herself in a private channel is recalled for her elsewhere, never for Bob."""
    model = memory_bot(bot, llm, tmp_path)
    await bot.start()
    await ask_to_remember(fake, ALICE_ID, OTHER_CHANNEL_ID)
    await ask(fake, BOB_ID, "when does Alice deploy?")
    assert FACT not in model.tool_results[-1] and "No memories found" in model.tool_results[-1]
    await ask(fake, ALICE_ID, "when do I deploy?")
    assert FACT in model.tool_results[-1]


async def test_forget_about_me_removes_the_fact(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM, tmp_path: Path
) -> None:
    """`/parley memory forget about-me` deletes what Alice told about herself; list and recall no longer show it."""
    model = memory_bot(bot, llm, tmp_path)
    await bot.start()
    await ask_to_remember(fake)
    assert FACT in await run_group_command(fake, "memory", "list")
    assert "Forgot 1 memory" in await run_group_command(fake, "memory", "forget", [string_option("target", "about-me")])
    assert "remembers nothing" in await run_group_command(fake, "memory", "list")
    await ask(fake, ALICE_ID, "when do I deploy?")
    assert "No memories found" in model.tool_results[-1]


async def test_only_manage_messages_forgets_the_channels_memories(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM, tmp_path: Path
) -> None:
    """Bob cannot delete the channel's memories or Alice's by id; a moderator can delete the channel's."""
    memory_bot(bot, llm, tmp_path)
    await bot.start()
    await ask_to_remember(fake)
    with sqlite3.connect(tmp_path / "parley.db") as db:
        ((memory_id,),) = db.execute("SELECT id FROM memories")
    channel = [string_option("target", "channel")]
    assert "Manage Messages" in await run_group_command(fake, "memory", "forget", channel, user_id=BOB_ID)
    by_id = [string_option("target", str(memory_id))]
    assert "neither about you" in await run_group_command(fake, "memory", "forget", by_id, user_id=BOB_ID)
    assert "Forgot 1 memory" in await run_group_command(
        fake, "memory", "forget", channel, user_id=BOB_ID, permissions=MODERATOR
    )


async def test_deleting_the_source_message_deletes_its_memory(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM, tmp_path: Path
) -> None:
    """When the message a fact came from is deleted on Discord, the fact is gone from the archive file."""
    memory_bot(bot, llm, tmp_path)
    await bot.start()
    question = await ask_to_remember(fake)
    assert memories_on_disk(tmp_path) == 1
    await fake.delete_messages(CHANNEL_ID, int(question["id"]))
    # The archive's writer commits the deletion within its flush interval.
    await eventually(lambda: memories_on_disk(tmp_path) == 0)


async def test_context_save_and_restore_round_trip(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM, tmp_path: Path
) -> None:
    """A saved conversation, restored after the channel moved on, is what the model is sent next."""
    llm.handler = lambda request: "ok"
    client = await bot.start()
    await say(fake, BOB_ID, "the codename is pineapple")
    await ask(fake, ALICE_ID, "what is the codename?")
    await eventually(lambda: bool((conversation := client.manager.get(CHANNEL_ID)) and conversation.llm_history))
    saved = await run_group_command(fake, "context", "save", [string_option("name", "launch")], permissions=MODERATOR)
    assert "Saved this conversation" in saved and "launch" in saved
    assert "launch" in await run_group_command(fake, "context", "list")
    await run_command(fake, "forget")
    await ask(fake, ALICE_ID, "fresh start")
    assert "pineapple" not in str(llm.requests[-1]["messages"])
    refused = await run_group_command(fake, "context", "restore", [string_option("name", "launch")])
    assert "Manage Messages" in refused
    restored = await run_group_command(
        fake, "context", "restore", [string_option("name", "launch")], permissions=MODERATOR
    )
    assert "Restored" in restored
    await ask(fake, ALICE_ID, "and again?")
    sent = str(llm.requests[-1]["messages"])
    assert "pineapple" in sent and "what is the codename?" in sent and "fresh start" not in sent
