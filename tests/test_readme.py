"""Tests that the README and the docs pages stay true to the code: every setting and limit documented, every command
run, every link and figure's commit real. All read the docs or run commands, so all are `slow`."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from archive.sqlite import ArchivedMessage, SQLiteArchive
from config import Settings
from tests.fakes.fake_discord import FakeDiscord
from tests.fakes.fake_llm import FakeLLM
from tests.support.e2e_support import bot_environment, run_bot_py

# Reads the README and the docs and runs their commands and benches in processes of their own (see tests/conftest.py).
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
# The documentation site's pages (mkdocs.yml), by file name.
PAGES = {path.name: path.read_text() for path in sorted((ROOT / "docs").glob("*.md"))}


def section(title: str, text: str = README) -> str:
    """The `## title` section of `text` (the README unless given), up to the next `## ` heading."""
    return text.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def readme_commands(text: str = README) -> list[str]:
    """The shell commands of every sh and bash block in `text`, in order, without their comments."""
    blocks = re.findall(r"^[ \t]*```(?:sh|bash)\n(.*?)^[ \t]*```", text, re.MULTILINE | re.DOTALL)
    lines = (line.split("  #", 1)[0].strip() for block in blocks for line in block.splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def documented_default(value: object) -> str:
    """How the settings table writes a default: `true`, `120`, or none for an empty list."""
    if isinstance(value, frozenset) and not value:
        return "none"
    return f"`{str(value).lower() if isinstance(value, bool) else value}`"


def table_default(text: str, variable: str) -> str | None:
    """The default column of `variable`'s row in a markdown table of `text`, if it has one."""
    row = re.search(rf"^\| `{variable}` \| (.+?) \|", text, re.MULTILINE)
    return row.group(1) if row else None


def test_every_setting_is_documented_with_its_default() -> None:
    """Configuration's settings table names every variable and no other, with the default the code actually uses.

    tests/ops/test_startup.py holds .env.example to the same Settings, so the page and the file agree.
    """
    settings = section("Settings", PAGES["configuration.md"])
    for name, field in Settings.model_fields.items():
        default = table_default(settings, name.upper())
        assert default, f"{name.upper()} missing from the settings table of docs/configuration.md"
        if not field.is_required() and field.default is not None and name != "judge_model":
            assert default == documented_default(field.default), name
    rows = re.findall(r"^\| `([A-Z][A-Z_]+)` \|", settings, re.MULTILINE)
    assert sorted(rows) == sorted(name.upper() for name in Settings.model_fields), "a retired setting lingers"


LIMIT_SETTINGS = (
    "MAX_ANSWER_POSTS",
    "MAX_ANSWER_TOKENS",
    "ANSWER_INPUT_TOKENS_LIMIT",
    "ANSWER_OUTPUT_TOKENS_LIMIT",
    "MAX_MODEL_REQUESTS",
    "MEMBER_ANSWERS_PER_HOUR",
    "MEMBER_ANSWER_BURST",
    "SERVER_TOKENS_PER_DAY",
    "CHANNEL_QUEUE_LIMIT",
    "MAX_CONCURRENT_ANSWERS",
    "JUDGE_CALLS_PER_MINUTE",
    "ANSWER_BOT_IDS",
    "MAX_BOT_EXCHANGES",
    "WEB_SEARCH_MAX_CALLS",
    "IMAGES_PER_MEMBER_PER_DAY",
    "IMAGES_PER_SERVER_PER_DAY",
    "MCP_TOOL_TIMEOUT_SECONDS",
    "DISCORD_API_BASE_URL",
    "DISCORD_GATEWAY_URL",
    "LOGFIRE_TOKEN",
    "LOGFIRE_INCLUDE_CONTENT",
)


