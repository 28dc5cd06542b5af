"""What Parley checks before it connects: `.env` for the providers, the model, the archive, and --check's report.

Everything here runs offline, so a configuration mistake is one line naming the variable and what
to do, before any traffic to Discord or a model provider.
"""

from __future__ import annotations

import contextlib
import difflib
import importlib.metadata
import os
import re
import sqlite3
import tempfile
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path

import discord
from dotenv import dotenv_values
from pydantic import SecretStr
from pydantic_ai.exceptions import UserError
from pydantic_ai.images import infer_image_generation_model

from archive import describe_database_url, is_postgres_url
from archive.sqlite import MIGRATIONS, sqlite_path_from_url
from config import NATIVE_IMAGES, Settings
from ops.packages import missing_package_fix
from ops.redaction import MASK, mask_credentials
from profiles.channels import profiles_file_problem
from providers.images import DIRECT_IMAGE_PROVIDERS, build_image_generator
from providers.known_models import (
    closest,
    closest_image_model,
    has_model_list,
    is_known,
    is_known_image_model,
    suggestion,
)
from providers.models import build_model
from records import NORMAL
from tools import supports_native_images, supports_native_web_search, tool_config_problem

# What Parley needs in a channel: see the README's "Creating the Discord application". The `bot`
# scope already includes `applications.commands`, so the invite asks for no more.
INVITE_PERMISSIONS = discord.Permissions(
    view_channel=True,
    send_messages=True,
    send_messages_in_threads=True,
    read_message_history=True,
    # `/parley-admin threads on` opens a thread on the message that mentions Parley.
    create_public_threads=True,
)
# Secrets of the providers that --check reports as set or not, never showing their values.
_SECRET_VARIABLE = re.compile(r"^[A-Z0-9_]+_API_KEY$|^LOGFIRE_TOKEN$")
_KEY_NEEDED = re.compile(r"Set the `(\w+)` environment variable")
# pydantic-ai's "Did you mean '...'?" for a model string it does not know.
_SUGGESTION = re.compile(r"Did you mean '[^']+'\?")
# Where a problem's line names its variable: first (`LLM_MODEL=...`, `DATABASE_URL names ...`).
_VARIABLE = re.compile(r"[A-Z][A-Z0-9_]*[A-Z0-9]")
# Where Discord shows the bot token: a token has three parts separated by dots.
_TOKEN_FIX = "copy it from the Developer Portal (your application > Bot > Reset Token): three parts joined by dots"


def parley_version() -> str:
    """The version pyproject.toml gives; a deploy runs from the repository without installing the project."""
    try:
        with (Path(__file__).resolve().parents[1] / "pyproject.toml").open("rb") as file:
            return str(tomllib.load(file)["project"]["version"])
    except OSError:
        try:
            return importlib.metadata.version("parley")
        except importlib.metadata.PackageNotFoundError:
            return "unknown"


def invite_link(application_id: int) -> str:
    """The link that adds the bot to a server with exactly the permissions it needs."""
    return (
        f"https://discord.com/oauth2/authorize?client_id={application_id}"
        f"&scope=bot&permissions={INVITE_PERMISSIONS.value}"
    )


def export_dotenv_variables(env_file: str | os.PathLike[str] | None) -> list[str]:
    """Copy `.env`'s other variables (provider keys, LOGFIRE_TOKEN, ...) into the environment; returns their names.

    `Settings` reads Parley's own variables from `.env`, but model providers, their SDKs and Logfire
    read only the process environment. Every non-empty variable the environment does not already
    have is copied, not a list of known names: pydantic-ai alone reads over 70 and the SDKs more,
    and the list changes with their releases. The environment wins, as it does for the settings.
    """
    if env_file is None or not os.path.isfile(env_file):
        return []
    parley_settings = {name.upper() for name in Settings.model_fields}
    exported = []
    for name, value in dotenv_values(env_file).items():
        if value and name.upper() not in parley_settings and name not in os.environ:
            os.environ[name] = value
            exported.append(name)
    return exported


