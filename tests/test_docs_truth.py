"""The pages an admin reads stay true to the code: every command Parley registers is on the commands page and every
command a page names exists; every setting is in the configuration page and .env.example, grouped alike, and every
setting a page names exists; every figure on a user page carries the date and commit it was measured at; the site
opens on getting started and the README stays a front page. They read the docs, so they are `slow`."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from textwrap import dedent
from types import SimpleNamespace
from typing import cast

import discord
import pytest
import yaml
from discord import app_commands

from commands.groups import add_slash_commands
from commands.tree import permission_name
from config import Settings
from edge.streaming import regenerate_command

# Reads the README and the docs (see tests/conftest.py).
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
PAGES = {path.name: path.read_text() for path in sorted((ROOT / "docs").glob("*.md"))}
# The README and every page of the site, by file name.
DOCUMENTS = {"README.md": README, **PAGES}
ENV_EXAMPLE = (ROOT / ".env.example").read_text()
SETTINGS = {name.upper() for name in Settings.model_fields}
# Pages of measurements and of the code's own names: their figures are dated in their tables, and they name
# constants, tests and the corpora outside the repository. Evaluation is the decider's lab notebook: its
# figures are the replays' on the corpora it names.
LAB_PAGES = {"benchmarks.md", "development.md", "evaluation.md"}


# --- Commands ------------------------------------------------------------------------------------


def registered_tree() -> app_commands.CommandTree:
    """The command tree as the client builds it (bot.py's setup_hook), without connecting to Discord."""
    tree: app_commands.CommandTree = app_commands.CommandTree(discord.Client(intents=discord.Intents.none()))
    add_slash_commands(tree)
    tree.add_command(regenerate_command())
    return tree


def slash_commands() -> dict[str, app_commands.Command | app_commands.Group]:
    """Every slash command and group by its qualified name (`parley memory forget`, `parley memory`, `ask`)."""
    found: dict[str, app_commands.Command | app_commands.Group] = {}
    for command in registered_tree().get_commands(type=discord.AppCommandType.chat_input):
        assert isinstance(command, app_commands.Command | app_commands.Group)
        found[command.qualified_name] = command
        if isinstance(command, app_commands.Group):
            found.update((child.qualified_name, child) for child in command.walk_commands())
    return found


def message_commands() -> set[str]:
    """The names of the message commands (right-click a message, Apps)."""
    return {command.name for command in registered_tree().get_commands(type=discord.AppCommandType.message)}


# Backticked text starting with a slash that is a path, not a command.
NOT_COMMANDS = {"/app": "Railway's working folder", "/v1": "an OpenAI-compatible server's path"}


def named_commands(text: str) -> list[str]:
    """The commands `text` names in backticks (`/parley why [count]`), each as its words up to the first option."""
    named = []
    for span in re.findall(r"`(/[a-z][^`]*)`", text):
        words = re.match(r"/[a-z0-9-]+(?: [a-z-]+)*", " ".join(span.split()))
        assert words is not None
        if words.group(0) not in NOT_COMMANDS and not span.startswith(tuple(f"{path}/" for path in NOT_COMMANDS)):
            named.append(words.group(0))
    return named


def unknown_command(named: str, known: dict[str, app_commands.Command | app_commands.Group]) -> str | None:
    """`named` if no command or group has its name; words after a command (not a group) are its options or text."""
    words = named.removeprefix("/").split()
    for end in range(1, len(words) + 1):
        found = known.get(" ".join(words[:end]))
        if found is None:
            return named
        if isinstance(found, app_commands.Command):
            return None
    return None


def test_every_command_a_page_names_exists() -> None:
    known = slash_commands()
    unknown = {
        (page, command)
        for page, text in DOCUMENTS.items()
        for named in named_commands(text)
        if (command := unknown_command(named, known))
    }
    assert unknown == set(), "these commands are not registered: fix the page or the name"


def test_an_unregistered_command_is_found() -> None:
    """The three commands the pages once named that never existed, and one whose group does not exist."""
    known = slash_commands()
    text = "`/parley forget`, `/parley profile show [scope]`, `/parley usage`, `/reminders list`; `/parley why 5`"
    assert [unknown_command(named, known) for named in named_commands(text)] == [
        "/parley forget",
        "/parley profile show",
        "/parley usage",
        "/reminders list",
        None,
    ]


def commands_page_part(title: str) -> str:
    """A `## title` part of the commands page, up to the next `## ` heading."""
    page = PAGES["commands.md"]
    assert f"\n## {title}\n" in page, f"docs/commands.md has no part '## {title}'"
    return page.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


EVERYONE = "For everyone"
MODERATORS = "For moderators and admins"


def test_every_registered_command_is_on_the_commands_page_in_its_part() -> None:
    """Each command is in the part of whoever Discord shows it to: `/parley-admin` to moderators, the rest to all."""
    everyone, moderators = commands_page_part(EVERYONE), commands_page_part(MODERATORS)
    for name, command in slash_commands().items():
        if isinstance(command, app_commands.Command):
            part = moderators if name.startswith("parley-admin ") else everyone
            assert f"`/{name}" in part, f"/{name} is missing from the commands page's part for its users"
    for name in message_commands():
        assert f"**{name}**" in everyone, f"the message command {name} is missing from the commands page"


def test_each_command_on_the_page_gives_its_permission_and_an_example() -> None:
    """Each command's entry (a `### /name` heading) says which permission it needs and shows an example."""
    parts = commands_page_part(EVERYONE) + commands_page_part(MODERATORS)
    entries = re.split(r"\n### ", parts)[1:]
    assert entries, "the commands page has no `### ` entry per command"
    for entry in entries:
        heading = entry.split("\n", 1)[0]
        assert "**Needs:**" in entry, f"{heading}: no **Needs:** line"
        assert "**Example:**" in entry, f"{heading}: no **Example:**"


# Permissions the commands check in their bodies rather than with a decorator (the member's own data is free).
CHECKED_IN_THE_BODY = {
    "parley why": "Read Message History",
    "parley catchup": "Read Message History",
    "parley memory forget": "Manage Messages",
    "remind set": "Manage Messages",
    "parley-admin profile set": "Manage Channels",
    "parley-admin profile reset": "Manage Channels",
    # Manage Server or Manage Channels: Discord's checks ask for all they name, so the command asks itself.
    "parley-admin support report": "Manage Server",
}


def decorated_permissions(command: app_commands.Command) -> list[str]:
    """The permissions a command's checks ask of a member who has none, as Discord's clients name them."""
    nobody = cast(discord.Interaction, SimpleNamespace(permissions=discord.Permissions.none()))
    missing: list[str] = []
    for check in command.checks:
        try:
            check(nobody)
        except app_commands.MissingPermissions as refused:
            missing += [permission_name(flag) for flag in refused.missing_permissions]
    return missing


def needs_line(name: str) -> str:
    """The **Needs:** line of the commands page's entry whose heading names `/name`."""
    page = PAGES["commands.md"]
    # The name whole: `/parley-admin mode` is no entry of `/parley-admin moderation …`'s.
    named = re.compile(rf"`/{re.escape(name)}[ `]")
    [entry] = [entry for entry in page.split("\n### ")[1:] if named.search(entry.split("\n", 1)[0])]
    return " ".join(entry.split("**Needs:**", 1)[1].split("**Example:**", 1)[0].split())


def test_the_commands_page_gives_the_permission_each_command_checks() -> None:
    for name, command in slash_commands().items():
        if not isinstance(command, app_commands.Command):
            continue
        needed = [*decorated_permissions(command), *filter(None, [CHECKED_IN_THE_BODY.get(name)])]
        for permission in needed:
            assert permission in needs_line(name), f"/{name} checks {permission}: say so on the commands page"


def test_a_decorated_permission_is_read_from_the_command() -> None:
    assert decorated_permissions(cast(app_commands.Command, slash_commands()["parley-admin knowledge list"])) == [
        "Manage Messages"
    ]
    assert decorated_permissions(cast(app_commands.Command, slash_commands()["parley why"])) == []


def test_no_page_shows_an_escaped_bar() -> None:
    """`\\|` inside backticks shows as a backslash and a bar; options are separated otherwise."""
    assert [page for page, text in DOCUMENTS.items() if "\\|" in text] == []


# --- Settings ------------------------------------------------------------------------------------


def env_example_sections() -> dict[str, list[str]]:
    """.env.example's sections (`# --- The model ---`), in order, each with the settings it lists."""
    sections: dict[str, list[str]] = {}
    current = ""
    for line in ENV_EXAMPLE.splitlines():
        if heading := re.match(r"# --- (.+?) -+$", line):
            current = heading.group(1)
            sections[current] = []
        elif (setting := re.match(r"(?:# )?([A-Z][A-Z0-9_]+)=", line)) and setting.group(1) in SETTINGS:
            sections[current].append(setting.group(1))
    return sections


def configuration_sections() -> dict[str, list[str]]:
    """The configuration page's `### ` sections under `## Settings`, in order, each with its table's settings."""
    settings = PAGES["configuration.md"].split("\n## Settings\n", 1)[1].split("\n## ", 1)[0]
    return {
        part.split("\n", 1)[0].strip(): re.findall(r"^\| `([A-Z][A-Z0-9_]+)` \|", part, re.MULTILINE)
        for part in settings.split("\n### ")[1:]
    }


def test_every_setting_is_in_env_example_and_the_configuration_page() -> None:
    listed_in_example = {name for names in env_example_sections().values() for name in names}
    on_the_page = {name for names in configuration_sections().values() for name in names}
    assert SETTINGS - listed_in_example == set(), "missing from .env.example"
    assert SETTINGS - on_the_page == set(), "missing from docs/configuration.md's settings tables"


def test_the_configuration_page_is_grouped_as_env_example_is() -> None:
    """The same sections in the same order, each with the same settings, so an admin finds a line in either."""
    page = {title: sorted(names) for title, names in configuration_sections().items()}
    example = {title: sorted(names) for title, names in env_example_sections().items()}
    assert list(page) == list(example)
    assert page == example


# Upper-case names in backticks on the user pages that are not Parley's settings, and what they are.
NOT_SETTINGS = {
    "OPENAI_API_KEY": "a provider's key, read by its SDK",
    "ANTHROPIC_API_KEY": "a provider's key, read by its SDK",
    "GOOGLE_API_KEY": "a provider's key, read by its SDK",
    "GROQ_API_KEY": "a provider's key, read by its SDK",
    "MISTRAL_API_KEY": "a provider's key, read by its SDK",
    "OPENROUTER_API_KEY": "a provider's key, read by its SDK",
    "RAILWAY_ENVIRONMENT": "set by Railway in its deploys",
    "RAILWAY_VOLUME_MOUNT_PATH": "set by Railway where a volume is mounted",
    "RAILWAY_PROJECT_ID": "set by Railway in its deploys",
    "LLM_MODLE": "the misspelt setting a typo warning names",
    "INFO": "a log level, LOG_LEVEL's default",
    "UTC": "TIMEZONE's default",
    "LISTEN": "a Postgres statement",
    "READY": "a gateway event",
}


def named_settings(text: str) -> set[str]:
    """The upper-case names `text` gives in backticks (`LLM_MODEL`, `LLM_MODEL=openai:gpt-4.1`) or sets (`X=1`)."""
    quoted = re.findall(r"`([A-Z][A-Z0-9_]{2,})(?:=[^`]*)?`", text)
    assigned = re.findall(r"(?:^|\s)([A-Z][A-Z0-9_]{2,})=", text, re.MULTILINE)
    return {*quoted, *assigned}


def test_every_setting_a_page_names_exists() -> None:
    unknown = {
        (page, name)
        for page, text in DOCUMENTS.items()
        if page not in LAB_PAGES
        for name in named_settings(text) - SETTINGS - NOT_SETTINGS.keys()
    }
    assert unknown == set(), "not a setting: fix the name, or add it to NOT_SETTINGS with what it is"


def test_a_misspelt_setting_is_found() -> None:
    assert named_settings(
        "Set `SERVER_TOKEN_PER_DAY=0`, or `LLM_MODEL`; then JUDGE_MODLE=x python bot.py"
    ) - SETTINGS == {
        "SERVER_TOKEN_PER_DAY",
        "JUDGE_MODLE",
    }


# --- Figures -------------------------------------------------------------------------------------

# A measured figure: a number with the unit of a time, a share, a ratio, a size or a token count.
FIGURE = re.compile(r"(?<![\w.,/-])\d[\d,]*(?:\.\d+)? ?(?:ms|s|%|\u00d7|x|[kKMG]i?B|tokens)(?!\w)")
DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")
COMMIT = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}\b")
# Figures on the user pages that are limits Parley or Discord set, not measurements, and what they are.
LIMITS = {
    "25 MB": "the largest file Parley downloads",
    "5 MB": "the largest image a provider takes",
    "2 MB": "the size images are downscaled under",
    "10 MB": "an export's size when Discord's upload limit is not known",
    "15 s": "the time limit for reading one file",
    "4,000 tokens": "the size of a catch-up's chunks",
    "300,000 tokens": "CATCHUP_TOKEN_BUDGET's default",
    "85%": "the share of HISTORY_TOKEN_BUDGET past which the oldest turns are summarised",
}


