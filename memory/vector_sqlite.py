"""A persistent vector index in one SQLite file: by default the run store's own file.

Vectors are float32 BLOBs in a plain table keyed by (collection, id); a search reads
the collection's vectors once into memory and ranks them exactly (numpy when
installed). Why not sqlite-vec: it installs from PyPI, but Python builds whose
``sqlite3`` cannot load extensions (pyenv's and python.org's macOS builds among them)
cannot use it, and at agent-memory sizes (thousands of records) an exact scan of a
cached matrix takes well under a millisecond per query (``bench/bench_memory.py``).
Another process writing the same file is noticed (``PRAGMA data_version``) and the
cache re-read.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import struct
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rolecast.errors import ConfigError, VectorIndexError
from rolecast.runs.store import DEFAULT_STORE_PATH

from .vectors import Hit, IndexItem, Scalar, VectorMatrix, check_where, matches, unit

_SCHEMA = """
CREATE TABLE IF NOT EXISTS memory_vectors (
    collection TEXT NOT NULL,
    id         TEXT NOT NULL,
    text       TEXT NOT NULL,
    metadata   TEXT NOT NULL,
    dim        INTEGER NOT NULL,
    vector     BLOB NOT NULL,
    PRIMARY KEY (collection, id)
) WITHOUT ROWID;
"""


def _pack(vector: Sequence[float]) -> bytes:
    return struct.pack(f"<{len(vector)}f", *vector)


def _unpack(blob: bytes, dim: int) -> list[float]:
    if len(blob) != 4 * dim:
        raise VectorIndexError(f"a stored vector has {len(blob)} bytes, not the {4 * dim} of {dim} float32s")
    return list(struct.unpack(f"<{dim}f", blob))


@dataclass
class _Cache:
    version: int
    ids: list[str]
    rows: list[list[float]]
    texts: list[str]
    metadata: list[dict[str, Any]]
    matrix: VectorMatrix | None = None


class SQLiteVectorIndex:
    """A :class:`~memory.vectors.VectorIndex` persisted in a SQLite file (WAL mode).

    ``collection`` separates memories sharing a file (one per role, say). ``path``
    defaults to the run store's file, so a run's log and its memory travel together.
    """

    def __init__(self, path: str | os.PathLike[str] = DEFAULT_STORE_PATH, collection: str = "default"):
        if not collection:
            raise VectorIndexError("a collection name cannot be empty")
        self.path = Path(path)
        self.collection = collection
        try:
            if str(self.path) != ":memory:":
                self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.executescript(_SCHEMA)
        except (sqlite3.Error, OSError) as exc:
            raise ConfigError(f"cannot open the vector index {self.path}: {exc}") from exc
        self._lock = threading.Lock()
        self._cache: _Cache | None = None

    @classmethod
    def beside(cls, store: Any, collection: str = "default") -> SQLiteVectorIndex:
        """The index in the same file as a :class:`~rolecast.runs.store.SQLiteRunStore`."""
        path = getattr(store, "path", None)
        if path is None:
            raise ConfigError(f"{store!r} is not a file-backed run store; give the index a path")
        return cls(path, collection)

    def __repr__(self) -> str:
        return f"SQLiteVectorIndex({str(self.path)!r}, collection={self.collection!r})"

    def close(self) -> None:
        """Close the file."""
        with self._lock:
            self._db.close()

    # ------------------------------------------------------------ blocking parts
    def _dim(self) -> int | None:
        row = self._db.execute(
            "SELECT dim FROM memory_vectors WHERE collection = ? LIMIT 1", (self.collection,)
        ).fetchone()
        return int(row[0]) if row else None

    def _upsert(self, items: Sequence[IndexItem]) -> None:
        with self._lock:
            dim = self._dim()
            rows = []
            for item in items:
                if not isinstance(item.id, str) or not item.id:
                    raise VectorIndexError(f"a record id must be a non-empty string, not {item.id!r}")
                vector = unit(item.vector, dim)
                dim = len(vector)
                try:
                    meta = json.dumps(item.metadata, ensure_ascii=False, allow_nan=False)
                except (TypeError, ValueError) as exc:
                    raise VectorIndexError(f"metadata of {item.id!r} is not JSON: {exc}") from exc
                rows.append((self.collection, item.id, item.text, meta, dim, _pack(vector)))
            with self._db:
                self._db.executemany("INSERT OR REPLACE INTO memory_vectors VALUES (?, ?, ?, ?, ?, ?)", rows)
            self._cache = None

    def _loaded(self) -> _Cache:
        version = int(self._db.execute("PRAGMA data_version").fetchone()[0])
        if self._cache is not None and self._cache.version == version:
            return self._cache
        cache = _Cache(version, [], [], [], [])
        for id_, text, meta, dim, blob in self._db.execute(
            "SELECT id, text, metadata, dim, vector FROM memory_vectors WHERE collection = ?", (self.collection,)
        ):
            cache.ids.append(id_)
            cache.texts.append(text)
            cache.metadata.append(json.loads(meta))
            cache.rows.append(_unpack(blob, int(dim)))
        self._cache = cache
        return cache

    def _query(self, vector: Sequence[float], k: int, min_score: float | None, where: dict[str, Scalar]) -> list[Hit]:
        with self._lock:
            cache = self._loaded()
            if not cache.ids:
                return []
            q = unit(vector, len(cache.rows[0]))
            allowed = [matches(m, where) for m in cache.metadata] if where else None
            if cache.matrix is None:
                cache.matrix = VectorMatrix(cache.ids, cache.rows)
            best = cache.matrix.top(q, k, allowed)
            position = {id_: i for i, id_ in enumerate(cache.ids)} if best else {}
            hits = [Hit(i, cache.texts[position[i]], s, dict(cache.metadata[position[i]])) for i, s in best]
        return [h for h in hits if min_score is None or h.score >= min_score]

    def _delete(self, ids: list[str]) -> int:
        with self._lock, self._db:
            before = self._db.total_changes
            self._db.executemany(
                "DELETE FROM memory_vectors WHERE collection = ? AND id = ?", [(self.collection, i) for i in ids]
            )
            self._cache = None
            return self._db.total_changes - before

    def _count(self) -> int:
        with self._lock:
            row = self._db.execute("SELECT COUNT(*) FROM memory_vectors WHERE collection = ?", (self.collection,))
            return int(row.fetchone()[0])

    def _has(self, ids: list[str]) -> set[str]:
        with self._lock:
            found: set[str] = set()
            for start in range(0, len(ids), 500):  # stay under SQLite's bound-parameter limit
                chunk = ids[start : start + 500]
                marks = ",".join("?" * len(chunk))
                found.update(r[0] for r in self._db.execute(
                    f"SELECT id FROM memory_vectors WHERE collection = ? AND id IN ({marks})",
                    (self.collection, *chunk),
                ))
            return found

    # ------------------------------------------------------------------ the API
    async def upsert(self, items: Sequence[IndexItem]) -> None:
        """Add or replace records by id."""
        await asyncio.to_thread(self._upsert, list(items))

    async def query(
        self, vector: Sequence[float], k: int, *, min_score: float | None = None,
        where: Mapping[str, Scalar] | None = None,
    ) -> list[Hit]:
        """The ``k`` records most similar to ``vector``, best first."""
        return await asyncio.to_thread(self._query, list(vector), k, min_score, check_where(where))

    async def delete(self, ids: Iterable[str]) -> int:
        """Forget records by id; returns how many there were."""
        return await asyncio.to_thread(self._delete, list(ids))

    async def count(self) -> int:
        """How many records this collection holds."""
        return await asyncio.to_thread(self._count)

    async def has(self, ids: Iterable[str]) -> set[str]:
        """Those of ``ids`` this collection holds."""
        return await asyncio.to_thread(self._has, list(ids))


__all__ = ["SQLiteVectorIndex"]
