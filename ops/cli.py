"""The command line: `python bot.py [--check | --sync | --version]`, from settings to a running client."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Coroutine, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import aiohttp
import discord
from pydantic import ValidationError

from archive.exclusive import ArchiveInUse
from config import Settings, describe_settings_error, settings_error_variables
from deciding.followup import ModelFileError, load_model, model_path
from edge.gateway import point_at_discord
from ops.observability import configure_logging, warn_about_retired_settings
from ops.opening import ArchiveUnavailable
from ops.preflight import (
    check_summary,
    configuration_problems,
    configuration_warnings,
    describe_configuration,
    dotenv_names,
    export_dotenv_variables,
    misspelt_settings,
    parley_version,
    required_settings_help,
    settings_env_file,
    variable_of,
)
from ops.resources import open_resources

log = logging.getLogger("parley")


class Runnable(Protocol):
    """The client, as running it needs: a discord.py client, built over resources opened before it."""

    async def __aenter__(self) -> Any: ...

    async def __aexit__(self, exc_type: Any, exc_value: Any, traceback: Any, /) -> None: ...

    async def start(self, token: str, *, reconnect: bool = True) -> None: ...

    async def login(self, token: str) -> None: ...

    async def close(self) -> None: ...


STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


# The composition root's: the client, built from the settings over the resources opened for it.
BuildClient = Callable[..., Runnable]


async def serve(settings: Settings, build_client: BuildClient, token: str, *, sync: bool) -> None:
    """Open the archive and its stores, build the client over them, and run it (`--sync`: register the commands);
    the stores close after the client (discord.py's examples/advanced_startup.py).

    The archive is opened before any network traffic: one that cannot be opened stops the bot there.
    """
    async with open_resources(settings) as resources:
        client = build_client(settings, resources, sync_commands=sync)
        # What is built by now lives as long as the process. Frozen, it is left out of the cyclic GC's
        # full collections, which would otherwise walk all of it and stall the bot for 100+ ms at times.
        # https://docs.python.org/3/library/gc.html#gc.freeze
        gc.freeze()
        await (register_commands(client, token) if sync else run(client, token))


async def run(client: Runnable, token: str) -> None:
    """Log in and serve until Discord disconnects for good or the client is closed."""
    async with client:
        await client.start(token)


async def register_commands(client: Runnable, token: str) -> None:
    """`--sync`: log in (which registers the commands, forced) and leave, without opening a gateway session."""
    async with client:
        await client.login(token)


class StopRequested(Exception):
    """SIGTERM or SIGINT ended the run: a clean stop (a redeploy, Ctrl-C), not a failure."""


async def until_stopped(work: Coroutine[Any, Any, None]) -> None:
    """Run `work` (`serve`); StopRequested once it is undone, if SIGTERM or SIGINT came first.

    The one place a stop request becomes a clean close in every phase: `work` is cancelled, wherever it is
    (opening the archive, logging in, syncing commands, serving), and its `async with`s close the client, then the
    archive. Closing the client under a login instead would fail that login's request ("Session is closed").
    """
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in STOP_SIGNALS:
        loop.add_signal_handler(signum, stop.set)
    try:
        working = asyncio.create_task(work)
        stopping = asyncio.create_task(stop.wait())
        await asyncio.wait({working, stopping}, return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        if not stop.is_set():
            working.result()
            return
        working.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await working
        raise StopRequested
    finally:
        for signum in STOP_SIGNALS:
            loop.remove_signal_handler(signum)


@contextlib.contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """SIGTERM raises KeyboardInterrupt, as SIGINT does, until the event loop's own handlers take over.

    Without it a SIGTERM while the settings load or the client is built would kill the process with no
    word (exit -15), which a host counts as a crash.
    """
    if threading.current_thread() is not threading.main_thread():  # only the main thread may set handlers
        yield
        return
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="bot.py",
        description="Run Parley, a Discord bot that joins channel conversations. Its settings come from the"
        " environment and a .env file in the current folder.",
        epilog=required_settings_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="check the configuration offline (settings, model, provider package and key, archive, token), print"
        " the settings that differ from their defaults with secrets masked and a summary line, and exit: 0 if it"
        " found no error (warnings allowed), 2 if it did",
    )
    parser.add_argument(
        "--sync",
        action="store_true",
        help="register the /parley commands with Discord now (in GUILD_ID alone when set), even if unchanged,"
        " and exit; a normal start registers them whenever they changed",
    )
    parser.add_argument(
        "--strict",
        action="store_true",
        help="with --check: a variable that reads like a misspelt setting is an error (exit 2), not a warning",
    )
    parser.add_argument("--version", action="version", version=f"Parley {parley_version()}")
    return parser.parse_args(argv)


@dataclass
class Checked:
    """What the offline checks found: the settings (None if they could not be read), and the variables named by each
    error and each warning, which were printed one line each."""

    settings: Settings | None = None
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def error(self, line: str, variable: str | None = None) -> None:
        print(f"Configuration error: {line}", file=sys.stderr)
        self.errors.append(variable or variable_of(line))

    def warning(self, line: str) -> None:
        print(f"Warning: {line}", file=sys.stderr)
        self.warnings.append(variable_of(line))


def check_offline(*, strict: bool) -> Checked:
    """Read the settings and check them offline, each problem one line on stderr; stops at the first stage that fails
    (a misspelt setting with `strict`, settings that cannot be read), as the later ones would only repeat it."""
    checked = Checked()
    # Before .env's variables join the environment (each is named once, where it was set), and before the
    # settings are read: a misspelt DISCORD_TOKEN is then named beside "DISCORD_TOKEN is not set".
    typos = misspelt_settings(dotenv_names(settings_env_file()), os.environ)
    export_dotenv_variables(settings_env_file())
    for typo in typos:
        if strict:
            checked.error(typo)
        else:
            checked.warning(typo)
    if typos and strict:
        return checked
    try:
        settings = Settings()
    except ValidationError as error:
        print(describe_settings_error(error), file=sys.stderr)
        checked.errors += settings_error_variables(error)
        return checked
    checked.settings = settings
    for problem in configuration_problems(settings):
        checked.error(problem)
    if not checked.errors:
        try:
            load_model(model_path(settings.decider_model))  # build_client loads it again: a bad file stops us here
        except ModelFileError as error:
            checked.error(str(error), "DECIDER_MODEL")
    for warning in configuration_warnings(settings, os.environ):
        checked.warning(warning)
    return checked


def checks_only(argv: Sequence[str]) -> bool:
    """Whether the command line asks for `--check`, which builds no client (--help and --version exit here)."""
    return bool(parse_args(argv).check)


def no_client(settings: Settings, **options: Any) -> Runnable:
    """The `build_client` of a `main` that only checks the configuration: it is never called."""
    raise AssertionError("--check builds no client")


def main(argv: Sequence[str] | None, build_client: BuildClient) -> int:
    """`python bot.py`: `build_client` is the composition root's (bot.py), which this module does not import.

    A stop (SIGTERM, SIGINT) at any point ends it with exit 0 and one line: a redeploy or Ctrl-C is no failure.
    """
    try:
        with sigterm_interrupts():
            return start(argv, build_client)
    except (KeyboardInterrupt, StopRequested):
        print("Parley stopped.", file=sys.stderr)
        return 0


def start(argv: Sequence[str] | None, build_client: BuildClient) -> int:
    """`main`'s work, to its exit code."""
    args = parse_args(argv)
    checked = check_offline(strict=args.check and args.strict)
    if args.check:
        if checked.settings is not None and not checked.errors:
            print(describe_configuration(checked.settings))
        print(check_summary(checked.errors, checked.warnings, settings_env_file()))
    if checked.errors or checked.settings is None:
        return 2
    if args.check:
        return 0
    settings = checked.settings
    configure_logging(settings)
    warn_about_retired_settings(os.environ)
    point_at_discord(settings)
    token = settings.discord_token.get_secret_value()
    try:
        asyncio.run(until_stopped(serve(settings, build_client, token, sync=args.sync)))
    except discord.LoginFailure:
        print("Configuration error: DISCORD_TOKEN was rejected by Discord", file=sys.stderr)
        return 2
    except ArchiveUnavailable as error:
        print(f"Configuration error: {error}", file=sys.stderr)
        return 2
    except ArchiveInUse as error:
        # Not a configuration error: the first process keeps serving; a host retrying this one changes nothing.
        print(f"Not started: {error}; one process per archive (per shard on Postgres)", file=sys.stderr)
        return 2
    except discord.PrivilegedIntentsRequired:
        print(
            "Configuration error: enable the Message Content intent for this bot in the Discord developer portal",
            file=sys.stderr,
        )
        return 2
    except (OSError, aiohttp.ClientError) as error:
        # aiohttp's connection errors are OSErrors: a network that is down, or a wrong DISCORD_API_BASE_URL;
        # a gateway address that answers but not as a websocket is an aiohttp.ClientError.
        print(f"Could not reach Discord: {error}", file=sys.stderr)
        return 1
    return 0