def test_limits_and_privacy_lists_every_limit_with_its_default() -> None:
    """The "Limits and privacy" page has a row for each limit and privacy setting, with the code's default."""
    limits = PAGES["limits-and-privacy.md"]
    for variable in LIMIT_SETTINGS:
        field = Settings.model_fields[variable.lower()]
        expected = "unset" if field.default is None else documented_default(field.default)
        assert table_default(limits, variable) == expected, variable


def test_limits_and_privacy_says_what_goes_where() -> None:
    """The page covers each destination of data and each safeguard a member or operator relies on."""
    limits = PAGES["limits-and-privacy.md"]
    for topic in ("**Discord**", "**The model provider**", "**Logfire**", "**The archive file**", "secure_delete"):
        assert topic in limits, topic
    for safeguard in ("**Names are data**", "Read Message History", "surrogate", "(answer cut)"):
        assert safeguard in limits, safeguard


def test_readme_gives_the_install_and_test_commands() -> None:
    """The quick start installs the pinned requirements; Development gives the install and test commands CI uses."""
    assert "pip install -r requirements.txt" in readme_commands(
        section("Run it on your computer", PAGES["getting-started.md"])
    )
    development = readme_commands(PAGES["development.md"])
    assert 'pip install -e ".[dev]"' in development and "pytest" in development
    ci = (ROOT / ".ci" / "run").read_text()
    # The fast tests, then the slow ones: together the whole suite, on every core.
    runs = ['pytest -m "not slow" -n auto --dist worksteal', "pytest -m slow -n auto --dist worksteal"]
    assert 'pip install --quiet -e ".[dev]"' in ci and ci.rstrip().splitlines()[-2:] == runs


def test_readme_and_pre_commit_name_the_checks_ci_runs() -> None:
    """Every check .ci/run makes before the tests is in the README's Development section and the pre-commit config."""
    ci = (ROOT / ".ci" / "run").read_text()
    checks = re.findall(r"^((?:ruff|mypy)\b.*)$", ci, re.MULTILINE)
    assert checks == ["ruff check .", "ruff format --check .", "mypy"]
    development = PAGES["development.md"]
    pre_commit = (ROOT / ".pre-commit-config.yaml").read_text()
    for check in checks:
        assert check in readme_commands(development), check
        assert f"entry: {check.removesuffix(' .')}" in pre_commit, check
    for step in ("check_requirements.py --recompile", ".ci/railpack-replay", "mkdocs build --strict"):
        assert step in ci and step in development, step


def test_development_lists_every_module() -> None:
    """Each top-level module of the project, and each folder of scripts, is described in Development."""
    development = PAGES["development.md"]
    modules = [path.name for path in ROOT.glob("*.py")]
    assert modules, "no modules found"
    for name in [*modules, "eval/", "bench/", "tests/"]:
        assert f"`{name}`" in development, name


# --- Every command in the README and the docs is run -------------------------------------------