def paragraphs(text: str) -> list[str]:
    """`text`'s paragraphs; a code block or a table counts as one, so its caption's date covers it."""
    joined = re.sub(r"^```.*?^```", lambda block: block.group(0).replace("\n\n", "\n"), text, flags=re.M | re.S)
    return re.split(r"\n[ \t]*\n", joined)


def undated_figures(text: str) -> list[str]:
    """The figures of `text` in a paragraph without a date (YYYY-MM-DD) and a commit (7 or more hex digits)."""
    return [
        figure
        for paragraph in paragraphs(text)
        if not (DATE.search(paragraph) and COMMIT.search(paragraph))
        for figure in FIGURE.findall(paragraph)
        if figure not in LIMITS
    ]


def test_every_figure_on_a_user_page_has_its_date_and_commit() -> None:
    undated = {
        page: figures for page, text in DOCUMENTS.items() if page not in LAB_PAGES if (figures := undated_figures(text))
    }
    assert undated == {}, "date each figure and name its commit and command, or move it to docs/benchmarks.md"


def test_an_undated_figure_is_found() -> None:
    text = (
        "The bot answers in 2.7 ms, 40% faster.\n\n"
        "On 2026-11-25 at e59a6c6, `python bench/bench_bot.py` took 8.2 ms.\n\n"
        "A file over 25 MB is refused."
    )
    assert undated_figures(text) == ["2.7 ms", "40%"]


