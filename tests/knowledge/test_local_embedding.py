"""The default embedding model: WordLlama's shipped vectors, read from the installed package with no network."""

from __future__ import annotations

import logging
import math
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic_ai import Embedder

from knowledge.local_embedding import LOCAL_MODEL_NAME, WordLlamaEmbeddingModel, package_folder
from tests.support.embedding_support import cosine


async def test_a_reworded_sentence_is_nearer_than_an_unrelated_one() -> None:
    embedder = Embedder(WordLlamaEmbeddingModel())
    result = await embedder.embed_documents(
        [
            "Restore a specific file from the trash",
            "I binned a document by mistake, how do I get it back out of the recycle bin?",
            "Capture the network traffic from or to a host",
        ]
    )
    restore, reworded, unrelated = result.embeddings
    assert len(restore) == 256 and math.isclose(cosine(restore, restore), 1.0, rel_tol=1e-5)
    assert cosine(restore, reworded) > cosine(restore, unrelated) + 0.2
    assert result.usage.input_tokens > 0


async def test_an_empty_text_is_the_zero_vector_far_from_everything() -> None:
    result = await Embedder(WordLlamaEmbeddingModel()).embed_documents(["", "Restore a file"])
    assert result.embeddings[0] == [0.0] * 256


def test_a_folder_without_the_weights_cannot_be_loaded(tmp_path) -> None:
    with pytest.raises(FileNotFoundError):
        WordLlamaEmbeddingModel(tmp_path).load()
    assert (package_folder() / "weights").is_dir() and LOCAL_MODEL_NAME.startswith("local:")


@pytest.mark.slow
def test_loading_the_model_leaves_the_logging_as_it_was() -> None:
    """wordllama's own import sets the root logger to INFO; ours never imports it. In a fresh interpreter, since
    this one's logging is the test run's."""
    code = (
        "import logging; from knowledge.local_embedding import WordLlamaEmbeddingModel; "
        "WordLlamaEmbeddingModel().load(); import sys; "
        "print(logging.getLogger().level, logging.getLogger().handlers, 'wordllama' in sys.modules)"
    )
    root = str(Path(__file__).resolve().parents[2])
    shown = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, cwd=root, env={"PYTHONPATH": root}
    )
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.split() == [str(logging.WARNING), "[]", "False"]
