"""Semantic memory: texts saved with their embeddings, found again by meaning.

::

    memory = SemanticMemory()                                  # local embedder, in-memory index
    await memory.save("The staging DB password is in the team vault", metadata={"topic": "ops"})
    for record in await memory.search("where are the test database credentials?", k=3):
        print(f"{record.score:.2f} {record.text}")

The embedder is any model on the seam that embeds (:meth:`~rolecast.llm.base.BaseLLM.embed`,
metered like every call): by default the local one of :func:`rolecast.llm.embedders.default_embedder`.
The index is any :class:`~memory.vectors.VectorIndex`: :class:`~memory.vectors.InMemoryVectorIndex`
by default, :class:`~memory.vector_sqlite.SQLiteVectorIndex` to keep it in a file.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rolecast.errors import UsageError
from rolecast.llm.base import BaseLLM
from rolecast.llm.embedders import default_embedder

from .vectors import IndexItem, InMemoryVectorIndex, Scalar, VectorIndex


@dataclass
class MemoryRecord:
    """A remembered text found by a search: its ``score`` is the cosine similarity to the query."""

    text: str
    score: float
    metadata: dict[str, Any] = field(default_factory=dict)
    id: str = ""


class SemanticMemory:
    """Save texts, search them by meaning: ``save``, ``save_many``, ``search``, ``remove``, ``count``.

    ``embedder`` is a model that embeds (default: the local embedder, made on first use);
    ``index`` stores the vectors (default: in memory). Texts are embedded in batches of
    ``batch_size``.
    """

    def __init__(self, embedder: BaseLLM | None = None, index: VectorIndex | None = None, *, batch_size: int = 64):
        if embedder is not None and not embedder.supports_embeddings:
            raise UsageError(f"{embedder!r} cannot embed text: give SemanticMemory an embedding model")
        if batch_size < 1:
            raise UsageError("batch_size must be at least 1")
        self._embedder = embedder
        self.index: VectorIndex = index if index is not None else InMemoryVectorIndex()
        self.batch_size = batch_size

    def __repr__(self) -> str:
        return f"SemanticMemory(embedder={self._embedder!r}, index={self.index!r})"

    @property
    def embedder(self) -> BaseLLM:
        """The model that embeds saved texts and queries."""
        if self._embedder is None:
            self._embedder = default_embedder()
        return self._embedder

    async def save(self, text: str, id: str | None = None, metadata: Mapping[str, Any] | None = None) -> str:
        """Remember ``text`` (replacing the record with the same ``id``); returns its id."""
        ids = await self.save_many([text], ids=[id], metadata=[metadata])
        return ids[0]

    async def save_many(
        self,
        texts: Sequence[str],
        *,
        ids: Sequence[str | None] | None = None,
        metadata: Sequence[Mapping[str, Any] | None] | None = None,
    ) -> list[str]:
        """Remember several texts with one embedding call per batch; returns their ids."""
        if isinstance(texts, str):
            raise UsageError("save_many() takes a list of texts, not one string")
        n = len(texts)
        id_list = list(ids) if ids is not None else [None] * n
        meta_list = list(metadata) if metadata is not None else [None] * n
        if len(id_list) != n or len(meta_list) != n:
            raise UsageError(f"save_many(): {n} texts but {len(id_list)} ids and {len(meta_list)} metadata")
        for text in texts:
            if not isinstance(text, str) or not text.strip():
                raise UsageError(f"a memory must be a non-empty text, not {text!r}")
        out = [i if i is not None else uuid.uuid4().hex for i in id_list]
        for start in range(0, n, self.batch_size):
            chunk = list(texts[start : start + self.batch_size])
            vectors = await self.embedder.embed(chunk, purpose="document")
            await self.index.upsert([
                IndexItem(out[start + j], vectors[j], chunk[j], dict(meta_list[start + j] or {}))
                for j in range(len(chunk))
            ])
        return out

    async def search(
        self,
        query: str,
        k: int = 5,
        min_score: float | None = None,
        where: Mapping[str, Scalar] | None = None,
    ) -> list[MemoryRecord]:
        """The ``k`` memories closest in meaning to ``query``, best first.

        ``min_score`` drops weaker matches (cosine; what counts as close depends on the
        embedder); ``where`` keeps records whose metadata has these exact values.
        """
        if not isinstance(query, str) or not query.strip():
            raise UsageError(f"a search needs a non-empty query text, not {query!r}")
        if k < 1:
            raise UsageError("k must be at least 1")
        if await self.index.count() == 0:
            return []  # nothing to find: no embedding call to pay for
        vector = (await self.embedder.embed([query], purpose="query"))[0]
        hits = await self.index.query(vector, k, min_score=min_score, where=where)
        return [MemoryRecord(h.text, h.score, h.metadata, h.id) for h in hits]

    async def remove(self, ids: str | Iterable[str]) -> int:
        """Forget memories by id; returns how many were held."""
        return await self.index.delete([ids] if isinstance(ids, str) else list(ids))

    async def count(self) -> int:
        """How many memories are held."""
        return await self.index.count()


__all__ = ["MemoryRecord", "SemanticMemory"]
