"""Helpers for the end-to-end tests: bot.py's client running against the local fakes."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import sys
import weakref
from collections.abc import AsyncIterator, Callable, Collection
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any

import discord
from discord.state import ConnectionState

from archive.sqlite_url import sqlite_path_from_url
from bot import Parley, build_client
from commands.admin import AdminCommands
from config import Settings
from conversation import utc_now
from deciding.journal import LoggedDecision
from edge.gateway import point_at_discord
from ops.cli import run
from ops.resources import open_resources
from tests.fakes.fake_discord import (
    ALICE_ID,
    APPLICATION_ID,
    BOT_PERMISSIONS,
    CHANNEL_ID,
    DEFAULT_TOKEN,
    EVERYONE_PERMISSIONS,
    GUILD_ID,
    FakeDiscord,
    InteractionCall,
    snowflake_at,
)
from tests.fakes.fake_llm import MODEL_NAME, FakeLLM, message_text
from tests.support.migrated_sqlite import place_migrated_sqlite

# The longest "the bot said nothing" is watched for: until it has handled what it was sent (`settled`), which it
# almost always has within 0.3 s; a whole suite on two shared cores has outlasted 0.6 s (a usage report read before
# the answer was counted). Only the three tests whose handlers leave something running wait it out.
QUIET = 2.0

ROOT = Path(__file__).resolve().parents[2]


def bot_environment(fake: FakeDiscord, llm: FakeLLM, database: Path, **extra: str) -> dict[str, str]:
    """The environment for `python bot.py` against the fakes: this one, minus any real Discord or model setting."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(("DISCORD_", "LLM_", "LOGFIRE_"))}
    env.update(
        DISCORD_TOKEN=DEFAULT_TOKEN,
        LLM_MODEL=MODEL_NAME,
        LLM_BASE_URL=llm.base_url,
        DATABASE_URL=f"sqlite:///{database}",
        DISCORD_API_BASE_URL=fake.api_base_url,
        DISCORD_GATEWAY_URL=fake.gateway_url,
        **extra,
    )
    return env


async def start_bot_py(
    env: dict[str, str], cwd: Path, *args: str, output: int | IO[bytes] = asyncio.subprocess.PIPE
) -> asyncio.subprocess.Process:
    """`python bot.py ARGS` as a deployment runs it, in `cwd` with exactly `env`; stdout and stderr to `output`."""
    return await asyncio.create_subprocess_exec(
        sys.executable, str(ROOT / "bot.py"), *args, cwd=cwd, env=env, stdout=output, stderr=output
    )


async def run_bot_py(env: dict[str, str], cwd: Path, *args: str, timeout: float = 60) -> tuple[int, str]:
    """Run `python bot.py ARGS` until it exits (killed past `timeout`): its exit code and what it wrote to stderr."""
    process = await start_bot_py(env, cwd, *args)
    try:
        _, stderr = await asyncio.wait_for(process.communicate(), timeout)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode is not None
    return process.returncode, stderr.decode()


def bot_settings(fake: FakeDiscord, llm: FakeLLM, tmp_path: Path, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "discord_token": DEFAULT_TOKEN,
        "llm_model": MODEL_NAME,
        "llm_base_url": llm.base_url,
        "database_url": f"sqlite:///{tmp_path / 'parley.db'}",
        "discord_api_base_url": fake.api_base_url,
        "discord_gateway_url": fake.gateway_url,
        **overrides,
    }
    return Settings(_env_file=None, **values)


class EngineClock:
    """The conversation engine's clock in an end-to-end test: the wall clock, moved on by `advance`.

    The engine reads the time only through the clock it is given (conversation.Clock), so a test lets an
    inactivity timeout pass by advancing this clock instead of sleeping through it.
    """

    def __init__(self) -> None:
        self.ahead = timedelta()

    def __call__(self) -> datetime:
        return utc_now() + self.ahead

    def advance(self, seconds: float) -> None:
        self.ahead += timedelta(seconds=seconds)


# How long discord.py waits for a further GUILD_CREATE after READY and after each one, before on_ready.
GUILD_READY_TIMEOUT = 0.05
# Once every server READY named has come: long enough for a GUILD_CREATE already queued to be taken, no longer.
EVERY_GUILD_CAME = 0.001