def undated_commits(text: str) -> list[str]:
    """The commits `text` names in a paragraph that quotes no figure: a change's date says when, not its hash."""
    return [
        commit
        for paragraph in paragraphs(text)
        if not any(figure not in LIMITS for figure in FIGURE.findall(paragraph))
        for commit in COMMIT.findall(paragraph)
    ]


def test_user_pages_name_commits_only_beside_figures() -> None:
    found = {
        page: commits for page, text in DOCUMENTS.items() if page not in LAB_PAGES if (commits := undated_commits(text))
    }
    assert found == {}, "say when a change came by its date; a commit belongs beside a figure it measured"


def test_a_commit_without_a_figure_is_found() -> None:
    text = "Rows written before 2026-11-23 (2084b4e) have no model.\n\nOn 2026-11-25 at e59a6c6 it took 8.2 ms."
    assert undated_commits(text) == ["2084b4e"]


def test_every_limit_named_as_no_figure_is_on_a_page() -> None:
    """An entry of LIMITS whose figure left the pages goes too, so the list cannot hide a new figure."""
    text = "\n".join(text for page, text in DOCUMENTS.items() if page not in LAB_PAGES)
    assert [limit for limit in LIMITS if limit not in text] == []


# --- The site and the README ---------------------------------------------------------------------


