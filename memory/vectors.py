"""Vector indexes: the narrow interface semantic memory stores through, and the in-memory one.

:class:`VectorIndex` is five async methods — ``upsert``, ``query``, ``delete``, ``count``
and ``has`` — over records of an id, a unit vector, the text and JSON metadata, so that
pgvector or Qdrant can implement it as well as :class:`InMemoryVectorIndex` (tests, short
runs) and :class:`~memory.vector_sqlite.SQLiteVectorIndex` (one embedded file, persistent).
Scores are cosine similarities; ``where`` filters by exact metadata values.
"""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from rolecast.errors import VectorIndexError

#: metadata values an index must be able to filter on in every backend
Scalar = str | int | float | bool | None


@dataclass
class IndexItem:
    """One record to store: ``vector`` is normalised by the index."""

    id: str
    vector: Sequence[float]
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class Hit:
    """One search result: the record and its cosine similarity to the query."""

    id: str
    text: str
    score: float
    metadata: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class VectorIndex(Protocol):
    """Where semantic memory keeps its vectors (in-memory, SQLite; pgvector, Qdrant later)."""

    async def upsert(self, items: Sequence[IndexItem]) -> None:
        """Add or replace records by id."""

    async def query(
        self, vector: Sequence[float], k: int, *, min_score: float | None = None,
        where: Mapping[str, Scalar] | None = None,
    ) -> list[Hit]:
        """The ``k`` records most similar to ``vector`` (best first), filtered by ``where``."""

    async def delete(self, ids: Iterable[str]) -> int:
        """Forget records; returns how many there were."""

    async def count(self) -> int:
        """How many records the index holds."""

    async def has(self, ids: Iterable[str]) -> set[str]:
        """Those of ``ids`` that the index holds."""


# ------------------------------------------------------------------ helpers
def unit(vector: Sequence[float], dim: int | None = None) -> list[float]:
    """``vector`` scaled to length 1; a wrong dimension, an empty, zero or non-finite vector is an error."""
    values = [float(x) for x in vector]
    if not values:
        raise VectorIndexError("an empty vector cannot be indexed")
    if dim is not None and len(values) != dim:
        raise VectorIndexError(f"a vector of {len(values)} dimensions does not fit an index of {dim}")
    norm = math.sqrt(sum(x * x for x in values))
    if not math.isfinite(norm) or norm == 0.0:
        raise VectorIndexError("a zero or non-finite vector cannot be indexed")
    return [x / norm for x in values]


def check_where(where: Mapping[str, Scalar] | None) -> dict[str, Scalar]:
    """A metadata filter: keys to exact scalar values (what every backend can express)."""
    if where is None:
        return {}
    if not isinstance(where, Mapping):
        raise VectorIndexError(f"where must be a mapping of metadata keys to values, not {type(where).__name__}")
    for key, value in where.items():
        if not isinstance(key, str) or not isinstance(value, (str, int, float, bool, type(None))):
            raise VectorIndexError(f"where[{key!r}] must be a str, number, bool or None, not {type(value).__name__}")
    return dict(where)


def matches(metadata: Mapping[str, Any], where: Mapping[str, Scalar]) -> bool:
    """Whether ``metadata`` has every key of ``where`` with the same value (``True`` is not ``1``)."""
    for key, value in where.items():
        if key not in metadata:
            return False
        have = metadata[key]
        if have != value or isinstance(have, bool) != isinstance(value, bool):
            return False
    return True


class VectorMatrix:
    """Unit rows and their ids, ranked against a query exactly; the numpy matrix is built once."""

    def __init__(self, ids: Sequence[str], rows: Sequence[Sequence[float]]):
        self.ids = list(ids)
        self.rows = rows
        self._array: Any = None

    def top(self, query: Sequence[float], k: int, allowed: Sequence[bool] | None = None) -> list[tuple[str, float]]:
        """The ``k`` best (id, cosine) against a unit ``query``; numpy when installed, else pure Python."""
        if not self.ids or k <= 0:
            return []
        if importlib.util.find_spec("numpy") is None:
            pairs = [
                (sum(a * b for a, b in zip(row, query, strict=True)), i)
                for i, row in enumerate(self.rows) if allowed is None or allowed[i]
            ]
            pairs.sort(key=lambda t: (-t[0], t[1]))
            return [(self.ids[i], float(s)) for s, i in pairs[:k]]
        import numpy as np

        if self._array is None:
            self._array = np.asarray(self.rows, dtype=np.float32)
        scores = self._array @ np.asarray(query, dtype=np.float32)
        if allowed is not None:
            scores = np.where(np.asarray(allowed, dtype=bool), scores, -np.inf)
        n = min(k, len(self.ids))
        best = np.argpartition(-scores, n - 1)[:n]
        ranked = sorted(((float(scores[i]), int(i)) for i in best), key=lambda t: (-t[0], t[1]))
        return [(self.ids[i], s) for s, i in ranked if s != -math.inf]


# ------------------------------------------------------------------ in memory
class InMemoryVectorIndex:
    """A :class:`VectorIndex` in a dict: exact (brute-force) search, nothing persisted."""

    def __init__(self) -> None:
        self.dim: int | None = None
        self._items: dict[str, IndexItem] = {}
        self._matrix: VectorMatrix | None = None  # rebuilt after a write

    def __repr__(self) -> str:
        return f"InMemoryVectorIndex({len(self._items)} records, dim={self.dim})"

    async def upsert(self, items: Sequence[IndexItem]) -> None:
        """Add or replace records by id (all vectors must have the index's dimension)."""
        dim = self.dim
        prepared = []
        for item in items:
            if not isinstance(item.id, str) or not item.id:
                raise VectorIndexError(f"a record id must be a non-empty string, not {item.id!r}")
            vector = unit(item.vector, dim)
            dim = len(vector)
            prepared.append(IndexItem(item.id, vector, item.text, dict(item.metadata)))
        self.dim = dim
        for item in prepared:
            self._items[item.id] = item
        self._matrix = None

    async def query(
        self, vector: Sequence[float], k: int, *, min_score: float | None = None,
        where: Mapping[str, Scalar] | None = None,
    ) -> list[Hit]:
        """The ``k`` records most similar to ``vector``, best first."""
        where = check_where(where)
        if not self._items:
            return []
        q = unit(vector, self.dim)
        if self._matrix is None:
            self._matrix = VectorMatrix(list(self._items), [i.vector for i in self._items.values()])
        items = self._items
        allowed = [matches(items[i].metadata, where) for i in self._matrix.ids] if where else None
        best = self._matrix.top(q, k, allowed)
        hits = [Hit(i, self._items[i].text, s, dict(self._items[i].metadata)) for i, s in best]
        return [h for h in hits if min_score is None or h.score >= min_score]

    async def delete(self, ids: Iterable[str]) -> int:
        """Forget records by id; returns how many there were."""
        removed = 0
        for i in ids:
            if self._items.pop(i, None) is not None:
                removed += 1
        if removed:
            self._matrix = None
        return removed

    async def count(self) -> int:
        """How many records are held."""
        return len(self._items)

    async def has(self, ids: Iterable[str]) -> set[str]:
        """Those of ``ids`` held."""
        return {i for i in ids if i in self._items}


__all__ = ["Hit", "InMemoryVectorIndex", "IndexItem", "Scalar", "VectorIndex", "VectorMatrix", "check_where",
           "matches", "unit"]
