"""Benchmark what an answer's request carries, part by part: instructions, tool definitions, channel context, history,
files, memory, the new message and tool rounds, in characters and tokens.

    python bench/bench_request_parts.py [--turns 80] [--budget 4000] [--against REVISION] [--restarts]

Three answers run in this process on the answer agent Parley builds (`agent.build_responder`, the archive, memory and
reminders on, web search off) against the fake model server from tests/, which records each request as the
OpenAI-compatible client sent it: a plain answer, a knowledge answer (the server has documents; the model searches
them once, then answers) and a file answer (a 6,000-character log attached). Each is the first answer of a
conversation in a channel with an earlier conversation summarised (its memory) and six messages it has not seen. Then
`python bot.py` runs the 80-turn conversation of bench/bench_cost.py (HISTORY_TOKEN_BUDGET=4000, the archive and
memory on) and the request of its last answer is split the same way, with its cacheable share (the byte-identical
prefix it shares with the answer request before it); as the history's summaries come round every few turns there,
the mean and largest request and the median cacheable share from turn 20 on follow. With `--against REVISION` that
conversation runs first on `python bot.py` as it was at REVISION (git archive to a temporary folder), in the same run.
For each conversation it also counts the restarts from turn 20 on (a request that does not continue the one before,
so a provider's prefix cache starts over) and the mean cacheable share; `--restarts` lists each restart with the part
of the request where it first differs from the one before (the tool definitions, the instructions, the summary of
earlier turns, a history message, the new message).

A request is rendered as bench/bench_cost.py renders it (each tool definition, then each message, as compact JSON);
a part's characters are those of its JSON, tokens are characters / 4. The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import sys
import tempfile
from collections import deque
from collections.abc import Callable, Collection
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "bench")]

from bench_cost import (  # noqa: E402
    CHARS_PER_TOKEN,
    STEADY_FROM_TURN,
    common_prefix,
    converse,
    kind_of,
    measure_requests,
    rendered,
)
from bench_hostile_files import checkout  # noqa: E402

from agent import build_responder, generate_reply  # noqa: E402
from archive import ConversationSummary  # noqa: E402
from archive.knowledge_types import KnowledgeHit  # noqa: E402
from config import Settings  # noqa: E402
from conversation import ChannelConversation  # noqa: E402
from files.prepared import Prepared, PreparedFiles  # noqa: E402
from prompting.context import render_earlier_conversations  # noqa: E402
from providers.models import close_model  # noqa: E402
from records import AttachmentInfo, Kind, MessageRecord  # noqa: E402
from tests.fakes.fake_discord import ALICE_ID, BOB_ID, BOT_ID, CAROL_ID, CHANNEL_ID, GUILD_ID  # noqa: E402
from tests.fakes.fake_llm import MODEL_NAME, FakeLLM, ToolCall  # noqa: E402
from tools import ChatDeps  # noqa: E402

PARTS = ("instructions", "tools", "channel_context", "history", "files", "memory", "new_message", "tool_rounds")
T0 = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
WORDS = "deploy build cache server branch commit release docker image volume backup python config token test".split()

_CHANNEL_INFO = re.compile(r"<channel_info\b[^>]*></channel_info>\n*")
_MEMORY = re.compile(r"Summaries of this channel's earlier conversations.*?</earlier_conversations>\n*", re.DOTALL)
_TRANSCRIPT = re.compile(
    r"What was said in the channel that you have not seen yet:\n<chat_transcript>.*?</chat_transcript>\n*", re.DOTALL
)
_FILES = re.compile(r"\n?<attachment\b.*?</attachment>", re.DOTALL)


def json_chars(text: str) -> int:
    """The characters `text` takes inside a request's JSON."""
    return len(json.dumps(text)) - 2


def split_request(request: dict[str, Any]) -> dict[str, int]:
    """The request's characters by part (their sum is the whole rendered request)."""
    chars = dict.fromkeys(PARTS, 0)
    tools = request.get("tools", [])
    chars["tools"] = sum(len(json.dumps(tool, separators=(",", ":"))) + 1 for tool in tools)
    messages = request["messages"]
    last_user = max(i for i, message in enumerate(messages) if message["role"] == "user")
    for index, message in enumerate(messages):
        size = len(json.dumps(message, separators=(",", ":"))) + 1
        if message["role"] in ("system", "developer"):
            chars["instructions"] += size
        elif index < last_user:
            chars["history"] += size
        elif index > last_user:
            chars["tool_rounds"] += size
        else:
            chars["new_message"] += size - sum(_prompt_parts(message, chars).values())
    chars["new_message"] -= 1  # the rendering has no newline after its last line
    return chars


