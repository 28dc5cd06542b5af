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
from typing import Any, Protocol

import aiohttp
import discord
from pydantic import ValidationError

from archive.exclusive import ArchiveInUse
from config import Settings, describe_settings_error
from deciding.followup import ModelFileError, load_model, model_path
from edge.gateway import point_at_discord
from ops.observability import configure_logging, warn_about_retired_settings
from ops.opening import ArchiveUnavailable
from ops.preflight import (
    configuration_problems,
    describe_configuration,
    dotenv_names,
    export_dotenv_variables,
    misspelt_settings,
    parley_version,
    required_settings_help,
    settings_env_file,
)

log = logging.getLogger("parley")


class Runnable(Protocol):
    """The client, as running it needs: a discord.py client that opens its archive before it logs in."""

    async def __aenter__(self) -> Any: ...

    async def __aexit__(self, exc_type: Any, exc_value: Any, traceback: Any, /) -> None: ...

    async def open_archive(self) -> None: ...

    async def start(self, token: str, *, reconnect: bool = True) -> None: ...

    async def login(self, token: str) -> None: ...

    async def close(self) -> None: ...


STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


async def run(client: Runnable, token: str) -> None:
    """Open the archive, log in and serve until Discord disconnects for good or the client is closed."""
    async with client:
        await client.open_archive()
        await client.start(token)


async def register_commands(client: Runnable, token: str) -> None:
    """`--sync`: log in (which registers the commands, forced) and leave, without opening a gateway session."""
    async with client:
        await client.open_archive()
        await client.login(token)


class StopRequested(Exception):
    """SIGTERM or SIGINT ended the run: a clean stop (a redeploy, Ctrl-C), not a failure."""


async def until_stopped(work: Coroutine[Any, Any, None]) -> None:
    """Run `work` (`run` or `register_commands`); StopRequested once it is undone, if SIGTERM or SIGINT came first.

    The one place a stop request becomes a clean close in every phase: `work` is cancelled, wherever it is
    (opening the archive, logging in, syncing commands, serving), and its `async with client` closes the client.
    Closing the client under a login instead would fail that login's request ("Session is closed").
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
        help="check the configuration offline (settings, model, provider package and key, archive), print it"
        " with secrets masked, and exit: 0 if it is fine, 2 if not",
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


def checks_only(argv: Sequence[str]) -> bool:
    """Whether the command line asks for `--check`, which builds no client (--help and --version exit here)."""
    return bool(parse_args(argv).check)


def no_client(settings: Settings, **options: Any) -> Runnable:
    """The `build_client` of a `main` that only checks the configuration: it is never called."""
    raise AssertionError("--check builds no client")


def main(argv: Sequence[str] | None, build_client: Callable[..., Runnable]) -> int:
    """`python bot.py`: `build_client` is the composition root's (bot.py), which this module does not import.

    A stop (SIGTERM, SIGINT) at any point ends it with exit 0 and one line: a redeploy or Ctrl-C is no failure.
    """
    try:
        with sigterm_interrupts():
            return start(argv, build_client)
    except (KeyboardInterrupt, StopRequested):
        print("Parley stopped.", file=sys.stderr)
        return 0


def start(argv: Sequence[str] | None, build_client: Callable[..., Runnable]) -> int:
    """`main`'s work, to its exit code."""
    args = parse_args(argv)
    # Before .env's variables join the environment (each is named once, where it was set), and before the
    # settings are read: a misspelt DISCORD_TOKEN is then named beside "DISCORD_TOKEN is not set".
    strict = args.check and args.strict
    typos = misspelt_settings(dotenv_names(settings_env_file()), os.environ)
    export_dotenv_variables(settings_env_file())
    for typo in typos:
        print(f"{'Configuration error' if strict else 'Warning'}: {typo}", file=sys.stderr)
    if typos and strict:
        return 2
    try:
        settings = Settings()
    except ValidationError as error:
        print(describe_settings_error(error), file=sys.stderr)
        return 2
    problems = configuration_problems(settings)
    for problem in problems:
        print(f"Configuration error: {problem}", file=sys.stderr)
    if problems:
        return 2
    try:
        load_model(model_path(settings.decider_model))  # build_client loads it again: a bad file stops us here
    except ModelFileError as error:
        print(f"Configuration error: {error}", file=sys.stderr)
        return 2
    if args.check:
        print(describe_configuration(settings))
        print(f"Parley {parley_version()}: the configuration is complete (checked offline; nothing was sent).")
        return 0
    configure_logging(settings)
    warn_about_retired_settings(os.environ)
    point_at_discord(settings)
    client = build_client(settings, sync_commands=args.sync)
    # What is built by now lives as long as the process. Frozen, it is left out of the cyclic GC's
    # full collections, which would otherwise walk all of it and stall the bot for 100+ ms at times.
    # https://docs.python.org/3/library/gc.html#gc.freeze
    gc.freeze()
    token = settings.discord_token.get_secret_value()
    try:
        asyncio.run(until_stopped(register_commands(client, token) if args.sync else run(client, token)))
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