# How alike a variable's name must be to a setting's to be taken for a typo of it (difflib's ratio). 0.8 names
# LLM_MODLE, DATABSE_URL or MCP_SERVER, and none of the provider, Logfire, Railway or system variables.
_TYPO_LIKENESS = 0.8
# What shells, terminals and containers set of their own: never a typo of a setting, however alike (LINES is one
# letter from LINKS).
_SYSTEM_VARIABLES = frozenset(
    "COLUMNS LINES TERM SHELL HOME PATH USER LOGNAME LANG LANGUAGE PWD OLDPWD HOSTNAME SHLVL MAIL TZ TMPDIR".split()
)


def misspelt_settings(dotenv_names: Iterable[str], environ_names: Iterable[str]) -> list[str]:
    """A line for each variable that is not one of Parley's settings but reads like a typo of one.

    Parley ignores variables it does not know (the provider keys in `.env` are the SDKs'), so a typo would
    otherwise be silently a default: `LLM_MODLE=anthropic:...` runs on LLM_MODEL's default.
    """
    settings = [name.upper() for name in Settings.model_fields]
    lines = []
    for where, names in ((".env", dotenv_names), ("the environment", environ_names)):
        for name in sorted(set(names)):
            if name.upper() in settings or name in _SYSTEM_VARIABLES:
                continue
            likely = difflib.get_close_matches(name.upper(), settings, n=1, cutoff=_TYPO_LIKENESS)
            if likely:
                lines.append(f"{name} (in {where}) is not a setting Parley reads: did you mean {likely[0]}?")
    return lines


def dotenv_names(env_file: str | os.PathLike[str] | None) -> list[str]:
    """The variables `.env` sets (empty when there is none)."""
    if env_file is None or not os.path.isfile(env_file):
        return []
    return list(dotenv_values(env_file))


def settings_env_file() -> str | os.PathLike[str] | None:
    """The `.env` file `Settings` reads, which the provider keys come from too."""
    env_file = Settings.model_config.get("env_file")
    return env_file if isinstance(env_file, str | os.PathLike) else None


def configuration_problems(settings: Settings) -> list[str]:
    """Everything that would stop the bot once connected, found offline: one line per problem, naming the variable."""
    problems = [token_problem(settings.discord_token.get_secret_value())]
    problems += [model_problem(settings, variable, name) for variable, name in models_in_use(settings)]
    problems += [model_problem(settings, variable, name) for variable, name in listed_models(settings)]
    problems.append(archive_problem(settings.database_url))
    if not any(problems):
        problems += [native_web_search_problem(settings), image_model_problem(settings), tool_config_problem(settings)]
    problems.append(profiles_file_problem(settings))
    return [problem for problem in problems if problem]


def configuration_warnings(settings: Settings, environ: Mapping[str, str]) -> list[str]:
    """What may go wrong though the start would not stop for it: a model its provider's list lacks, an archive a
    Railway redeploy loses, links allowed into private networks. One line each, naming the variable."""
    models = [*models_in_use(settings), *listed_models(settings)]
    warnings = [unknown_model_warning(settings, variable, name) for variable, name in models]
    warnings.append(unknown_image_model_warning(settings))
    warnings.append(railway_archive_warning(settings.database_url, environ))
    warnings.append(private_links_warning(settings))
    return [warning for warning in warnings if warning]


def private_links_warning(settings: Settings) -> str | None:
    """LINKS_ALLOW_PRIVATE_ADDRESSES on: a link a member gives could reach this machine and its network."""
    if not settings.links_allow_private_addresses:
        return None
    return (
        "LINKS_ALLOW_PRIVATE_ADDRESSES is on, so a link a member gives can reach this machine and its private network"
        " (only tests need it): delete the line"
    )


def token_problem(token: str) -> str | None:
    """Why DISCORD_TOKEN cannot be a bot token, or None: the application id pasted in its place, or a "Bot " prefix
    (which discord.py adds itself, so Discord would read "Bot Bot ...")."""
    token = token.strip()
    if token.startswith("Bot "):
        return 'DISCORD_TOKEN starts with "Bot ", which Parley adds itself: remove it, keeping the token after it'
    if token.isdigit():
        return f"DISCORD_TOKEN is digits only, as the application id is, not the bot token: {_TOKEN_FIX}"
    return None


def variable_of(line: str) -> str:
    """The variable a problem's or warning's line names first."""
    found = _VARIABLE.match(line)
    return found.group() if found else "settings"