def _prompt_parts(message: dict[str, Any], chars: dict[str, int]) -> dict[str, int]:
    """Counts the new prompt's channel context, memory and files into `chars`; returns what it counted."""
    content = message["content"]
    text = content if isinstance(content, str) else "".join(p.get("text", "") for p in content if p["type"] == "text")
    counted = {
        "channel_context": sum(
            json_chars(m.group()) for m in (*_CHANNEL_INFO.finditer(text), *_TRANSCRIPT.finditer(text))
        ),
        "memory": sum(json_chars(m.group()) for m in _MEMORY.finditer(text)),
        "files": sum(json_chars(m.group()) for m in _FILES.finditer(text)),
    }
    for part, size in counted.items():
        chars[part] += size
    return counted


def words(count: int, offset: int = 0) -> str:
    return " ".join(WORDS[(offset + i * 7) % len(WORDS)] for i in range(count))


class Knowledge:
    """A server's knowledge base with documents: each search finds the same five sections."""

    async def has_documents(self, guild_id: int) -> bool:
        return True

    async def search(
        self, guild_id: int, query: str, *, limit: int = 5, channel_ids: Collection[int]
    ) -> list[KnowledgeHit]:
        return [
            KnowledgeHit(i, i, "Handbook", f"Deploy > Step {i}", words(60, i), "file:handbook.md", None, 1.0)
            for i in range(limit)
        ]


def record(message_id: int, author_id: int, author: str, text: str, minute: int, **extra: Any) -> MessageRecord:
    return MessageRecord(
        message_id, CHANNEL_ID, author_id, author, text, T0 + timedelta(minutes=minute), is_bot=False, **extra
    )


async def one_answer(kind: str) -> dict[str, Any]:
    """The last request of a `kind` answer ("plain", "knowledge" or "file"), as the fake model server received it."""

    def reply(request: dict[str, Any]) -> Any:
        searched = any(m["role"] == "tool" for m in request["messages"])
        if kind == "knowledge" and not searched:
            return ToolCall("search_knowledge", {"query": "deploy steps"})
        return words(60)

    async with FakeLLM(reply) as llm:
        values: dict[str, Any] = {"discord_token": "bench", "llm_model": MODEL_NAME, "llm_base_url": llm.base_url}
        settings = Settings(_env_file=None, **values)
        responder = build_responder(settings, archive_enabled=True, memory_enabled=True, reminders_enabled=True)
        people = [(BOB_ID, "Bob"), (CAROL_ID, "Carol")]
        unseen = [record(100 + i, *people[i % 2], words(20, i), i) for i in range(6)]
        attachment = AttachmentInfo(900, "build.log", "text/plain", 6000)
        question = record(
            200, ALICE_ID, "Alice", f"<@{BOT_ID}> {words(30)}?", 7, attachments=(attachment,) if kind == "file" else ()
        )
        conversation = ChannelConversation(CHANNEL_ID, T0, T0, deque([*unseen, question]))
        summary = ConversationSummary(T0 - timedelta(days=1), words(150))
        conversation.earlier_conversations = render_earlier_conversations([summary])
        files = None
        if kind == "file":
            log = "\n".join(f"12:{i:02d} worker {words(8, i)}" for i in range(120))[:6000]
            files = PreparedFiles({200: [Prepared(attachment, 200, Kind.TEXT, text=log)]})
        deps = ChatDeps(
            bot_name="Parley",
            bot_user_id=BOT_ID,
            guild_id=GUILD_ID,
            guild_name="Fake Guild",
            channel_id=CHANNEL_ID,
            channel_name="general",
            archive=None,
            requester_id=ALICE_ID,
            requester_can_read_history=True,
            requester_may_post=True,
            knowledge=Knowledge() if kind == "knowledge" else None,
        )
        try:
            await generate_reply(responder, conversation, question, deps, files)
        finally:
            await close_model(responder.model)
        return llm.requests[-1]


