"""The knowledge base's embedding model when EMBEDDING_MODEL is unset: WordLlama's word vectors, on the CPU.

WordLlama (MIT, https://github.com/dleemiller/WordLlama) ships in its wheel a 256-dimension token embedding matrix
(safetensors) and its tokenizer (a Hugging Face `tokenizers` file); a text's vector is the mean of its tokens'
rows, normalised. That is all its `embed` does, so this reads the two files from the installed package's folder
itself: `WordLlama.load()` reaches for the network unless told not to, and importing the package sets the root
logger to INFO. The folder is found without importing the package. No network, no provider key, no cost.

Embedding runs in a worker thread, one batch at a time per model (the caller bounds it with its timeout).
"""

from __future__ import annotations

import asyncio
import functools
import importlib.util
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic_ai.embeddings import EmbeddingModel, EmbeddingResult, EmbeddingSettings
from pydantic_ai.embeddings.result import EmbedInputType
from pydantic_ai.usage import RequestUsage

if TYPE_CHECKING:
    import numpy as np
    from tokenizers import Tokenizer

__all__ = ["LOCAL_MODEL_NAME", "WordLlamaEmbeddingModel"]

# The name the archive keeps beside the vectors: a later EMBEDDING_MODEL re-embeds what this one made.
LOCAL_MODEL_NAME = "local:wordllama-l2-supercat-256"
_WEIGHTS = "weights/l2_supercat_256.safetensors"
_TOKENIZER = "tokenizers/l2_supercat_tokenizer_config.json"
_TENSOR = "embedding.weight"


@dataclass(frozen=True, slots=True)
class _Vocabulary:
    matrix: np.ndarray
    tokenizer: Tokenizer

    def vectors(self, texts: Sequence[str]) -> tuple[list[list[float]], int]:
        """Each text's mean token vector, L2-normalised (an empty text: zeros), and the tokens read."""
        import numpy as np

        encodings = self.tokenizer.encode_batch(list(texts), add_special_tokens=False)
        out = np.zeros((len(encodings), self.matrix.shape[1]), dtype=np.float32)
        for row, encoding in enumerate(encodings):
            if encoding.ids:
                ids = np.clip(np.asarray(encoding.ids, dtype=np.int64), 0, self.matrix.shape[0] - 1)
                out[row] = self.matrix[ids].mean(axis=0)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        out = np.divide(out, norms, out=out, where=norms > 0)
        return out.tolist(), sum(len(encoding.ids) for encoding in encodings)


def package_folder() -> Path:
    """The installed wordllama package's folder, found without importing it (its import configures logging)."""
    spec = importlib.util.find_spec("wordllama")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("the wordllama package is not installed (pip install -r requirements.txt)")
    return Path(next(iter(spec.submodule_search_locations)))


@functools.cache
def _load(folder: Path) -> _Vocabulary:
    # Imported here, in the worker thread that loads the weights: at module level they add 45 ms to start-up.
    import numpy as np
    from safetensors.numpy import load_file
    from tokenizers import Tokenizer

    matrix = load_file(str(folder / _WEIGHTS))[_TENSOR].astype(np.float32)
    return _Vocabulary(matrix, Tokenizer.from_file(str(folder / _TOKENIZER)))


class WordLlamaEmbeddingModel(EmbeddingModel):
    """pydantic-ai's `EmbeddingModel` over WordLlama's shipped weights (`folder`: the package's, by default)."""

    def __init__(self, folder: Path | None = None) -> None:
        super().__init__()
        self._folder = folder
        # One batch in the worker thread at a time: a burst of searches queues rather than filling the pool.
        self._busy: asyncio.Lock | None = None

    @property
    def model_name(self) -> str:
        return LOCAL_MODEL_NAME.partition(":")[2]

    @property
    def system(self) -> str:
        return "local"

    def load(self) -> None:
        """Read the weights now (once per process; they are read on first use otherwise). Raises OSError or
        ImportError when the package or its files are missing."""
        _load(self._folder or package_folder())

    def vectors(self, texts: Sequence[str]) -> tuple[list[list[float]], int]:
        """The texts' vectors and the tokens read, in this thread."""
        return _load(self._folder or package_folder()).vectors(texts)

    async def embed(
        self, inputs: str | Sequence[str], *, input_type: EmbedInputType, settings: EmbeddingSettings | None = None
    ) -> EmbeddingResult:
        texts, _ = self.prepare_embed(inputs, settings)
        if self._busy is None:
            self._busy = asyncio.Lock()
        async with self._busy:
            vectors, tokens = await asyncio.to_thread(self.vectors, texts)
        return EmbeddingResult(
            vectors,
            inputs=texts,
            input_type=input_type,
            model_name=self.model_name,
            provider_name=self.system,
            usage=RequestUsage(input_tokens=tokens),
        )
