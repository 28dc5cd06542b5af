"""The images an answer may make: where its posts go takes files (and how large), and the asker's daily count.

`AnswerImages` is the answer's `tools.deps.ImageGrant`: the image tool claims each image through the one admission
path (`Gatekeeper.image_refusal`, counted in admission/allowances.py) before any image model is called, and the
image is counted in the day's usage (its tokens, its model, one image) before the claim ends, so the count never
dips between the two.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from pydantic_ai.images import ImageGenerationResult

from answering.usage import UsageAccounting
from edge.asking import Question


class ImageAdmission(Protocol):
    """The daily image limits, as admission/gatekeeper.py keeps them."""

    async def image_refusal(self, guild_id: int, member_id: int) -> str | None: ...

    def image_done(self, guild_id: int, member_id: int) -> None: ...

    async def images_left(self, guild_id: int, member_id: int) -> bool: ...


@dataclass(frozen=True)
class AnswerImages:
    """A `tools.deps.ImageGrant` for the answer to `question`, posting into `channel_id`."""

    question: Question
    channel_id: int
    upload_limit: int
    admission: ImageAdmission
    accounting: UsageAccounting

    async def claim(self) -> str | None:
        return await self.admission.image_refusal(self.question.guild_id, self.question.asker_id)

    def made(self, result: ImageGenerationResult | None) -> None:
        try:
            if result is not None:
                self.accounting.account_image(self.question, self.channel_id, result)
        finally:
            self.admission.image_done(self.question.guild_id, self.question.asker_id)

    async def any_left(self) -> bool:
        return await self.admission.images_left(self.question.guild_id, self.question.asker_id)
