"""The model agents' lifetime: entered when the client logs in, told who the bot is, closed with the client."""

from __future__ import annotations

import contextlib

import discord
from pydantic_ai.models import Model

from agent import LLMJudge, Responder
from answering.models import ProfileModels
from answering.usage import UsageAccounting
from catchup.writing import CatchUpWriter, build_catchup_agent
from moderation.reading import CaseReader, build_reading_agent
from prompting.context import Summarizer
from providers.models import close_model


class Agents:
    """The responder, the judge and the summarizer (both optional), the catch-up writer, the moderation cases'
    reader, and the models profiles name."""

    def __init__(
        self,
        responder: Responder,
        judge: LLMJudge | None,
        summarizer: Summarizer | None,
        models: ProfileModels,
    ) -> None:
        self.responder = responder
        self.judge = judge
        self.summarizer = summarizer
        self.models = models
        # Catch-ups are summaries: they run on the summaries' model when there is one, else on the answers'.
        summary_model = summarizer.agent.model if summarizer is not None else responder.model
        self.catchup = CatchUpWriter(build_catchup_agent(summary_model)) if isinstance(summary_model, Model) else None
        # Reading a reported message is a short summary too.
        self.cases = CaseReader(build_reading_agent(summary_model)) if isinstance(summary_model, Model) else None
        # The model provider's HTTP client is closed only by leaving the agent's context.
        self._resources = contextlib.AsyncExitStack()

    async def start(self, user: discord.ClientUser, accounting: UsageAccounting) -> None:
        await self._resources.enter_async_context(self.responder.agent)
        if self.judge is not None:
            await self._resources.enter_async_context(self.judge.agent)
            # The judge tells the model whom the bot last answered, so it must know who the bot is.
            self.judge.bot_user_id = user.id
            self.judge.bot_name = user.display_name
            self.judge.on_usage = accounting.account_judgement
            self.judge.model_for = self.models.judge_model_for
        if self.summarizer is not None:
            await self._resources.enter_async_context(self.summarizer.agent)
            self.summarizer.on_usage = accounting.account_summary

    async def close(self) -> None:
        await self._resources.aclose()
        await close_model(self.responder.model)
        if self.judge is not None:
            await close_model(self.judge.agent.model)
        if self.summarizer is not None:
            await close_model(self.summarizer.agent.model)
        await self.models.close()