def ready_once_every_guild_came(client: discord.Client) -> None:
    """Have the client's session ready as soon as every server READY named as unavailable has come, not
    GUILD_READY_TIMEOUT after the last one: discord.py cannot know none follows, the test's fake sends no more."""
    state = client._connection
    state.__class__ = type(
        f"EveryGuildCame{type(state).__name__}", (type(state),), {"guild_ready_timeout": property(_guild_ready_timeout)}
    )


def _guild_ready_timeout(state: ConnectionState[Any]) -> float:
    return GUILD_READY_TIMEOUT if any(guild.unavailable for guild in state.guilds) else EVERY_GUILD_CAME


class RunningBot:
    """bot.py's client, running through `bot.run` until the test ends; its engine, its digests and its support desk on
    `clock`, across restarts."""

    def __init__(self, fake: FakeDiscord, llm: FakeLLM, tmp_path: Path) -> None:
        self.fake, self.llm, self.tmp_path = fake, llm, tmp_path
        self.clock = EngineClock()
        self.client: Parley | None = None
        self._task: asyncio.Task[None] | None = None
        # The archive and its stores, opened before the client and closed after it, as `ops.cli.serve` does.
        self._resources = contextlib.AsyncExitStack()

    async def start(self, **overrides: Any) -> Parley:
        settings = bot_settings(self.fake, self.llm, self.tmp_path, **overrides)
        point_at_discord(settings)
        await _archive_file_migrated(settings)
        resources = await self._resources.enter_async_context(open_resources(settings))
        self.client = build_client(settings, resources, guild_ready_timeout=GUILD_READY_TIMEOUT)
        ready_once_every_guild_came(self.client)
        # Before the client runs, so the conversations it resumes are judged by this clock too.
        self.client.manager.clock = self.clock
        self.client.digests.clock = self.clock
        self.client.reminders.book.clock = self.clock
        self.client.desk.clock = self.clock
        asyncio.get_running_loop().set_task_factory(_note_starter)
        _running.add(self.client)
        self._task = asyncio.create_task(run(self.client, settings.discord_token.get_secret_value()))
        await self.fake.wait_for_ready()
        await asyncio.wait_for(self.client.wait_until_ready(), 5)
        return self.client

    async def stop(self) -> None:
        if self.client is not None and self._task is not None:
            await self.client.close()
            await asyncio.wait_for(self._task, 10)
        self.client = self._task = None
        await self._resources.aclose()


# Shard 0 of 2 and shard 1 of 7 (count, id): both are the fake's server's, so two processes on these serve it at once,
# as the old count's process and the new count's do across a reshard.
ACROSS_A_RESHARD = ((2, 0), (7, 1))


@contextlib.asynccontextmanager
async def two_processes_serving_the_server(
    fake: FakeDiscord, llm: FakeLLM, tmp_path: Path, database_url: str
) -> AsyncIterator[list[tuple[RunningBot, Parley]]]:
    """Two bots sharing the archive at `database_url`, both serving the fake's server (`ACROSS_A_RESHARD`), each with
    its client; both stopped on leaving."""
    assert all(fake.shard_of(GUILD_ID, count) == shard for count, shard in ACROSS_A_RESHARD)
    processes = [RunningBot(fake, llm, tmp_path / name) for name in ("first", "second")]
    try:
        started = []
        for process, (count, shard) in zip(processes, ACROSS_A_RESHARD, strict=True):
            client = await process.start(database_url=database_url, shard_count=count, shard_ids=frozenset({shard}))
            started.append((process, client))
        yield started
    finally:
        for process in processes:
            await process.stop()


async def _archive_file_migrated(settings: Settings) -> None:
    """A first start on a SQLite file finds it migrated, as a Postgres database copied from `migrated_template` is
    (migrating a new file is the archive's tests' to test, and takes ten times as long as copying one)."""
    url = settings.database_url
    if url.startswith("sqlite") and not (path := sqlite_path_from_url(url)).exists():
        await place_migrated_sqlite(path)


async def say(fake: FakeDiscord, author: int, content: str, **options: Any) -> dict[str, Any]:
    return await fake.send_user_message(CHANNEL_ID, author, content, **options)