# Commands the README and the docs pages give that a test here runs (the test names the command it runs).
RUN_HERE = {
    "python -m eval.replay eval/sample",
    "python -m eval.replay --json eval/sample",
    "python -m eval.replay --ablation eval/sample",
    "python -m eval.replay --disable cut_in eval/sample",
    "python eval/build_irc_eval.py data/irc-dev",
    "python -m eval.replay data/irc-dev",
    'sqlite3 data/parley.db "SELECT author_name, count(*) FROM messages GROUP BY 1 ORDER BY 2 DESC"',
    "python bench/bench_engine.py",
    "python bench/bench_engine_ab.py",
    "python bench/bench_engine_seed.py",
    "python bench/bench_history.py",
    "python bench/bench_history.py --backend postgres",
    "python bench/bench_bot.py",
    "python bench/bench_memory.py",
    "python bench/bench_backfill.py",
    "python bench/bench_reconciliation.py",
    "python bench/bench_attachments.py",
    "python bench/bench_stream.py",
    "python bench/bench_cost.py --judge --no-summaries",
    "python bench/bench_request_parts.py",
    "python bench/bench_transform.py",
    "python bench/bench_hostile_files.py",
    "python bench/bench_file_text.py",
    "python bench/bench_file_text.py --backend postgres",
    "python bench/bench_catchup.py",
    "python bench/bench_privacy.py",
    "python bench/bench_usage_chart.py",
    "python bench/bench_knowledge.py",
    "python bench/bench_knowledge.py --backend postgres",
    "LLM_BASE_URL=http://localhost:11434/v1 LLM_MODEL=qwen3:8b python bot.py",
    "LLM_BASE_URL=http://localhost:8000/v1 LLM_MODEL=Qwen/Qwen3-8B python bot.py",
    "python bot.py --sync",
    "GUILD_ID=123456789012345678 python bot.py --sync",
    "mkdocs build --strict",
}
# Commands run by another test, or only by CI, or not at all because they install or download.
RUN_ELSEWHERE = {
    "git clone <repository-url> parley && cd parley": "needs the network (test_quickstart copies the checkout)",
    "python3 -m venv .venv && . .venv/bin/activate": "installs (test_quickstart uses this suite's interpreter)",
    "pip install -r requirements.txt": "installs: .ci/railpack-replay runs it in CI",
    "python bench/bench_install_size.py": "installs from the package index (twice with --against)",
    "python bench/make_knowledge_corpus.py path/to/tldr": (
        "needs a clone of tldr-pages; test_bench_knowledge checks the corpus it made"
    ),
    'pip install -e ".[dev]"': "installs: .ci/run runs it in CI",
    "cp .env.example .env": "test_quickstart",
    "python bot.py --check": "test_quickstart",
    "python bot.py": "test_e2e.py::test_sigterm_stops_bot_py_cleanly runs it against the fake Discord",
    "python ../shared/eval/make_transcripts.py ../shared/eval/irc-train train data/irc-train-transcripts": (
        "needs the training corpus, which is not in the repository"
    ),
    "python -m eval.train_decider --dev ../shared/eval/irc-dev --folds": (
        "needs the train transcripts; minutes of replays"
    ),
    "ollama pull qwen3:8b": "downloads a model",
    "vllm serve Qwen/Qwen3-8B --enable-auto-tool-choice --tool-call-parser hermes": "downloads a model",
    "ruff check .": ".ci/run (test_readme_and_pre_commit_name_the_checks_ci_runs keeps them the same)",
    "ruff format --check .": ".ci/run",
    "mypy": ".ci/run",
    "pytest": ".ci/run, and this very test run",
    "pre-commit install": "installs a git hook",
    'pytest -m "not slow"': ".ci/run runs the whole suite, which includes these",
    'pytest -m "not slow" -n auto': ".ci/run runs it (with --dist worksteal)",
    "pytest -n auto": ".ci/run runs the same tests as its fast and slow runs",
    "bash .ci/run": "CI itself: installs into a fresh environment, then runs every check and the whole suite",
    "mkdocs serve": "serves the site until stopped (test_the_docs_site_builds_strictly builds the same pages)",
}


def every_command() -> set[str]:
    """The commands of the README and of every docs page."""
    return {command for text in [README, *PAGES.values()] for command in readme_commands(text)}


def test_every_readme_command_is_run_by_a_test_or_named_here() -> None:
    """A command added to the README or a page fails this test until a test runs it or it is named with why not."""
    commands = every_command()
    assert commands - RUN_HERE - RUN_ELSEWHERE.keys() == set()
    assert (RUN_HERE | RUN_ELSEWHERE.keys()) - commands == set(), "named here but gone from the README and the docs"


