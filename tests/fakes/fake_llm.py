"""A local OpenAI-compatible chat-completions server whose replies tests script.

async with FakeLLM(handler=lambda request: "hello") as llm:
    model = OpenAIChatModel("fake-model", provider=OpenAIProvider(base_url=llm.base_url, api_key="x"))
"""

from __future__ import annotations

import asyncio
import base64
import inspect
import itertools
import json
import logging
import re
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from pydantic_ai.models import override_allow_model_requests

_log = logging.getLogger(__name__)

MODEL_NAME = "fake-model"


@dataclass(frozen=True)
class ToolCall:
    """Reply with a call to the tool `name`; `arguments` is JSON-encoded as OpenAI does."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Error:
    """Reply with an HTTP error in OpenAI's error format.

    The openai SDK retries 408/409/429/5xx twice by default; `retryable=False` sends `x-should-retry: false`
    so it gives up at once. Retries are told to wait 1 ms (`retry-after-ms`) to keep tests fast.
    """

    status: int = 500
    message: str = "fake LLM error"
    retryable: bool = True


@dataclass(frozen=True)
class BreakOff:
    """Stream `text`, then an error event in place of the rest, as a provider failing mid-answer does.

    https://platform.openai.com/docs/api-reference/chat-streaming (the SDK raises on a chunk with `error`)
    """

    text: str
    message: str = "fake LLM stream broke off"


@dataclass(frozen=True)
class ImageRequest:
    """A request to the images API: the model, the prompt, and the reference images an edit sent."""

    model: str
    prompt: str
    references: list[bytes]


# A 1x1 transparent png.
_TINY_PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)

Reply = str | ToolCall | list[ToolCall] | Error | BreakOff
Handler = Callable[[dict[str, Any]], Reply | Awaitable[Reply]]


def message_text(message: dict[str, Any]) -> str:
    """The text of a chat message, whose content is a string or a list of typed parts."""
    content = message.get("content") or ""
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content if part.get("type") == "text")


def image_parts(request: dict[str, Any]) -> list[dict[str, Any]]:
    """The image parts (`image_url`, a data: URI for sent bytes) of every message in a request, in order."""
    return [
        part
        for message in request["messages"]
        if isinstance(message.get("content"), list)
        for part in message["content"]
        if part.get("type") == "image_url"
    ]


IMAGE_REFUSAL = "image input is not supported by this model"


def last_user_text(request: dict[str, Any]) -> str:
    return next((message_text(m) for m in reversed(request["messages"]) if m["role"] == "user"), "")


def echo(request: dict[str, Any]) -> str:
    return f"echo: {last_user_text(request)}"


def replies(*scripted: Reply) -> Handler:
    """A handler answering successive requests with `scripted`, in order; one request too many is a test bug."""
    remaining = iter(scripted)

    def handler(request: dict[str, Any]) -> Reply:
        try:
            return next(remaining)
        except StopIteration:
            raise AssertionError(f"FakeLLM: only {len(scripted)} replies were scripted") from None

    return handler


@contextmanager
def allow_model_requests() -> Iterator[None]:
    """Let pydantic-ai models make HTTP requests (the test conftest forbids them globally) within the block."""
    with override_allow_model_requests(True):
        yield


class FakeLLM:
    """Serves `POST /v1/chat/completions` (plain or `stream: true`) from `handler`, recording each request body."""

    def __init__(
        self,
        handler: Handler = echo,
        *,
        refuse_images: int = 0,
        max_body_bytes: int = 2**20,
        stream_delay: float = 0.0,
        words_per_chunk: int = 32,
        caches_prefixes: bool = False,
    ) -> None:
        self.handler = handler
        # aiohttp's default limit, 1 MiB; a provider takes more (OpenAI: images up to 20 MB each).
        self.max_body_bytes = max_body_bytes
        # The next this many requests carrying images get a 400 IMAGE_REFUSAL, as a text-only model's server says.
        self.refuse_images = refuse_images
        self.image_refusals = 0
        # POST /v1/audio/transcriptions answers this text; each request's (model, filename) is recorded.
        self.transcript = "fake transcript"
        self.transcriptions: list[tuple[str, str]] = []
        # POST /v1/images/generations and /v1/images/edits answer `image` (a 1x1 png unless a test sets another); each
        # request is recorded with the reference images an edit sent. `moderate_images`: the next this many
        # requests are refused as OpenAI's moderation refuses them.
        self.image = _TINY_PNG
        self.image_requests: list[ImageRequest] = []
        self.moderate_images = 0
        # A real model streams a token a chunk; the client spends about 2 ms on each chunk here, so tests
        # stream several words a chunk and the bench one.
        self.words_per_chunk = words_per_chunk
        # Seconds between streamed chunks (one a word): 0.02 is a model writing 50 tokens a second.
        self.stream_delay = stream_delay
        # Event-loop time each streamed reply's first text chunk went out.
        self.first_tokens: list[float] = []
        # Like OpenAI's prompt cache: the tokens of the leading messages a request shares with the one before it
        # are reported as `prompt_tokens_details.cached_tokens`.
        self.caches_prefixes = caches_prefixes
        # The `usage` each response reported, in the order of `requests`.
        self.usages: list[dict[str, Any]] = []
        self.requests: list[dict[str, Any]] = []
        # Event-loop time each chat-completions request reached its handler, before its body was read.
        self.arrivals: list[float] = []
        # The arrival time of each of `requests`, in its order (concurrent requests may finish reading out of order).
        self.request_arrivals: list[float] = []
        self.unknown_routes: list[str] = []
        self.handler_errors: list[Exception] = []
        self._ids = itertools.count(1)
        self._runner: web.AppRunner | None = None
        self._port: int | None = None

    async def start(self) -> None:
        app = web.Application(client_max_size=self.max_body_bytes)
        app.router.add_post("/v1/chat/completions", self._chat_completions)
        app.router.add_get("/v1/models", self._models)
        app.router.add_post("/v1/audio/transcriptions", self._transcription)
        app.router.add_post("/v1/images/generations", self._image)
        app.router.add_post("/v1/images/edits", self._image)
        app.router.add_route("*", "/{tail:.*}", self._unknown)
        # Short: a handler a test left waiting must not hold up shutdown.
        self._runner = web.AppRunner(app, shutdown_timeout=0.5)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self._port = self._runner.addresses[0][1]

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeLLM:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    @property
    def base_url(self) -> str:
        if self._port is None:
            raise RuntimeError("FakeLLM is not started")
        return f"http://127.0.0.1:{self._port}/v1"

    async def _chat_completions(self, request: web.Request) -> web.StreamResponse:
        arrived = asyncio.get_running_loop().time()
        self.arrivals.append(arrived)
        body = await request.json()
        self.requests.append(body)
        self.request_arrivals.append(arrived)
        if self.refuse_images and image_parts(body):
            self.refuse_images -= 1
            self.image_refusals += 1
            return _error_response(Error(400, IMAGE_REFUSAL, retryable=False))
        try:
            reply = self.handler(body)
            if inspect.isawaitable(reply):
                reply = await reply
        except Exception as exc:  # noqa: BLE001 - recorded for the test to assert on
            _log.exception("FakeLLM handler failed")
            self.handler_errors.append(exc)
            reply = Error(500, f"FakeLLM handler failed: {exc!r}", retryable=False)
        if isinstance(reply, Error):
            return _error_response(reply)
        broken = reply if isinstance(reply, BreakOff) else None
        text = broken.text if broken is not None else reply
        assert not isinstance(text, BreakOff | Error)
        cached = self._cached_tokens(body) if self.caches_prefixes else None
        completion = _Completion(f"chatcmpl-{next(self._ids)}", body.get("model", MODEL_NAME), text, body, cached)
        self.usages.append(completion.usage())
        if body.get("stream"):
            return await self._stream(request, completion, body, broken)
        if broken is not None:
            return _error_response(Error(500, broken.message, retryable=False))
        if self.stream_delay and completion.text:
            # The model takes as long to write a whole reply as to stream it; its first token comes as soon.
            chunks = -(-len(re.findall(r"\S+\s*|\s+", completion.text)) // self.words_per_chunk)
            self.first_tokens.append(asyncio.get_running_loop().time() + self.stream_delay)
            await asyncio.sleep(self.stream_delay * chunks)
        return web.json_response(completion.response())

    def _cached_tokens(self, body: dict[str, Any]) -> int:
        """The tokens of the leading messages `body` shares with the request before it (its last one never)."""
        previous = self.requests[-2]["messages"] if len(self.requests) > 1 else []
        shared = 0
        for old, new in zip(previous, body["messages"][:-1], strict=False):
            if old != new:
                break
            shared += _count_tokens(message_text(new))
        return shared

    async def _stream(
        self, request: web.Request, completion: _Completion, body: dict[str, Any], broken: BreakOff | None = None
    ) -> web.StreamResponse:
        # https://platform.openai.com/docs/api-reference/chat-streaming
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await response.prepare(request)
        include_usage = (body.get("stream_options") or {}).get("include_usage", False)
        first_text = True
        start: float | None = None
        sent = 0
        for chunk in completion.chunks(include_usage, self.words_per_chunk):
            delta = chunk["choices"][0]["delta"] if chunk["choices"] else {}
            if broken is not None and delta.get("content") is None and not first_text:
                error = {"error": {"message": broken.message, "type": "server_error", "param": None, "code": None}}
                await response.write(f"data: {json.dumps(error)}\n\n".encode())
                await response.write_eof()
                return response
            if delta.get("content"):
                if self.stream_delay:
                    # On a schedule from the first chunk, so the sleeps' overshoots don't add up.
                    loop = asyncio.get_running_loop()
                    start = start if start is not None else loop.time()
                    sent += 1
                    await asyncio.sleep(max(0.0, start + sent * self.stream_delay - loop.time()))
                if first_text:
                    self.first_tokens.append(asyncio.get_running_loop().time())
                first_text = False
            await response.write(f"data: {json.dumps(chunk)}\n\n".encode())
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response

    async def _transcription(self, request: web.Request) -> web.Response:
        # https://platform.openai.com/docs/api-reference/audio/createTranscription
        form = await request.post()
        upload = form.get("file")
        filename = upload.filename if isinstance(upload, web.FileField) else ""
        self.transcriptions.append((str(form.get("model", "")), filename))
        return web.json_response({"text": self.transcript})

    async def _image(self, request: web.Request) -> web.Response:
        # https://platform.openai.com/docs/api-reference/images/create (JSON) and .../createEdit (multipart)
        references: list[bytes] = []
        if request.content_type == "multipart/form-data":
            form = await request.post()
            fields = {key: value for key, value in form.items() if not isinstance(value, web.FileField)}
            references = [value.file.read() for value in form.values() if isinstance(value, web.FileField)]
        else:
            fields = await request.json()
        self.image_requests.append(
            ImageRequest(str(fields.get("model", "")), str(fields.get("prompt", "")), references)
        )
        if self.moderate_images:
            self.moderate_images -= 1
            error = {"message": "rejected by the safety system", "code": "moderation_blocked"}
            return web.json_response({"error": error}, status=400)
        usage = {
            "input_tokens": 50,
            "output_tokens": 200,
            "total_tokens": 250,
            "input_tokens_details": {"text_tokens": 50, "image_tokens": 0},
        }
        data = [{"b64_json": base64.b64encode(self.image).decode()}]
        return web.json_response({"created": int(time.time()), "data": data, "usage": usage})

    async def _models(self, request: web.Request) -> web.Response:
        model = {"id": MODEL_NAME, "object": "model", "created": 0, "owned_by": "fake"}
        return web.json_response({"object": "list", "data": [model]})

    async def _unknown(self, request: web.Request) -> web.Response:
        route = f"{request.method} {request.path_qs}"
        _log.warning("FakeLLM: unknown route %s", route)
        self.unknown_routes.append(route)
        return _error_response(Error(404, f"Unknown route {route}", retryable=False))


def _error_response(error: Error) -> web.Response:
    # https://platform.openai.com/docs/guides/error-codes
    if error.status == 429:
        kind = "rate_limit_exceeded"
    else:
        kind = "server_error" if error.status >= 500 else "invalid_request_error"
    headers = {"retry-after-ms": "1"} if error.retryable else {"x-should-retry": "false"}
    body = {"error": {"message": error.message, "type": kind, "param": None, "code": None}}
    return web.json_response(body, status=error.status, headers=headers)


def _count_tokens(text: str) -> int:
    """A deterministic stand-in for a tokenizer: one token per whitespace-separated word."""
    return len(text.split())


@dataclass
class _Completion:
    id: str
    model: str
    reply: str | ToolCall | list[ToolCall]
    request: dict[str, Any]
    cached_tokens: int | None = None
    created: int = field(default_factory=lambda: int(time.time()))

    @property
    def text(self) -> str | None:
        return self.reply if isinstance(self.reply, str) else None

    @property
    def tool_calls(self) -> list[dict[str, Any]]:
        calls = [self.reply] if isinstance(self.reply, ToolCall) else self.reply if isinstance(self.reply, list) else []
        return [
            {
                "id": f"call_{self.id}_{index}",
                "type": "function",
                "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
            }
            for index, call in enumerate(calls)
        ]

    @property
    def finish_reason(self) -> str:
        return "tool_calls" if self.tool_calls else "stop"

    def usage(self) -> dict[str, Any]:
        prompt = sum(_count_tokens(message_text(m)) for m in self.request.get("messages", []))
        completion = _count_tokens(self.text or "") + sum(
            _count_tokens(call["function"]["arguments"]) for call in self.tool_calls
        )
        usage: dict[str, Any] = {"prompt_tokens": prompt, "completion_tokens": completion}
        usage["total_tokens"] = prompt + completion
        if self.cached_tokens is not None:
            usage["prompt_tokens_details"] = {"cached_tokens": self.cached_tokens}
        return usage

    def _envelope(self, kind: str) -> dict[str, Any]:
        return {"id": self.id, "object": kind, "created": self.created, "model": self.model}

    def response(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": self.text}
        if self.tool_calls:
            message["tool_calls"] = self.tool_calls
        choice = {"index": 0, "message": message, "finish_reason": self.finish_reason, "logprobs": None}
        return {**self._envelope("chat.completion"), "choices": [choice], "usage": self.usage()}

    def chunks(self, include_usage: bool, words_per_chunk: int = 1) -> Iterator[dict[str, Any]]:
        """The reply as streamed deltas: text `words_per_chunk` words at a time, each tool call whole."""

        def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
            choice = {"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}
            return {**self._envelope("chat.completion.chunk"), "choices": [choice]}

        yield chunk({"role": "assistant", "content": ""})
        words = re.findall(r"\S+\s*|\s+", self.text or "")
        for start in range(0, len(words), words_per_chunk):
            yield chunk({"content": "".join(words[start : start + words_per_chunk])})
        for index, call in enumerate(self.tool_calls):
            yield chunk({"tool_calls": [{"index": index, **call}]})
        yield chunk({}, self.finish_reason)
        if include_usage:
            yield {**self._envelope("chat.completion.chunk"), "choices": [], "usage": self.usage()}
