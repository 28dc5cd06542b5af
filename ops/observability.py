"""Logging and Logfire: where log records and model-run spans go, and what of members' words they may carry."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import logfire
from opentelemetry.sdk.trace import SpanProcessor
from pydantic_ai import Embedder
from pydantic_ai.models.instrumented import InstrumentationSettings

from config import Settings
from ops.redaction import LogLineFormatter, MaskCredentials

log = logging.getLogger("parley")


# Log-record attributes holding what members wrote or chose: names, and the judge's words about a message.
CONTENT_ATTRIBUTES = ("author", "detail")
REDACTED = "[redacted]"


def configure_logging(settings: Settings, *, span_processors: Sequence[SpanProcessor] = ()) -> None:
    """Console logging at LOG_LEVEL; with LOGFIRE_TOKEN set, logs, decisions, model runs and embeddings also go
    to Logfire.

    Logfire gets message text (prompts, tool arguments and results, answers, and the names and
    excerpts in log records) only with LOGFIRE_INCLUDE_CONTENT=true. `span_processors` are handed
    everything Logfire would send (tests capture it with them).
    """
    token = settings.logfire_token
    logfire.configure(
        send_to_logfire=token is not None,
        token=token.get_secret_value() if token is not None else None,
        service_name="parley",
        console=False,
        additional_span_processors=list(span_processors),
        scrubbing=logfire.ScrubbingOptions(callback=_keep_ids),
    )
    line_format = "%(asctime)s %(levelname)s %(name)s: %(message)s"
    console = logging.StreamHandler()
    # Names and message text in records are members': escaped there, so one record is one line.
    console.setFormatter(LogLineFormatter(line_format))
    handlers: list[logging.Handler] = [console]
    # Without a destination, spans and log records would go nowhere, yet building them costs about
    # 2 ms a model call and 0.2 ms a log record.
    if token is not None or span_processors:
        content = settings.logfire_include_content
        logfire.instrument_pydantic_ai(include_content=content, include_binary_content=content)
        # Logfire's pydantic-ai integration covers agents only; the knowledge base's embeddings get the same spans.
        Embedder.instrument_all(InstrumentationSettings(include_content=content, include_binary_content=content))
        to_logfire = logfire.LogfireLoggingHandler() if content else ContentFreeLogfireHandler()
        to_logfire.addFilter(MaskCredentials())
        handlers.append(to_logfire)
    logging.basicConfig(level=settings.log_level, format=line_format, handlers=handlers, force=True)


def _keep_ids(match: logfire.ScrubMatch) -> Any:
    """Keep `author_id`, which Logfire's scrubber would hide because it contains "auth"; an id is no credential."""
    return match.value if match.path[-1] == "author_id" else None


class ContentFreeLogfireHandler(logfire.LogfireLoggingHandler):
    """Logfire's log handler, minus what members wrote or chose.

    A record's `CONTENT_ATTRIBUTES` are left out, and so are their values among its format
    arguments (the message reads "by [redacted]"); ids, reasons and tiers still go.
    """

    def fill_attributes(self, record: logging.LogRecord) -> dict[str, Any]:
        hidden = [record.__dict__[key] for key in CONTENT_ATTRIBUTES if key in record.__dict__]
        if not hidden:
            return super().fill_attributes(record)
        fields = {key: value for key, value in record.__dict__.items() if key not in CONTENT_ATTRIBUTES}
        redacted = logging.makeLogRecord(fields)
        if isinstance(record.args, tuple):
            redacted.args = tuple(REDACTED if isinstance(arg, str) and arg in hidden else arg for arg in record.args)
        return super().fill_attributes(redacted)


RETIRED_SETTINGS = {
    "IGNORE_OTHER_BOTS": "other bots, webhooks and system messages are answered only if listed in ANSWER_BOT_IDS",
}


def warn_about_retired_settings(environ: Mapping[str, str]) -> None:
    """Say which variables set for an older Parley are now ignored, and what replaced them."""
    for name, instead in RETIRED_SETTINGS.items():
        if name in environ:
            log.warning("%s is no longer read: %s", name, instead)