async def say_and_approve(fake: FakeDiscord, author: int, content: str) -> str:
    """`author` says `content` in #general and waits for Parley's answer, approving as `author` the call it asks to
    make first, if it asks (its entry in tools/registry.py: `remember`, `remind`); what the answer says."""
    posts = len(fake.posts_in(CHANNEL_ID))
    await say(fake, author, content)
    await fake.wait_for_posts(posts + 1)
    latest = fake.bot_messages(CHANNEL_ID)[-1]
    found = [button for row in latest.get("components") or [] for button in row.get("components", [])]
    approve = next((button["custom_id"] for button in found if button.get("label") == "Approve"), None)
    if approve is not None:
        await click(fake, latest, approve, user_id=author)
        await fake.wait_for_posts(posts + 2)
    return fake.posts_in(CHANNEL_ID)[-1].content


async def assert_silent(fake: FakeDiscord, posts_before: int) -> None:
    """The bot has said nothing more in #general once it has handled everything the fake sent it (at most QUIET)."""
    await settled(fake)
    assert len(fake.posts_in(CHANNEL_ID)) == posts_before


async def settled(fake: FakeDiscord, within: float = QUIET) -> None:
    """Until every running bot has read every gateway event the fake sent it and finished handling them (the
    handlers discord.py started and every task they started in turn), or `within` seconds have passed: a handler that
    leaves something running (a view's timeout) is given the whole of it."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(within):
            while not _events_read(fake) or any(_handling(task) for task in asyncio.all_tasks()):  # noqa: ASYNC110
                await asyncio.sleep(0.005)


# The names discord.py gives the tasks it starts to handle a gateway event: client.py `_schedule_event`, the command
# tree's dispatch, the views' and modals'.
_HANDLER_NAMES = ("discord.py: ", "CommandTree-invoker", "discord-ui-")
# The task that started each task, while the bots run.
_started_by: weakref.WeakKeyDictionary[asyncio.Task[Any], asyncio.Task[Any]] = weakref.WeakKeyDictionary()
_running: weakref.WeakSet[Parley] = weakref.WeakSet()


def _note_starter(loop: asyncio.AbstractEventLoop, coro: Any, **options: Any) -> asyncio.Future[Any]:
    """The event loop's task factory while bots run: the task, noted with the task that started it."""
    task = asyncio.Task(coro, loop=loop, **options)
    starter = asyncio.current_task(loop)
    if starter is not None:
        _started_by[task] = starter
    return task


def _handling(task: asyncio.Task[Any]) -> bool:
    """Whether the unfinished `task` handles a gateway event: discord.py started it for one, or a task that does."""
    if task.done():
        return False
    starter: asyncio.Task[Any] | None = task
    while starter is not None:
        if starter.get_name().startswith(_HANDLER_NAMES):
            return True
        starter = _started_by.get(starter)
    return False


def _events_read(fake: FakeDiscord) -> bool:
    """Whether each running bot's gateway sessions have read every event the fake sent in them."""
    read = {ws.session_id: ws.sequence or 0 for client in _running for ws in _gateway_sockets(client)}
    return all(read.get(session.id, session.seq) >= session.seq for session in fake._sessions.values())


def _gateway_sockets(client: Parley) -> list[Any]:
    return [shard._parent.ws for shard in client.shards.values() if shard._parent.ws is not None]


async def eventually(predicate: Callable[[], bool], timeout: float = 5.0) -> None:
    """Wait for the bot's own bookkeeping, which finishes just after Discord has the post."""
    async with asyncio.timeout(timeout):
        while not predicate():  # noqa: ASYNC110 - the bot's state has no event to wait on
            await asyncio.sleep(0.01)


def request_texts(request: dict[str, Any]) -> list[str]:
    return [message_text(message) for message in request["messages"]]


# --- Slash commands ---------------------------------------------------------------------------

EPHEMERAL = 1 << 6
CHANNEL_MESSAGE_WITH_SOURCE = 4
DEFERRED_CHANNEL_MESSAGE_WITH_SOURCE = 5
MEMBER = EVERYONE_PERMISSIONS
MODERATOR = EVERYONE_PERMISSIONS | discord.Permissions(manage_messages=True, manage_channels=True)

