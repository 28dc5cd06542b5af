"""Questions grouped by topic, for the support report: what the documents lack, said once per topic.

Each question is embedded (the local WordLlama model by default: no network, no provider) and taken in turn into the
group whose centre it is most like, if at least TOPIC_SIMILARITY like it, else into a new group: a greedy threshold
clustering, in one pass. A group is titled by its most central question (the one most like the others). Without an
embedding model, or when it fails, each question is its own group.

TOPIC_SIMILARITY was read off WordLlama's cosine similarities of support questions: rewordings of one question
("how do I reset my password?", "I forgot my password, how can I change it?") score 0.5 to 0.8, questions on
different topics below 0.35.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pydantic_ai import Embedder
from pydantic_ai.embeddings import EmbeddingModel

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger("parley.helpdesk")

TOPIC_SIMILARITY = 0.4


class TopicGrouper:
    """Groups questions by topic with `model` (None: one group per question)."""

    def __init__(self, model: EmbeddingModel | None, *, similarity: float = TOPIC_SIMILARITY) -> None:
        # pydantic-ai's embedder over the model, as the knowledge base's vectors use it.
        self.embedder = None if model is None else Embedder(model)
        self.similarity = similarity

    async def group(self, texts: Sequence[str]) -> list[list[int]]:
        """The indices of `texts` by topic: the biggest group first (ties: the earliest), each group's most central
        question first, then the others in order."""
        vectors = await self._vectors(texts)
        if vectors is None:
            return [[index] for index in range(len(texts))]
        groups = greedy_groups(vectors, self.similarity)
        return sorted((central_first(vectors, group) for group in groups), key=lambda group: (-len(group), min(group)))

    async def _vectors(self, texts: Sequence[str]) -> np.ndarray | None:
        if self.embedder is None or not texts:
            return None
        try:
            result = await self.embedder.embed_documents(list(texts))
        # The model's package or weights missing, or its vectors not what it says: the report still lists each
        # question, since grouping is a help, not the report.
        except (ImportError, OSError, ValueError, RuntimeError) as error:
            log.warning("support report: questions not grouped by topic (%s: %s)", type(error).__name__, error)
            return None
        return normalised(result.embeddings)


def greedy_groups(vectors: np.ndarray, similarity: float) -> list[list[int]]:
    """Rows of `vectors` (unit length) in turn into the group whose centre is most like them, if at least
    `similarity`, else into a new group."""
    import numpy as np

    groups: list[list[int]] = []
    sums: list[np.ndarray] = []
    for index, vector in enumerate(vectors):
        best, score = -1, similarity
        for number, total in enumerate(sums):
            norm = float(np.linalg.norm(total))
            cosine = float(total @ vector) / norm if norm else 0.0
            if cosine >= score:
                best, score = number, cosine
        if best < 0:
            groups.append([index])
            sums.append(vector.copy())
        else:
            groups[best].append(index)
            sums[best] += vector
    return groups


def central_first(vectors: np.ndarray, group: list[int]) -> list[int]:
    """`group` with its most central member (the most like the others, in all) first."""
    import numpy as np

    if len(group) < 3:
        return group
    members = vectors[group]
    likeness = (members @ members.T).sum(axis=1)
    centre = group[int(np.argmax(likeness))]
    return [centre, *(index for index in group if index != centre)]


def normalised(embeddings: Sequence[Sequence[float]]) -> np.ndarray:
    """The embeddings as rows of unit length (a zero vector stays zero)."""
    # Imported here: at module level, numpy would join the client's start-up for a command admins seldom run.
    import numpy as np

    vectors = np.asarray(embeddings, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    unit: np.ndarray = np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)
    return unit
