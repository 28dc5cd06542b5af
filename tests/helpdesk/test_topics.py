"""helpdesk/topics.py: the support report's questions grouped by topic, with the local WordLlama model (no network),
each group titled by its most central question; one group per question without a model or when it fails."""

from __future__ import annotations

import numpy as np

from helpdesk.topics import TopicGrouper, central_first, greedy_groups
from knowledge.local_embedding import WordLlamaEmbeddingModel
from tests.support.embedding_support import HashingEmbeddingModel

QUESTIONS = [
    "How do I reset my password?",  # 0
    "How do I install the bot on Windows?",  # 1
    "I forgot my password, how can I change it?",  # 2
    "Where are the logs stored?",  # 3
    "password reset link doesn't work",  # 4
    "installation fails on windows 11",  # 5
    "how to see the log files",  # 6
    "What is the refund policy?",  # 7
]


async def test_reworded_questions_fall_in_one_group_titled_by_its_most_central() -> None:
    groups = await TopicGrouper(WordLlamaEmbeddingModel()).group(QUESTIONS)

    assert groups == [[0, 2, 4], [1, 5], [3, 6], [7]]


async def test_without_a_model_each_question_is_its_own_group() -> None:
    assert await TopicGrouper(None).group(QUESTIONS[:3]) == [[0], [1], [2]]
    assert await TopicGrouper(WordLlamaEmbeddingModel()).group([]) == []


async def test_a_failing_model_leaves_each_question_its_own_group() -> None:
    model = HashingEmbeddingModel()
    model.fail_with = OSError("weights missing")
    assert await TopicGrouper(model).group(QUESTIONS[:3]) == [[0], [1], [2]]


def test_a_question_joins_the_group_whose_centre_is_nearest_above_the_threshold() -> None:
    vectors = np.array([[1, 0, 0], [0, 1, 0], [0.6, 0.8, 0], [0.9, 0.1, 0.42], [0, 0, 1]], dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    # 2 is nearer 1 (0.8) than 0 (0.6); 3 near 0 (0.9); 4 near nothing.
    assert greedy_groups(vectors, 0.7) == [[0, 3], [1, 2], [4]]
    assert greedy_groups(vectors, 0.99) == [[0], [1], [2], [3], [4]]


def test_the_most_central_member_leads_its_group() -> None:
    vectors = np.array([[1, 0], [0.8, 0.6], [0.6, 0.8]], dtype=np.float32)
    assert central_first(vectors, [0, 1, 2]) == [1, 0, 2]