_interaction_numbers = itertools.count(1)


def option(name: str, value: Any) -> dict[str, Any]:
    """A command option as Discord sends it: booleans are type 5, integers type 4, strings type 3."""
    kind = 5 if isinstance(value, bool) else 4 if isinstance(value, int) else 3
    return {"type": kind, "name": name, "value": value}


# The subcommands (and subgroups) of `/parley-admin`; every other one is `/parley`'s.
ADMIN_SUBCOMMANDS = frozenset(command.name for command in AdminCommands().commands)


def group_of(subcommand: str) -> str:
    """The top-level command a subcommand belongs to: `/parley-admin` for the admins', `/parley` for the rest."""
    return "parley-admin" if subcommand in ADMIN_SUBCOMMANDS else "parley"


def command_payload(
    fake: FakeDiscord,
    subcommand: str,
    options: list[dict[str, Any]] | None = None,
    *,
    user_id: int = ALICE_ID,
    permissions: discord.Permissions = MODERATOR,
    in_guild: bool = True,
    channel_id: int = CHANNEL_ID,
    group: str | None = None,
) -> dict[str, Any]:
    """An INTERACTION_CREATE for `/parley <subcommand>` (or `/parley-admin …`, or `/<group> <subcommand>`) in the
    fake's #general (or `channel_id`), or in a DM.

    https://discord.com/developers/docs/interactions/receiving-and-responding#interaction-object
    """
    number = next(_interaction_numbers)
    payload: dict[str, Any] = {
        "id": str(fake.new_id()),
        "application_id": str(APPLICATION_ID),
        "type": 2,  # APPLICATION_COMMAND
        "token": f"interaction-token-{number}",
        "version": 1,
        "locale": "en-US",
        "entitlements": [],
        "attachment_size_limit": 10 * 2**20,
        "data": {
            "id": str(snowflake_at(datetime(2022, 1, 1, tzinfo=UTC))),
            "name": group or group_of(subcommand),
            "type": 1,  # CHAT_INPUT
            "options": [{"type": 1, "name": subcommand, "options": options or []}],  # 1: SUB_COMMAND
        },
    }
    if in_guild:
        _in_channel(fake, payload, user_id, permissions, channel_id)
    else:
        _in_direct_messages(fake, payload, user_id)
    return payload


async def group_command(
    fake: FakeDiscord,
    group: str,
    subcommand: str,
    options: list[dict[str, Any]] | None = None,
    *,
    resolved: dict[str, Any] | None = None,
    permissions: discord.Permissions = MODERATOR,
    user_id: int = ALICE_ID,
    posts: int = 1,
) -> str:
    """`/parley <group> <subcommand>` (or `/parley-admin …`, by the group) in #general, with the options' `resolved`
    objects; what the bot answered (after `posts` calls)."""
    payload = command_payload(fake, group, user_id=user_id, permissions=permissions)
    payload["data"]["options"] = [
        {"type": 2, "name": group, "options": [{"type": 1, "name": subcommand, "options": options or []}]}
    ]
    if resolved is not None:
        payload["data"]["resolved"] = resolved
    token = payload["token"]

    def calls() -> list[InteractionCall]:
        return [call for call in fake.interaction_calls if f"/{token}" in call.path]

    await fake.dispatch("INTERACTION_CREATE", payload)
    await fake.wait_for(lambda: len(calls()) >= posts, what=f"/{payload['data']['name']} {group} {subcommand} answered")
    return reply_text(calls())


def _in_direct_messages(fake: FakeDiscord, payload: dict[str, Any], user_id: int) -> None:
    """Add to an interaction payload what Discord sends for one made in the user's DM with the bot."""
    user = fake.users[user_id]
    dm_id = fake.dm_channel(user_id)
    payload |= {
        "channel_id": str(dm_id),
        "channel": {"id": str(dm_id), "type": 1, "recipients": [user.payload()]},
        "user": user.payload(),
        "authorizing_integration_owners": {"1": str(user_id)},
        "context": 1,
    }


