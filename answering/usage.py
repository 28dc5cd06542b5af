"""Usage accounting: the tokens each model call spent, counted against its server, channel, member and model."""

from __future__ import annotations

import logging
from collections.abc import Callable

from pydantic_ai import RunUsage
from pydantic_ai.images import ImageGenerationResult
from pydantic_ai.models import KnownModelName, Model

from agent import LLMJudge
from archive import TokenUsage
from edge.asking import Question
from prompting.context import Summarizer
from records import MessageRecord
from usage.budget import NO_MEMBER, UsageLedger
from usage.costs import model_label

log = logging.getLogger("parley")


class UsageAccounting:
    """Counts what answers, judgements and summaries spent in the day's ledger (and the archive, when on)."""

    def __init__(
        self,
        ledger: UsageLedger,
        answer_model: Model | KnownModelName | str | None,
        get_channel: Callable[[int], object],
        *,
        judge: LLMJudge | None,
        summarizer: Summarizer | None,
    ) -> None:
        self.ledger = ledger
        # The responder's own model: what an answer is counted against when the reply names none.
        self.answer_model = answer_model
        # The client's cache of channels: a judgement or summary is counted against its channel's server.
        self.get_channel = get_channel
        self.judge = judge
        self.summarizer = summarizer

    def account(
        self, question: Question, usage: RunUsage, channel_id: int | None = None, model: str = ""
    ) -> TokenUsage | None:
        """Count the tokens an answer to `question` used against its server (0: DMs), channel (`channel_id`, the
        thread it was answered in, if not the question's own), asker and model (`provider:model`); the row counted
        (None: it spent none)."""
        channel = question.channel_id if channel_id is None else channel_id
        if usage.cache_read_tokens:
            log.info(
                "answer to message %s: %d of its %d input tokens came from the provider's prompt cache",
                question.id,
                usage.cache_read_tokens,
                usage.input_tokens,
                extra={"message_id": question.id, "cached_input_tokens": usage.cache_read_tokens},
            )
        return self.ledger.record(
            question.guild_id,
            channel,
            question.asker_id,
            usage.input_tokens,
            usage.output_tokens,
            cached_input_tokens=usage.cache_read_tokens,
            model=model or model_label(self.answer_model),
        )

    def account_image(
        self,
        question: Question,
        channel_id: int,
        result: ImageGenerationResult | None,
        *,
        images: int = 1,
        model: str = "",
    ) -> None:
        """Count images made for `question`'s asker (in `channel_id`) against its server: an image model's `result`
        with its tokens and model, or `images` a native tool drew (their tokens are the answer's, `model`'s)."""
        usage = result.usage if result is not None else None
        self.ledger.record(
            question.guild_id,
            channel_id,
            question.asker_id,
            usage.input_tokens if usage is not None else 0,
            usage.output_tokens if usage is not None else 0,
            cached_input_tokens=usage.cache_read_tokens if usage is not None else 0,
            model=f"{result.provider_name}:{result.model_name}" if result is not None else model,
            kind="image",
            images=images,
        )

    def account_judgement(self, record: MessageRecord, usage: RunUsage) -> None:
        """Count the tokens the judge spent on a message against its server, channel and author."""
        guild = getattr(self.get_channel(record.channel_id), "guild", None)
        if guild is not None and self.judge is not None:
            self.ledger.record(
                guild.id,
                record.channel_id,
                record.author_id,
                usage.input_tokens,
                usage.output_tokens,
                cached_input_tokens=usage.cache_read_tokens,
                model=model_label(self.judge.agent.model),
                kind="judge",
            )

    def account_summary(self, channel_id: int, usage: RunUsage) -> None:
        """Count the tokens of a summary written for a channel against its server (0: DMs) and channel, no member."""
        guild = getattr(self.get_channel(channel_id), "guild", None)
        self.ledger.record(
            guild.id if guild is not None else 0,
            channel_id,
            NO_MEMBER,
            usage.input_tokens,
            usage.output_tokens,
            cached_input_tokens=usage.cache_read_tokens,
            model=model_label(self.summarizer.agent.model) if self.summarizer is not None else "",
            kind="summary",
        )
