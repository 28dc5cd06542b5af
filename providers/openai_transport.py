"""The OpenAI SDK client Parley talks to an LLM_BASE_URL server through: the same requests, without the SDK's
request transform on the event loop."""

from functools import cached_property
from typing import Any

from openai import AsyncOpenAI, Omit, omit
from openai.resources.chat import AsyncChat, AsyncCompletions


class _UntransformedCompletions(AsyncCompletions):
    """Chat completions whose `messages` and `tools` go out as given, without the SDK's request transform.

    The openai SDK walks the whole request body against its params' TypedDict unions before every
    request, with the event loop blocked: about 0.25 ms per message of history on a small VM, so
    5 ms at 20 messages and growing with the conversation. For what pydantic-ai sends (plain
    wire-format dicts) the walk changes nothing. `extra_body` is merged into the JSON body after the
    transform, so moving the two bulky fields there sends the same bytes without the walk
    (tests/test_agent.py pins that). The same generator's Anthropic SDK has the issue on record:
    https://github.com/anthropics/anthropic-sdk-python/issues/1195
    """

    async def create(self, *, messages: Any, tools: Any = omit, extra_body: Any = None, **params: Any) -> Any:
        untransformed = {"messages": list(messages)}
        if not isinstance(tools, Omit):
            untransformed["tools"] = list(tools)
            params["tools"] = []
        return await super().create(messages=[], extra_body={**untransformed, **(extra_body or {})}, **params)


class _UntransformedChat(AsyncChat):
    @cached_property
    def completions(self) -> AsyncCompletions:
        return _UntransformedCompletions(self._client)


class UntransformedOpenAI(AsyncOpenAI):
    """An `AsyncOpenAI` client whose chat completions skip the SDK's request transform (see above)."""

    @cached_property
    def chat(self) -> AsyncChat:
        return _UntransformedChat(self)