async def run_command(
    fake: FakeDiscord, subcommand: str, options: list[dict[str, Any]] | None = None, *, posts: int = 1, **who: Any
) -> list[InteractionCall]:
    """Use `/parley <subcommand>`; returns the bot's calls for it once it has made `posts` of them."""
    payload = command_payload(fake, subcommand, options, **who)
    token = payload["token"]

    def calls() -> list[InteractionCall]:
        return [call for call in fake.interaction_calls if f"/{token}" in call.path]

    await fake.dispatch("INTERACTION_CREATE", payload)
    await fake.wait_for(lambda: len(calls()) >= posts, what=f"/parley {subcommand} answered")
    return calls()


def _in_channel(
    fake: FakeDiscord,
    payload: dict[str, Any],
    user_id: int,
    permissions: discord.Permissions,
    channel_id: int = CHANNEL_ID,
) -> None:
    """Add to an interaction payload what Discord sends for one made in #general (or `channel_id`) by `user_id`."""
    user = fake.users[user_id]
    channel = fake.channels[channel_id]
    payload |= {
        "guild_id": str(channel.guild_id),
        "guild_locale": "en-US",
        "channel_id": str(channel_id),
        "channel": channel.payload(),
        "member": {
            "user": user.payload(),
            **user.member_payload(),
            "permissions": str(fake.permissions_in(channel_id, user_id, permissions).value),
        },
        "app_permissions": str((EVERYONE_PERMISSIONS | BOT_PERMISSIONS).value),
        "authorizing_integration_owners": {"0": str(channel.guild_id)},
        "context": 0,
    }


def _interaction(fake: FakeDiscord, kind: int, data: dict[str, Any]) -> dict[str, Any]:
    """An interaction made now: its id after every id the fake has issued, as Discord's are after what came before
    (a message its response posts, a deferral's, then has a later id than the question: conversations keep order)."""
    number = next(_interaction_numbers)
    return {
        "id": str(fake.new_id()),
        "application_id": str(APPLICATION_ID),
        "type": kind,
        "token": f"interaction-token-{number}",
        "version": 1,
        "locale": "en-US",
        "entitlements": [],
        "attachment_size_limit": 10 * 2**20,
        "data": data,
    }


async def _interact(fake: FakeDiscord, payload: dict[str, Any], what: str) -> list[InteractionCall]:
    token = payload["token"]

    def calls() -> list[InteractionCall]:
        return [call for call in fake.interaction_calls if f"/{token}" in call.path]

    await fake.dispatch("INTERACTION_CREATE", payload)
    await fake.wait_for(lambda: len(calls()) >= 1, what=what)
    return calls()


async def use_top_command(
    fake: FakeDiscord,
    name: str,
    options: list[dict[str, Any]],
    *,
    user_id: int = ALICE_ID,
    permissions: discord.Permissions = MEMBER,
    channel_id: int = CHANNEL_ID,
    in_guild: bool = True,
    used_at: datetime | None = None,
) -> list[InteractionCall]:
    """Use the top-level slash command `/name` (no group, as `/ask`) in #general (or `channel_id`, or a DM), now or
    `used_at` (the interaction's id says when: its token expires 15 minutes after); the bot's calls once it has made
    its first."""
    payload = _interaction(
        fake, 2, {"id": str(snowflake_at(datetime(2022, 1, 1, tzinfo=UTC), 2)), "name": name, "type": 1}
    )
    payload["data"]["options"] = options
    if used_at is not None:
        payload["id"] = str(snowflake_at(used_at, next(_interaction_numbers)))
    if in_guild:
        _in_channel(fake, payload, user_id, permissions, channel_id)
    else:
        _in_direct_messages(fake, payload, user_id)
    return await _interact(fake, payload, f"/{name} answered")


def calls_for(fake: FakeDiscord, calls: list[InteractionCall]) -> list[InteractionCall]:
    """Every call the bot has made so far for the interaction `calls` began with (its token)."""
    token = token_of(calls[0])
    return [call for call in fake.interaction_calls if f"/{token}" in call.path]


