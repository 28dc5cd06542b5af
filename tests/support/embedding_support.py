"""A deterministic embedding model for the tests and the knowledge bench: no network, no model weights.

`HashingEmbeddingModel` hashes each text's words and the character trigrams of its words into a fixed number of
dimensions (the "hashing trick", each feature with a sign from its hash so that collisions cancel on average) and
normalises the result. Texts sharing words or word pieces ("install", "installing", "installation") get close
vectors, so a recall measured with it means something: a paraphrase with other word forms is found where a
full-text search for whole words misses it. It knows no synonyms, which keeps it honest.

`fail_with` makes every call raise that exception, as a provider that is down or rate limiting does.
"""

from __future__ import annotations

import math
import re
import zlib
from collections.abc import Sequence

from pydantic_ai.embeddings import EmbeddingModel, EmbeddingResult, EmbeddingSettings
from pydantic_ai.embeddings.result import EmbedInputType
from pydantic_ai.usage import RequestUsage

_WORD = re.compile(r"\w+")
# A word counts more than one of its trigrams: sharing a whole word is stronger evidence than sharing a piece.
_WORD_WEIGHT = 2.0
_TRIGRAM_WEIGHT = 1.0


class HashingEmbeddingModel(EmbeddingModel):
    """Word and character-trigram hashing into `dimensions` floats, L2-normalised; deterministic across processes."""

    def __init__(self, dimensions: int = 256, *, name: str = "hashing") -> None:
        super().__init__()
        if dimensions < 8:
            raise ValueError("dimensions must be at least 8")
        self.dimensions = dimensions
        self.name = name
        self.fail_with: BaseException | None = None
        # How many texts each call embedded, in order: what a test checks batching and retries with.
        self.calls: list[int] = []
        # Feature -> (dimension, sign): hashing each distinct feature once keeps a 10,000-section bench fast.
        self._slots: dict[str, tuple[int, float]] = {}

    @property
    def model_name(self) -> str:
        return self.name

    @property
    def system(self) -> str:
        return "test"

    async def embed(
        self, inputs: str | Sequence[str], *, input_type: EmbedInputType, settings: EmbeddingSettings | None = None
    ) -> EmbeddingResult:
        texts, _ = self.prepare_embed(inputs, settings)
        if self.fail_with is not None:
            raise self.fail_with
        self.calls.append(len(texts))
        return EmbeddingResult(
            [self.vector(text) for text in texts],
            inputs=texts,
            input_type=input_type,
            model_name=self.model_name,
            provider_name=self.system,
            usage=RequestUsage(input_tokens=sum(len(text.split()) for text in texts)),
        )

    def vector(self, text: str) -> list[float]:
        """The embedding of one text."""
        vector = [0.0] * self.dimensions
        for word in _WORD.findall(text.lower()):
            self._add(vector, f"w:{word}", _WORD_WEIGHT)
            padded = f"<{word}>"
            for start in range(len(padded) - 2):
                self._add(vector, padded[start : start + 3], _TRIGRAM_WEIGHT)
        norm = math.sqrt(sum(value * value for value in vector))
        # An empty text (no word at all) has no direction: the zero vector, which is far from everything.
        return [value / norm for value in vector] if norm else vector

    def _add(self, vector: list[float], feature: str, weight: float) -> None:
        slot = self._slots.get(feature)
        if slot is None:
            # crc32, not hash(): Python salts str hashes per process, and the bench compares runs.
            digest = zlib.crc32(feature.encode())
            slot = self._slots[feature] = (digest % self.dimensions, 1.0 if digest & (1 << 31) else -1.0)
        dimension, sign = slot
        vector[dimension] += sign * weight


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine similarity of two normalised vectors (their dot product)."""
    return sum(x * y for x, y in zip(a, b, strict=True))