def test_the_site_opens_on_getting_started() -> None:
    """Getting started is the nav's first page (docs/hooks/home.py builds it as the home), the README's first link."""
    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"]
    first = nav[0]
    assert (first if isinstance(first, str) else next(iter(first.values()))) == "getting-started.md"
    links = re.findall(r"\]\(docs/([^)#]+)", README)
    assert links and links[0] == "getting-started.md"


def test_the_readme_is_a_front_page() -> None:
    """Under 1,200 words, with no lab notes: no benchmark commands, SQL or test names (docs/ holds those)."""
    assert len(README.split()) < 1200
    for lab_note in ("bench/", "SELECT ", "tests/", "test_"):
        assert lab_note not in README, lab_note


# Characters of a code line a laptop shows whole in the site's content column and on GitHub.
CODE_WIDTH = 100


def test_the_front_pages_code_fits_a_laptop() -> None:
    """The README's and Getting started's code blocks (the transcript, the commands) are not cut off."""
    for page in ("README.md", "getting-started.md"):
        blocks = re.findall(r"^[ \t]*```\w*\n(.*?)^[ \t]*```", DOCUMENTS[page], re.MULTILINE | re.DOTALL)
        assert blocks, page
        # A block inside a list item is indented in the file, not on the page.
        wide = [line for block in blocks for line in dedent(block).splitlines() if len(line) > CODE_WIDTH]
        assert wide == [], f"{page}: wrap these at {CODE_WIDTH} characters"


def test_user_pages_hold_no_lab_notes() -> None:
    """SQL, test files, paths outside the repository and issue numbers belong to the development pages."""
    found = {
        (page, note)
        for page, text in DOCUMENTS.items()
        if page not in LAB_PAGES
        for note in re.findall(
            r"\b(?:SELECT|UPDATE|INSERT|DELETE FROM)\b [^`\n]*|\btests/[\w/]*(?:\.py)?|\.\./\w+|issue \d+", text
        )
    }
    assert found == set()


def test_the_project_states_no_repository_url_to_clone() -> None:
    """Getting started's clone line is a placeholder only while pyproject.toml names no repository."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    if "urls" in project:
        assert "<repository-url>" not in PAGES["getting-started.md"]
    else:
        assert "<repository-url>" in PAGES["getting-started.md"]