async def click(
    fake: FakeDiscord,
    message: dict[str, Any],
    custom_id: str,
    *,
    user_id: int = ALICE_ID,
    permissions: discord.Permissions = MEMBER,
    channel_id: int = CHANNEL_ID,
) -> list[InteractionCall]:
    """Click the button `custom_id` on `message` in #general (or `channel_id`); the bot's calls once it has answered
    the click.

    https://discord.com/developers/docs/interactions/receiving-and-responding#interaction-object-interaction-type
    """
    payload = click_payload(fake, message, custom_id, user_id=user_id, permissions=permissions, channel_id=channel_id)
    return await _interact(fake, payload, f"click on {custom_id}")


def click_payload(
    fake: FakeDiscord,
    message: dict[str, Any],
    custom_id: str,
    *,
    user_id: int = ALICE_ID,
    permissions: discord.Permissions = MEMBER,
    channel_id: int = CHANNEL_ID,
) -> dict[str, Any]:
    """The INTERACTION_CREATE of a click on the button `custom_id` on `message` in `channel_id`."""
    payload = _interaction(fake, 3, {"custom_id": custom_id, "component_type": 2})  # MESSAGE_COMPONENT, a button
    payload["message"] = message
    _in_channel(fake, payload, user_id, permissions, channel_id)
    return payload


async def use_message_command(
    fake: FakeDiscord,
    name: str,
    target: dict[str, Any],
    *,
    user_id: int = ALICE_ID,
    permissions: discord.Permissions = MEMBER,
) -> list[InteractionCall]:
    """Use the message context-menu command `name` on `target` in #general; the bot's calls once it answered."""
    data = {
        "id": str(snowflake_at(datetime(2022, 1, 1, tzinfo=UTC), 1)),
        "name": name,
        "type": 3,  # MESSAGE
        "target_id": target["id"],
        "resolved": {"messages": {target["id"]: target}},
    }
    payload = _interaction(fake, 2, data)
    _in_channel(fake, payload, user_id, permissions)
    return await _interact(fake, payload, f"{name} answered")


def token_of(call: InteractionCall) -> str:
    """The interaction token a callback or webhook call was made with (the path's last part before any message)."""
    parts = call.path.partition("?")[0].split("/")
    return parts[parts.index("interactions") + 2] if "interactions" in parts else parts[parts.index("webhooks") + 2]


async def open_modal(
    fake: FakeDiscord,
    name: str,
    target: dict[str, Any],
    *,
    user_id: int = ALICE_ID,
    permissions: discord.Permissions = MEMBER,
) -> dict[str, Any]:
    """Use the message command `name` on `target`; the modal the bot answered with (custom_id, title, components)."""
    [call] = await use_message_command(fake, name, target, user_id=user_id, permissions=permissions)
    modal = fake.modals.get(token_of(call))
    assert modal is not None, f"{name} answered without a modal: {call.body}"
    # discord.py keeps the modal only once Discord has answered its callback: a submission before then goes unheard.
    await eventually(lambda: any(modal["custom_id"] in _modals_of(client) for client in _running))
    return modal


def _modals_of(client: Parley) -> Collection[str]:
    """The custom ids of the modals the client waits on (discord.py's view store has no public reader for them)."""
    modals: dict[str, Any] = client._connection._view_store._modals
    return modals.keys()