def listed_models(settings: Settings) -> list[tuple[str, str]]:
    """The models admins allow beyond LLM_MODEL, by variable: MODELS for profiles, MEMBER_MODELS for members."""
    return [
        (variable, name)
        for variable, names in (("MODELS", settings.models), ("MEMBER_MODELS", settings.member_models))
        for name in sorted(names - {settings.llm_model})
    ]


def models_in_use(settings: Settings) -> list[tuple[str, str]]:
    """(variable, model string) for the responder and, when it is on and different, the judge."""
    used = [("LLM_MODEL", settings.llm_model)]
    if settings.use_llm_judge and settings.judge_model and settings.judge_model != settings.llm_model:
        used.append(("JUDGE_MODEL", settings.judge_model))
    return used


def model_problem(settings: Settings, variable: str, name: str) -> str | None:
    """Why the model `name` (from `variable`) cannot be built, or None: unknown, package missing, key missing."""
    if settings.llm_base_url:
        return None  # the name goes verbatim to that server, which alone knows it
    try:
        build_model(settings, name)
    except ImportError as error:
        return f"{variable}={name} needs a provider package that is not installed: {missing_package_fix(error)}"
    except UserError as error:
        message = str(error)
        key = _KEY_NEEDED.search(message)
        if key:
            return f"{variable}={name} needs {key.group(1)}: set it in .env or the environment"
        if message.startswith("Unknown model"):
            return (
                f"{variable} is invalid: {name!r} is not a pydantic-ai model string such as openai:gpt-4.1-mini"
                + _meant(name, message)
                + " (for an OpenAI-compatible server, set LLM_BASE_URL and give the model's name there)"
            )
        return f"{variable}={name} cannot be used: {message.splitlines()[0]}"
    return None


def _meant(name: str, message: str) -> str:
    """ "; did you mean …?": the provider's prefix a bare or slashed name lacks, else pydantic-ai's own guess."""
    meant = suggestion(name)
    if meant is not None:
        return f"; did you mean {meant}?"
    guessed = _SUGGESTION.search(message)
    return f"; pydantic-ai asks: d{guessed.group()[1:]}" if guessed else ""


def unknown_model_warning(settings: Settings, variable: str, name: str) -> str | None:
    """A line when `name`'s provider has a model list offline (pydantic-ai's, genai-prices') and `name` is not in it.

    A warning, not an error: both lists trail the providers' releases and leave out fine-tuned models, so a name
    missing from them may be real, and a new model must not stop a deploy; a typo shows here before its first answer.
    """
    prefix, _, model = name.partition(":")
    if settings.llm_base_url or not model or not has_model_list(prefix) or is_known(prefix, model):
        return None
    likely = closest(prefix, model)
    return (
        f"{variable}={name} is not a model pydantic-ai or genai-prices knows for {prefix}"
        + (f": did you mean {likely}?" if likely else "")
        + " If it is newer than their lists or fine-tuned, ignore this"
    )


def railway_archive_warning(database_url: str, environ: Mapping[str, str]) -> str | None:
    """On Railway (RAILWAY_ENVIRONMENT set), a SQLite archive outside the service's volume, or no volume at all: a
    redeploy starts from a fresh filesystem, and the archive would be lost with it."""
    if "RAILWAY_ENVIRONMENT" not in environ or not database_url or is_postgres_url(database_url):
        return None
    path = sqlite_path_from_url(database_url).absolute()
    volume = environ.get("RAILWAY_VOLUME_MOUNT_PATH")
    if not volume:
        return (
            f"DATABASE_URL names {path}, and this Railway service has no volume, so every redeploy loses the archive:"
            " attach a volume (mount path /data) and set DATABASE_URL=sqlite:////data/parley.db"
        )
    if not path.is_relative_to(volume):
        return (
            f"DATABASE_URL names {path}, outside the Railway volume at {volume}, so every redeploy loses the archive:"
            f" set DATABASE_URL=sqlite:///{Path(volume) / 'parley.db'}"
        )
    return None


def native_web_search_problem(settings: Settings) -> str | None:
    """Why WEB_SEARCH=native cannot work with LLM_MODEL (its provider has no search of its own), or None."""
    if settings.web_search != "native" or supports_native_web_search(build_model(settings)):
        return None
    where = f"on LLM_BASE_URL's server ({settings.llm_model})" if settings.llm_base_url else settings.llm_model
    return (
        f"WEB_SEARCH=native needs a model whose provider searches the web itself (OpenAI Responses, Anthropic,"
        f" Google, Groq), and LLM_MODEL {where} has none: use WEB_SEARCH=duckduckgo or tavily"
    )