def run(command: str, cwd: Path = ROOT, extra: str = "", env: dict[str, str] | None = None) -> str:
    """Run a README command (with `extra` arguments appended) in `cwd`; its output, after checking it exited 0."""
    assert command in RUN_HERE, command
    result = subprocess.run(
        ["bash", "-c", f"{command} {extra}"],
        cwd=cwd,
        env=env or {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, f"{command}: {result.stderr}"
    return result.stdout


def test_replay_on_the_sample_gives_the_readme_figures() -> None:
    """`python -m eval.replay eval/sample` scores what the README says the sample scores."""
    report = run("python -m eval.replay eval/sample")
    assert "files: 3   labelled messages: 526   positives: 113" in report
    scores = re.search(r"precision (\S+)   recall (\S+)   F1 (\S+)", report)
    unmentioned = re.search(r"recall on positives not mentioning the bot: (\S+)", report)
    assert scores and unmentioned
    precision, recall, f1 = scores.groups()
    figures = (
        f"precision {precision}, recall {recall}, F1 {f1} ({unmentioned.group(1)} recall on replies without a mention)"
    )
    assert figures in " ".join(section("How well it decides", PAGES["evaluation.md"]).split())
    as_json = json.loads(run("python -m eval.replay --json eval/sample").splitlines()[-1])
    # The JSON rounds to 4 places, the text to 3: 0.74549 is 0.7455 in one and 0.745 in the other.
    assert (as_json["files"], as_json["messages"]) == (3, 526) and as_json["f1"] == pytest.approx(float(f1), abs=6e-4)


def test_the_other_replay_commands_run_on_the_sample() -> None:
    """The readable report, the ablation and a disabled rule all run on the shipped sample."""
    assert "files: 3   labelled messages: 526" in run("python -m eval.replay eval/sample")
    assert "| without `cut_in` |" in run("python -m eval.replay --ablation eval/sample")
    assert "cut_in" not in run("python -m eval.replay --disable cut_in eval/sample")


def write_raw_log(folder: Path) -> None:
    """A tiny corpus log: 1,000 lines of context, then alice and bob answering each other 20 times, annotated."""
    folder.mkdir()
    context = [f"[00:{minute % 60:02d}] <carol> line {minute}" for minute in range(1000)]
    talk = [f"[01:{index // 4:02d}] <{'alice' if index % 2 else 'bob'}> message {index}" for index in range(40)]
    (folder / "2020-01-01_00.ascii.txt").write_text("\n".join(context + talk) + "\n")
    links = [f"{1000 + index - 1} {1000 + index} -" for index in range(1, 40)]
    (folder / "2020-01-01_00.annotation.txt").write_text("\n".join(["1000 1000 -", *links]) + "\n")


def test_build_irc_eval_then_replay_on_what_it_built(tmp_path: Path) -> None:
    """The build script, given local corpus files instead of the download, writes transcripts eval/replay.py scores."""
    write_raw_log(tmp_path / "raw")
    (tmp_path / "eval").symlink_to(ROOT / "eval")
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": str(ROOT),
    }
    built = run("python eval/build_irc_eval.py data/irc-dev", tmp_path, "--source raw", env)
    assert "2 transcripts from 1 logs" in built
    report = run("python -m eval.replay data/irc-dev", tmp_path, env=env)
    assert "files: 2   labelled messages: 40   positives: 39" in report


def test_build_irc_eval_help_runs_offline() -> None:
    """`--help` explains the script without touching the network."""
    result = subprocess.run(
        [sys.executable, "eval/build_irc_eval.py", "--help"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert "--source" in result.stdout and "CC BY 4.0" in " ".join(result.stdout.split())


async def test_sqlite_query_reads_the_archive(tmp_path: Path) -> None:
    """The README's sqlite3 query counts messages per author in an archive Parley wrote."""
    if shutil.which("sqlite3") is None:
        pytest.skip("the sqlite3 client is not installed")
    archive = await SQLiteArchive.open(tmp_path / "data" / "parley.db")
    start = datetime.now(UTC) - timedelta(minutes=5)
    for index, author in enumerate(["alice", "bob", "alice"]):
        message = ArchivedMessage(index + 1, 10, 20, 100 + len(author), author, "hi", start, is_bot=False)
        archive.add(message)
    await archive.close()
    command = 'sqlite3 data/parley.db "SELECT author_name, count(*) FROM messages GROUP BY 1 ORDER BY 2 DESC"'
    output = await asyncio.to_thread(run, command, tmp_path)
    assert output.split() == ["alice|2", "bob|1"]


@pytest.mark.parametrize(
    ("command", "small", "shows"),
    [
        ("python bench/bench_engine.py", "--messages 2000 --channels 20 --runs 1", "record-and-decide"),
        (
            # Against the checkout's own HEAD: any clone has it, and the same engine must decide alike.
            "python bench/bench_engine_ab.py",
            "--against HEAD --messages 2000 --channels 20 --rounds 1 --slice 500 --check-messages 1000",
            "decisions identical: True; log lines identical: True",
        ),
        ("python bench/bench_history.py", "--messages 2000 --channels 5 --queries 5", "LIKE '%word%' scan"),
        (
            "python bench/bench_history.py --backend postgres",
            "--messages 2000 --channels 5 --queries 5",
            "LIKE '%word%' scan",
        ),
        ("python bench/bench_bot.py", "--messages 4 --turns 2 --runs 1", "inbound medians over the runs"),
        ("python bench/bench_memory.py", "--memories 500 --queries 5 --ended 50", "once all have ended"),
        ("python bench/bench_backfill.py", "--messages 300 --runs 1", "messages/s archived"),
        ("python bench/bench_reconciliation.py", "--messages 300 --runs 1", "messages/s rechecked"),
        ("python bench/bench_attachments.py", "--turns 4 --every 2 --side 400", "request bytes without the setting"),
        ("python bench/bench_stream.py", "--answers 1 --tokens 40 --rate 200", "first text within 1.5 s"),
        ("python bench/bench_cost.py --judge --no-summaries", "--turns 3", "judge requests"),
        ("python bench/bench_request_parts.py", "--turns 21", "median cacheable share"),
        ("python bench/bench_transform.py", "--turns 2 --requests 3 --runs 1", "saved"),
        ("python bench/bench_hostile_files.py", "--answers 1", "peak RSS of the bot"),
        ("python bench/bench_file_text.py", "--files 5", "median time to store one file's text"),
        ("python bench/bench_file_text.py --backend postgres", "--files 5", "median time to store one file's text"),
        ("python bench/bench_catchup.py", "--messages 300", "chunks reused"),
        ("python bench/bench_privacy.py", "--messages 300 --member-messages 50", "longest event-loop stall"),
        ("python bench/bench_usage_chart.py", "--days 7 --channels 3 --members 2 --runs 1", "PNG:"),
        ("python bench/bench_knowledge.py", "--sections 1500 --passes 1", "recall@5 all / lexical / paraphrase"),
        (
            "python bench/bench_knowledge.py --backend postgres",
            "--sections 1500 --passes 1",
            "recall@5 all / lexical / paraphrase",
        ),
    ],
)
def test_the_benches_run(command: str, small: str, shows: str) -> None:
    """Each bench the Benchmarks page quotes runs and prints its figures (at a small size, not its default)."""
    assert command in PAGES["benchmarks.md"]
    assert shows in run(command, extra=small)


# A stand-in of the seed's engine with its interface (the seed's own code is not Parley's to commit): a conversation
# per channel that times out, started by a mention, answered on a mention.
_STAND_IN_CONVERSATION = """
from dataclasses import dataclass, field
from datetime import datetime, timezone
from tools import MessageData


@dataclass
class ChannelConversation:
    last_activity: datetime
    messages: list = field(default_factory=list)
    llm_history: list = field(default_factory=list)


class ConversationManager:
    def __init__(self, timeout_seconds=120):
        self.timeout, self.conversations = timeout_seconds, {}

    def get(self, channel_id):
        conversation = self.conversations.get(channel_id)
        if conversation and (datetime.now(timezone.utc) - conversation.last_activity).total_seconds() > self.timeout:
            del self.conversations[channel_id]
            return None
        return conversation

    def start(self, channel_id, initial_messages):
        conversation = ChannelConversation(datetime.now(timezone.utc), list(initial_messages))
        self.conversations[channel_id] = conversation
        return conversation

    def record_message(self, channel_id, message):
        conversation = self.conversations[channel_id]
        conversation.last_activity = datetime.now(timezone.utc)
        conversation.messages.append(message)

    def record_bot_response(self, channel_id, llm_history):
        self.conversations[channel_id].llm_history = llm_history


class ResponseDecider:
    def __init__(self, followup_window_seconds=60):
        self.window = followup_window_seconds

    def should_start_conversation(self, message, bot_user_id):
        mentioned = bot_user_id in [m.id for m in message.mentions]
        return mentioned, "explicit_mention" if mentioned else "no_trigger"

    def should_respond(self, message, conversation, bot_user_id):
        return self.should_start_conversation(message, bot_user_id)
"""
_STAND_IN_TOOLS = """
from datetime import datetime
from pydantic import BaseModel


class MessageData(BaseModel):
    author: str
    author_id: int
    timestamp: datetime
    content: str
    is_bot: bool = False
"""


def test_the_engine_against_the_seed_bench_runs_on_a_clone(tmp_path: Path) -> None:
    """`bench_engine_seed.py` reads the seed's engine from a git clone at run time (a stand-in of its interface here)
    and prints the two engines' rates and their ratio."""
    git = shutil.which("git")
    if git is None:
        pytest.skip("git is not installed")
    seed = tmp_path / "seed"
    seed.mkdir()
    (seed / "conversation.py").write_text(_STAND_IN_CONVERSATION)
    (seed / "tools.py").write_text(_STAND_IN_TOOLS)
    identity = ["-c", "user.name=bench", "-c", "user.email=bench@example.invalid"]
    for step in (["init", "-q"], ["add", "."], [*identity, "commit", "-q", "-m", "stand-in"]):
        subprocess.run([git, *step], cwd=seed, check=True, capture_output=True)
    shown = run("python bench/bench_engine_seed.py", extra=f"--seed-git {seed} --messages 3000 --channels 30 --pairs 2")
    assert "Parley / seed record-and-decide rate: median " in shown
    assert shown.count(" answered), seed ") == 2


@pytest.mark.parametrize(
    "command",
    [
        "LLM_BASE_URL=http://localhost:11434/v1 LLM_MODEL=qwen3:8b python bot.py",
        "LLM_BASE_URL=http://localhost:8000/v1 LLM_MODEL=Qwen/Qwen3-8B python bot.py",
    ],
)
def test_local_model_commands_pass_the_check(command: str, tmp_path: Path) -> None:
    """The local-model settings as the README gives them are a complete configuration (`--check` passes)."""
    (tmp_path / "bot.py").symlink_to(ROOT / "bot.py")
    env = {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", "HOME": str(tmp_path)}
    env.update(DISCORD_TOKEN="readme-token", PYTHONPATH=str(ROOT))
    output = run(command, tmp_path, "--check", env)
    assert "LLM_BASE_URL=http://localhost" in output


def command_puts(fake: FakeDiscord) -> int:
    return sum(1 for request in fake.requests if request.method == "PUT" and request.path.endswith("/commands"))


@pytest.mark.parametrize("command", ["python bot.py --sync", "GUILD_ID=123456789012345678 python bot.py --sync"])
async def test_sync_commands_register_and_exit(command: str, fake: FakeDiscord, llm: FakeLLM, tmp_path: Path) -> None:
    """`--sync`, globally or in GUILD_ID, registers the commands with the fake Discord and exits 0."""
    assert command in RUN_HERE
    variables, _, _ = command.rpartition("python bot.py --sync")
    guild = dict(item.split("=", 1) for item in shlex.split(variables))
    if guild:
        guild["GUILD_ID"] = str(fake.guild_id)
    env = bot_environment(fake, llm, tmp_path / "parley.db", **guild)
    code, stderr = await run_bot_py(env, tmp_path, "--sync")
    assert code == 0, stderr
    assert command_puts(fake) == 1
    assert list(fake.commands) == [fake.guild_id if guild else None]


def test_bot_help_and_version() -> None:
    """`python bot.py --help` lists the required settings; `--version` names the version."""
    help_text = subprocess.run(
        [sys.executable, "bot.py", "--help"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    assert "DISCORD_TOKEN" in help_text and "--check" in help_text
    version = subprocess.run([sys.executable, "bot.py", "--version"], cwd=ROOT, capture_output=True, text=True)
    assert version.stdout.startswith("Parley ")


# --- The README and the docs site hold together --------------------------------------------------


def test_the_docs_site_builds_strictly(tmp_path: Path) -> None:
    """`mkdocs build --strict`, as .ci/run runs it, builds every page with no broken link or anchor."""
    run("mkdocs build --strict", extra=f"--site-dir {tmp_path / 'site'}")
    built = {path.parent.name for path in (tmp_path / "site").rglob("index.html")}
    # Getting started is the home page (docs/hooks/home.py): the site's own index.html.
    assert {name.removesuffix(".md") for name in PAGES} - {"getting-started"} <= built
    assert '<h1 id="getting-started">Getting started' in (tmp_path / "site" / "index.html").read_text()


def test_the_readme_stays_short() -> None:
    """A newcomer reads the README in five minutes; the rest belongs in docs/."""
    assert len(README.splitlines()) <= 300


def slug(heading: str) -> str:
    """The anchor Python-Markdown's toc extension gives a heading (its default slugify, ASCII text)."""
    return re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", heading).strip().lower())


def test_readme_links_reach_docs_pages_and_their_headings() -> None:
    """Every `docs/` link of the README names a page that exists and, with an anchor, one of its headings.

    mkdocs checks the links between pages; the README is outside the site, so this checks its own.
    """
    links = re.findall(r"\]\(docs/([^)#]+)(?:#([^)]+))?\)", README)
    assert links, "the README links no docs page"
    for page, anchor in links:
        assert page in PAGES, page
        if anchor:
            headings = re.findall(r"^#+ (.+)$", PAGES[page], re.MULTILINE)
            assert anchor in {slug(heading) for heading in headings}, f"{page}#{anchor}"


def numbered_steps(text: str) -> str:
    """The numbered steps of `text` ("1. ..." up to the blank line after the last), links made page-relative."""
    steps = re.search(r"^1\. .*?(?=\n\n(?!\s*\d\.))", text, re.MULTILINE | re.DOTALL)
    assert steps, "no numbered steps"
    return steps.group(0).replace("](docs/", "](")


def test_railway_steps_are_the_same_in_getting_started_and_deploying() -> None:
    """Getting started's Railway steps are the Deploying page's, word for word, so the two cannot drift apart."""
    readme_steps = numbered_steps(section("Deploy on Railway", PAGES["getting-started.md"]))
    assert readme_steps == numbered_steps(section("On Railway", PAGES["deploying.md"]))


def test_every_commit_a_figure_names_is_in_the_history() -> None:
    """The commits the pages date their figures and changes by exist (a typo would date a figure wrongly)."""
    git = shutil.which("git")
    if git is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    shallow = subprocess.run([git, "rev-parse", "--is-shallow-repository"], cwd=ROOT, capture_output=True, text=True)
    if shallow.stdout.strip() != "false":
        pytest.skip("a shallow clone does not hold the history the figures name")
    text = "\n".join(PAGES.values())
    commits = {word for word in re.findall(r"\b[0-9a-f]{7}\b", text) if re.search("[a-f]", word)}
    assert len(commits) > 10, commits
    for commit in sorted(commits):
        found = subprocess.run([git, "cat-file", "-e", f"{commit}^{{commit}}"], cwd=ROOT, capture_output=True)
        assert found.returncode == 0, f"{commit} is no commit of this repository"
