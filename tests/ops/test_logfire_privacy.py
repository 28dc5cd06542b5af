"""What reaches Logfire: model runs, decisions and logs, but message text only with LOGFIRE_INCLUDE_CONTENT=true."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import logfire
import pytest
from logfire.testing import TestExporter
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from pydantic_ai import Agent, Embedder, ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from agent import build_responder, generate_reply
from archive.sqlite import ArchivedMessage, SQLiteArchive
from config import Settings
from conversation import ConversationManager
from deciding.decider import ResponseDecider, log_decision
from ops.observability import configure_logging
from records import Decision, MessageRecord
from tests.support.embedding_support import HashingEmbeddingModel
from tools import ChatDeps

BOT, MALLORY, CHANNEL, GUILD = 1, 66, 500, 42
AUTHOR = "Mallory Q. Public"
QUESTION = "what was the staging password? my locker code is 4-8-15-16"
ARCHIVED_TEXT = "the staging password is hunter2-zebra"
ANSWER = "It was hunter2-zebra; I'll forget the locker code."
JUDGE_WORDS = "Mallory quoted her locker code"
CHANNEL_NAME = "vault-planning"
EVERY_SECRET = ("4-8-15-16", "hunter2-zebra", "I'll forget", AUTHOR, JUDGE_WORDS, CHANNEL_NAME)


@pytest.fixture
def capture_logfire() -> Iterator[Callable[[Settings], TestExporter]]:
    """`configure_logging` with a capturing span processor; the root logger, pydantic-ai and Logfire are reset after."""
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    exporter = TestExporter()

    def configure(settings: Settings) -> TestExporter:
        configure_logging(settings, span_processors=[SimpleSpanProcessor(exporter)])
        return exporter

    yield configure
    root.handlers[:], root.level = saved
    Agent.instrument_all(False)
    Embedder.instrument_all(False)
    logfire.configure(send_to_logfire=False, console=False)


def search_then_answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """The model searches the archive once, then answers."""
    if len(messages) == 1:
        return ModelResponse(parts=[ToolCallPart("search_history", {"query": "staging password"}, tool_call_id="t1")])
    return ModelResponse(parts=[TextPart(ANSWER)])


async def answer_and_decide(settings: Settings, tmp_path: Path) -> None:
    """One real responder run with a history tool, plus the decisions Parley logs around it."""
    now = datetime.now(UTC)
    archive = await SQLiteArchive.open(tmp_path / "archive.db")
    try:
        archive.add(ArchivedMessage(7, GUILD, CHANNEL, MALLORY, AUTHOR, ARCHIVED_TEXT, now, is_bot=False))
        question = MessageRecord(8, CHANNEL, MALLORY, AUTHOR, QUESTION, now, mention_ids=frozenset({BOT}))
        manager = ConversationManager(120)
        conversation = manager.start(CHANNEL, [question])
        decider = ResponseDecider()
        await decider.decide(question, conversation, BOT)
        log_decision(question, Decision(False, "judge_no", "judge", 0.9, detail=JUDGE_WORDS))
        agent = build_responder(settings, model=FunctionModel(search_then_answer), archive_enabled=True)
        deps = ChatDeps("Parley", BOT, GUILD, "Guild", CHANNEL, CHANNEL_NAME, archive, MALLORY, True)
        reply = await generate_reply(agent, conversation, question, deps)
        assert reply.text == ANSWER
    finally:
        await archive.close()


def exported_text(exporter: TestExporter) -> str:
    return json.dumps(exporter.exported_spans_as_dict(), default=str)


async def test_logfire_gets_no_message_text_by_default(
    make_settings: Callable[..., Settings], capture_logfire: Callable[[Settings], TestExporter], tmp_path: Path
) -> None:
    """By default the model run, the tool call and the decisions reach Logfire without any text, name or answer."""
    exporter = capture_logfire(make_settings())
    await answer_and_decide(make_settings(), tmp_path)
    spans = exporter.exported_spans_as_dict()
    names = [span["name"] for span in spans]
    assert any("parley" in name for name in names) and any("search_history" in name for name in names)
    decisions = [span["attributes"] for span in spans if span["attributes"].get("reason") in {"mention", "judge_no"}]
    assert len(decisions) == 2 and all(attributes["author_id"] == MALLORY for attributes in decisions)
    text = exported_text(exporter)
    assert [secret for secret in EVERY_SECRET if secret in text] == []


async def test_logfire_gets_message_text_when_asked(
    make_settings: Callable[..., Settings], capture_logfire: Callable[[Settings], TestExporter], tmp_path: Path
) -> None:
    """With LOGFIRE_INCLUDE_CONTENT=true the prompt, the tool result, the answer and the names reach Logfire."""
    settings = make_settings(logfire_include_content=True)
    exporter = capture_logfire(settings)
    await answer_and_decide(settings, tmp_path)
    text = exported_text(exporter)
    assert [secret for secret in EVERY_SECRET if secret not in text] == []


@pytest.mark.parametrize("include_content", [False, True])
def test_logfire_gets_no_password_in_a_url(
    make_settings: Callable[..., Settings], capture_logfire: Callable[[Settings], TestExporter], include_content: bool
) -> None:
    """A URL's password in a log record's arguments or in an exception logged with it never reaches Logfire, with
    content or without; the member's name stays an argument, which the content-free handler still drops."""
    exporter = capture_logfire(make_settings(logfire_include_content=include_content))
    log = logging.getLogger("parley")
    url = "postgresql://parley:hunter2-zebra@db:5432/parley"
    log.warning("cannot reach %s for %s", url, AUTHOR, extra={"author": AUTHOR})
    log.warning("archive down: %s", ConnectionError(f"{url} refused the connection"))
    text = exported_text(exporter)
    assert "hunter2-zebra" not in text and "postgresql://parley:********@db:5432/parley" in text
    assert (AUTHOR in text) is include_content


@pytest.mark.parametrize("include_content", [False, True])
async def test_embeddings_reach_logfire_with_their_text_only_when_asked(
    make_settings: Callable[..., Settings], capture_logfire: Callable[[Settings], TestExporter], include_content: bool
) -> None:
    """The knowledge base's embedding requests are spans as model runs are, the embedded text only with content."""
    exporter = capture_logfire(make_settings(logfire_include_content=include_content))
    await Embedder(HashingEmbeddingModel()).embed_documents(["The vault's locker code is 4-8-15-16."])
    spans = exporter.exported_spans_as_dict()
    assert any(span["name"].startswith("embeddings") for span in spans)
    assert ("4-8-15-16" in exported_text(exporter)) is include_content