def image_model_problem(settings: Settings) -> str | None:
    """Why IMAGE_MODEL cannot make images, or None: `native` with an LLM_MODEL whose provider draws none, a provider
    without an images API pydantic-ai calls, or its provider's key not set."""
    name = settings.image_model
    if name is None:
        return None
    if name == NATIVE_IMAGES:
        if supports_native_images(build_model(settings)):
            return None
        return (
            f"IMAGE_MODEL=native needs a model whose provider draws images itself (OpenAI Responses, Google), and"
            f" LLM_MODEL {settings.llm_model} has none: name an image model instead, such as openai:gpt-image-1"
        )
    provider = name.partition(":")[0]
    if provider not in DIRECT_IMAGE_PROVIDERS:
        return (
            f"IMAGE_MODEL={name}: {provider} has no images API pydantic-ai calls; use one of"
            f" {', '.join(DIRECT_IMAGE_PROVIDERS)} (such as openai:gpt-image-1), or native"
        )
    generator = build_image_generator(settings)
    try:
        if generator is not None and not isinstance(generator.model, str):
            return None  # LLM_BASE_URL's server: it alone knows its models and its key
        infer_image_generation_model(name)
    except ImportError as error:
        return f"IMAGE_MODEL={name} needs a provider package that is not installed: {missing_package_fix(error)}"
    except UserError as error:
        key = _KEY_NEEDED.search(str(error))
        if key:
            return f"IMAGE_MODEL={name} needs {key.group(1)}: set it in .env or the environment"
        return f"IMAGE_MODEL={name} cannot be used: {str(error).splitlines()[0]}"
    return None


def unknown_image_model_warning(settings: Settings) -> str | None:
    """A line when IMAGE_MODEL names a model pydantic-ai and genai-prices do not know: a warning, as for LLM_MODEL."""
    name = settings.image_model
    if name is None or name == NATIVE_IMAGES or settings.llm_base_url or is_known_image_model(name):
        return None
    if name.partition(":")[0] not in DIRECT_IMAGE_PROVIDERS:
        return None  # an error already (image_model_problem)
    likely = closest_image_model(name)
    return (
        f"IMAGE_MODEL={name} is not an image model pydantic-ai knows"
        + (f"; did you mean {likely}?" if likely else ".")
        + " If it is newer than its list, ignore this"
    )


def archive_problem(database_url: str) -> str | None:
    """Why the archive DATABASE_URL names cannot be opened or created, or None; creates nothing."""
    if not database_url or is_postgres_url(database_url):
        return None  # a server is only known to answer once the bot connects (which says so in one line)
    path = sqlite_path_from_url(database_url)
    cannot = f"DATABASE_URL names {path}, which cannot be opened"
    if path.is_dir():
        return f"{cannot}: it is a folder; name a file in it, e.g. sqlite:///{path / 'parley.db'}"
    if path.exists():
        return _existing_archive_problem(path, cannot)
    folder = _nearest_existing(path.parent)
    if not folder.is_dir():
        return f"{cannot}: {folder} is a file, not a folder; point DATABASE_URL elsewhere"
    return _creation_problem(folder, cannot)


def _creation_problem(folder: Path, cannot: str) -> str | None:
    """Why the start could not create the archive's folders and file under `folder`, or None: tried, as permissions
    alone do not say (root passes them, /proc and read-only mounts refuse anyway); the folder tried is removed."""
    try:
        tried = tempfile.mkdtemp(prefix=".parley-check-", dir=folder)
    except OSError as error:
        return (
            f"{cannot}: this user may not create files in {folder} ({error.strerror});"
            " point DATABASE_URL at a writable place"
        )
    os.rmdir(tried)
    return None


def _existing_archive_problem(path: Path, cannot: str) -> str | None:
    try:
        with contextlib.closing(sqlite3.connect(path.resolve().as_uri() + "?mode=rw", uri=True)) as db:
            (version,) = db.execute("PRAGMA user_version").fetchone()
    except sqlite3.Error as error:
        return f"{cannot} as an SQLite archive: {error}"
    if version > len(MIGRATIONS):
        return f"{cannot}: a newer Parley wrote it (schema version {version}; this one knows up to {len(MIGRATIONS)})"
    return None


