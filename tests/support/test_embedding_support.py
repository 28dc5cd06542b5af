"""The deterministic test embedder: similar texts close, unrelated ones far, the same vectors in every process."""

from __future__ import annotations

import math

import pytest
from pydantic_ai import Embedder

from tests.support.embedding_support import HashingEmbeddingModel, cosine


async def test_word_forms_are_closer_than_unrelated_text() -> None:
    model = HashingEmbeddingModel()
    result = await Embedder(model).embed_documents(
        ["How do I install the bot with Docker?", "Installing Parley in a docker container", "Refund policy for orders"]
    )
    question, install, refunds = result.embeddings
    assert cosine(question, install) > 0.3
    assert cosine(question, install) > 2 * abs(cosine(question, refunds))
    assert result.input_type == "document"
    assert model.calls == [3]


async def test_vectors_are_normalised_and_the_same_from_a_new_model() -> None:
    first = HashingEmbeddingModel(64).vector("The same words, the same vector")
    again = HashingEmbeddingModel(64).vector("The same words, the same vector")
    assert first == again
    assert len(first) == 64
    assert math.isclose(sum(value * value for value in first), 1.0)
    assert HashingEmbeddingModel(64).vector("   ") == [0.0] * 64


async def test_fail_with_raises_as_a_provider_that_is_down() -> None:
    model = HashingEmbeddingModel()
    model.fail_with = ConnectionError("provider down")
    with pytest.raises(ConnectionError, match="provider down"):
        await Embedder(model).embed_query("anything")
    assert model.calls == []