def modal_inputs(modal: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The inputs of a modal (each Label's component), by custom id."""
    return {label["component"]["custom_id"]: label["component"] for label in modal["components"]}


def modal_submission(modal: dict[str, Any], values: dict[str, str | list[str]]) -> dict[str, Any]:
    """The `data` of a MODAL_SUBMIT for `modal` as Discord sends it: every Label with its input's value (a text
    input's string, a select's chosen option values), those not in `values` as the member left them (a text input's
    prefilled value, a select's default options).

    https://discord.com/developers/docs/interactions/receiving-and-responding#interaction-object-modal-submit-data-structure
    """
    unknown = set(values) - set(modal_inputs(modal))
    assert not unknown, f"the modal has no input {unknown}"
    components = []
    for number, label in enumerate(modal["components"], start=1):
        inner = label["component"]
        submitted: dict[str, Any] = {"type": inner["type"], "id": number * 2, "custom_id": inner["custom_id"]}
        if inner["type"] == 4:  # TEXT_INPUT
            submitted["value"] = values.get(inner["custom_id"], inner.get("value", ""))
        else:  # STRING_SELECT
            chosen = [option["value"] for option in inner["options"] if option.get("default")]
            submitted["values"] = values.get(inner["custom_id"], chosen)
        components.append({"type": 18, "id": number * 2 - 1, "component": submitted})
    return {"custom_id": modal["custom_id"], "components": components}


async def submit_modal(
    fake: FakeDiscord,
    modal: dict[str, Any],
    values: dict[str, str | list[str]],
    *,
    user_id: int = ALICE_ID,
    permissions: discord.Permissions = MEMBER,
    answers: int = 1,
) -> list[InteractionCall]:
    """Submit `modal` in #general with `values` (by input custom id); the bot's calls once it made `answers`."""
    payload = _interaction(fake, 5, modal_submission(modal, values))  # MODAL_SUBMIT
    _in_channel(fake, payload, user_id, permissions)
    token = payload["token"]

    def calls() -> list[InteractionCall]:
        return [call for call in fake.interaction_calls if f"/{token}" in call.path]

    await fake.dispatch("INTERACTION_CREATE", payload)
    await fake.wait_for(lambda: len(calls()) >= answers, what=f"the modal {modal['title']!r} answered")
    return calls()


def reply_text(calls: list[InteractionCall]) -> str:
    """Everything the bot said in answer, callback and follow-ups joined by newlines."""
    return "\n".join(call_text(call) for call in calls)


def is_callback(call: InteractionCall) -> bool:
    """Whether the call is the interaction's initial response (not a webhook follow-up)."""
    return call.path.partition("?")[0].endswith("/callback")


def call_text(call: InteractionCall) -> str:
    """What one call said: its content, then its embeds as text."""
    assert call.body is not None
    data = call.body.get("data") or call.body
    return "\n".join(filter(None, [data.get("content", ""), *map(embed_text, data.get("embeds") or [])]))


def embed_text(embed: dict[str, Any]) -> str:
    """An embed as lines: title, description, "name: value" for each field, footer."""
    fields = [f"{field['name']}: {field['value']}" for field in embed.get("fields") or []]
    footer = (embed.get("footer") or {}).get("text")
    return "\n".join(part for part in [embed.get("title"), embed.get("description"), *fields, footer] if part)


def reply_embeds(calls: list[InteractionCall]) -> list[dict[str, Any]]:
    """The embeds of the bot's answer, callback and follow-ups in order."""
    return [embed for call in calls if call.body for embed in (call.body.get("data") or call.body).get("embeds") or []]


def assert_ephemeral_one_liner(calls: list[InteractionCall]) -> str:
    """The answer is a single ephemeral callback of one line; returns that line."""
    [call] = calls
    assert is_callback(call) and call.body is not None
    assert call.body["type"] == CHANNEL_MESSAGE_WITH_SOURCE and call.body["data"]["flags"] & EPHEMERAL
    text = call.body["data"]["content"]
    assert "\n" not in text
    return text


def assert_told_after_deferral(calls: list[InteractionCall]) -> str:
    """The command was acknowledged first, then turned down: its "thinking…" response gave way to one line only the
    asker sees (a private response edited into it; a public one deleted, the line an ephemeral follow-up). The line.
    """
    deferral, *rest = calls
    assert is_callback(deferral) and deferral.body is not None
    assert deferral.body["type"] == DEFERRED_CHANNEL_MESSAGE_WITH_SOURCE
    if int((deferral.body.get("data") or {}).get("flags") or 0) & EPHEMERAL:
        [line] = rest
        assert line.method == "PATCH" and "@original" in line.path
    else:
        deletion, line = rest
        assert deletion.method == "DELETE" and line.method == "POST" and line.body is not None
        assert int(line.body.get("flags") or 0) & EPHEMERAL
    text = call_text(line)
    assert "\n" not in text
    return text


async def decided(client: Parley, message: dict[str, Any]) -> LoggedDecision:
    """The decision about a message sent through the fake, once the bot has made it."""
    message_id = int(message["id"])

    def found() -> LoggedDecision | None:
        return next((entry for entry in client.decisions.recent(CHANNEL_ID) if entry.message_id == message_id), None)

    await eventually(lambda: found() is not None)
    entry = found()
    assert entry is not None
    return entry


# --- Scenarios ---------------------------------------------------------------------------------