def _nearest_existing(path: Path) -> Path:
    """`path`, or the closest of its parents that exists (the current folder for a relative path)."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def describe_configuration(settings: Settings) -> str:
    """The settings that differ from their defaults, one `VARIABLE=value` a line, and the providers' keys, secrets
    masked: what --check prints (.env.example and docs/configuration.md hold the rest)."""
    own = [name.upper() for name in Settings.model_fields]
    changed = [name for name in Settings.model_fields if getattr(settings, name) != _default(settings, name)]
    lines = [f"{name.upper()}={_shown(getattr(settings, name))}" for name in changed]
    secrets = sorted(name for name in os.environ if _SECRET_VARIABLE.match(name) and name.upper() not in own)
    lines += [f"{name}={MASK if os.environ[name] else ''}" for name in secrets]
    return "\n".join(lines)


def _default(settings: Settings, name: str) -> object:
    """A setting's default; the judge's and the summaries' models default to the model above them."""
    if name == "judge_model":
        return settings.llm_model
    if name == "summary_model":
        return settings.judge_model
    return Settings.model_fields[name].default


def check_summary(errors: list[str], warnings: list[str], env_file: str | os.PathLike[str] | None) -> str:
    """--check's last line: what it found (the variables with errors, then with warnings), what to do next, and the
    `.env` it read."""
    found = "; ".join(_counted(kind, names) for kind, names in (("error", errors), ("warning", warnings)) if names)
    read = (
        f"read {Path(env_file).resolve()}"
        if env_file is not None and os.path.isfile(env_file)
        else f"no .env found in {Path.cwd()}"
    )
    if errors:
        return f"{found}; fix them and run `python bot.py --check` again ({read})"
    return f"OK, {found or 'no warnings'}; next: `python bot.py` ({read})"


def _counted(kind: str, variables: list[str]) -> str:
    """ "2 errors: DATABASE_URL, LLM_MODEL": how many, and the variables they name, each once."""
    return f"{len(variables)} {kind}{'' if len(variables) == 1 else 's'}: {', '.join(dict.fromkeys(variables))}"


def _shown(value: object) -> str:
    if isinstance(value, SecretStr):
        return MASK if value.get_secret_value() else ""
    if value is None:
        return ""
    if isinstance(value, frozenset):
        # As the variable is written: comma-separated.
        return ",".join(sorted(map(str, value)))
    # A URL's password (DATABASE_URL=postgresql://user:password@...) is a secret too.
    return str(value).lower() if isinstance(value, bool) else mask_credentials(str(value))


def required_settings_help() -> str:
    """--help's closing text: the settings without a default, and where the others are described."""
    required = [
        f"  {name.upper():<24}{field.description}"
        for name, field in Settings.model_fields.items()
        if field.is_required()
    ]
    return "\n".join(
        [
            "required settings (environment variables, or lines in .env):",
            *required,
            f"  {'<provider>_API_KEY':<24}The key of LLM_MODEL's provider: OPENAI_API_KEY for the default,",
            f"  {'':<24}ANTHROPIC_API_KEY for anthropic:..., and so on (not with LLM_BASE_URL).",
            "",
            "Every other setting has a default: .env.example lists them all, docs/configuration.md explains them.",
        ]
    )


def startup_summary(
    settings: Settings,
    *,
    user: object,
    servers: int,
    judged: bool,
    channels_set_otherwise: int,
    application_id: int | None,
) -> str:
    """One line: who, where, which model, judge and archive, the modes, and an invite link when in no server."""
    judge = settings.judge_model if judged else "off"
    archive = describe_database_url(settings.database_url) if settings.archive_enabled else "off"
    others = channels_set_otherwise
    modes = f"mode {NORMAL} by default" + (f" ({others} channel(s) set otherwise)" if others else "")
    line = (
        f"Parley {parley_version()} connected as {user} to {servers} server(s):"
        f" model {settings.llm_model}, judge {judge}, archive {archive}, {modes}"
    )
    if servers == 0 and application_id is not None:
        line += f"; add it to a server with {invite_link(application_id)}"
    return line