def conversation(turns: int, budget: int, source: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The answer requests of bench_cost's conversation on `python bot.py` from `source`, and their figures: the last
    request's characters and cacheable share, and over the answers from STEADY_FROM_TURN on (where the history's
    summaries come round every few turns, so one turn's request lands anywhere in that cycle) the mean and largest
    characters, the median and mean cacheable share and the restarts (requests not continuing the one before)."""
    with tempfile.TemporaryDirectory() as folder:
        requests = asyncio.run(converse(turns, Path(folder), judge=False, summaries=True, budget=budget, source=source))
    answers = [r for r in requests if kind_of(r) == "answer"]
    measured = measure_requests(answers)
    steady = range(STEADY_FROM_TURN - 1, turns)
    sizes = [len(rendered(answers[i])) for i in steady]
    shares = [measured[i].cacheable for i in steady]
    return answers, {
        "total": sizes[-1],
        "cacheable": round(measured[turns - 1].cacheable, 3),
        "mean_total": round(statistics.mean(sizes)),
        "max_total": max(sizes),
        "median_cacheable": round(statistics.median(shares), 3),
        "mean_cacheable": round(statistics.mean(shares), 3),
        "restarts": sum(first_difference(answers[i - 1], answers[i]) is not None for i in steady),
        "summaries": sum(kind_of(r) == "summary" for r in requests),
    }


def first_difference(previous: dict[str, Any], request: dict[str, Any]) -> str | None:
    """Where `request` stops continuing `previous` (the part of it holding the first differing character), or None
    when it continues it whole: the prefix a provider's cache served ends there."""
    before, after = rendered(previous), rendered(request)
    shared = common_prefix(before, after)
    if shared == len(before):
        return None
    end = 0
    for name, piece in labelled_pieces(request):
        end += len(piece) + 1
        if shared < end:
            return name
    return "the end of the request"


def labelled_pieces(request: dict[str, Any]) -> list[tuple[str, str]]:
    """The request's rendering (`rendered`) piece by piece, each named by the part it belongs to."""
    pieces = [("tool definitions", json.dumps(tool, separators=(",", ":"))) for tool in request.get("tools", [])]
    messages = request["messages"]
    last_user = max(i for i, message in enumerate(messages) if message["role"] == "user")
    for index, message in enumerate(messages):
        if message["role"] in ("system", "developer"):
            name = "instructions"
        elif index == last_user:
            name = "the new message"
        elif index > last_user:
            name = "a tool round"
        elif str(message.get("content") or "").startswith("<pyai:conversation_summary>"):
            name = f"history message {index}: the summary of earlier turns"
        else:
            name = f"history message {index} ({message['role']})"
        pieces.append((name, json.dumps(message, separators=(",", ":"))))
    return pieces


def restarts(answers: list[dict[str, Any]]) -> list[str]:
    """A line for each answer request that does not continue the one before, naming where it first differs."""
    lines = []
    for turn in range(2, len(answers) + 1):
        part = first_difference(answers[turn - 2], answers[turn - 1])
        if part is not None:
            share = measure_requests(answers[turn - 2 : turn])[1].cacheable
            lines.append(f"turn {turn}: cacheable share {share:.3f}, first differs in {part}")
    return lines


def line(name: str, chars: dict[str, int], extra: str = "") -> str:
    total = sum(chars.values())
    cells = "  ".join(f"{chars[part]:>6,} ({chars[part] // CHARS_PER_TOKEN:>5,})" for part in PARTS)
    return f"{name:<22}{cells}  {total:>7,} ({total // CHARS_PER_TOKEN:>5,}){extra}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=80, help="answers in the conversation")
    parser.add_argument("--budget", type=int, default=4000, help="HISTORY_TOKEN_BUDGET of the conversation")
    parser.add_argument("--against", help="also run the conversation on python bot.py as it was at this revision")
    parser.add_argument(
        "--restarts", action="store_true", help="list each turn whose request does not continue the one before"
    )
    args = parser.parse_args()
    figures: dict[str, Any] = {}
    print("characters (tokens) by part:")
    print(" " * 22 + "  ".join(f"{part[:14]:>14}" for part in PARTS) + "  " + f"{'total':>15}")
    for kind in ("plain", "knowledge", "file"):
        request = asyncio.run(one_answer(kind))
        chars = split_request(request)
        assert sum(chars.values()) == len(rendered(request)), (kind, chars, len(rendered(request)))
        figures[kind] = chars
        print(line(f"{kind} answer", chars), flush=True)
    sources: list[tuple[str, Callable[[Path], Path]]] = [("this commit", lambda _: ROOT)]
    if args.against:
        sources.insert(0, (args.against, lambda folder: checkout(args.against, folder)))
    for name, source in sources:
        with tempfile.TemporaryDirectory() as folder:
            answers, cycle = conversation(args.turns, args.budget, source(Path(folder)))
        chars = split_request(answers[-1])
        key = "turn" if name == "this commit" else f"turn_at_{args.against}"
        figures[key] = {**chars, **cycle}
        print(line(f"turn {args.turns}, {name}", chars, f"  cacheable share {cycle['cacheable']:.3f}"), flush=True)
        print(
            f"{'':22}turns {STEADY_FROM_TURN}-{args.turns}: {cycle['mean_total']:,} characters on average,"
            f" {cycle['max_total']:,} at most; median cacheable share {cycle['median_cacheable']:.3f},"
            f" mean {cycle['mean_cacheable']:.3f}; {cycle['restarts']} restarts; {cycle['summaries']} summaries",
            flush=True,
        )
        for restart in restarts(answers) if args.restarts else ():
            print(f"{'':22}{restart}")
    print(json.dumps({"turns": args.turns, "budget": args.budget, **figures}))


if __name__ == "__main__":
    main()
