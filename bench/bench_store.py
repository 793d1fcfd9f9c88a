"""The run store's cost: a team run with the write-ahead log on versus off, and resume time.

    python bench/bench_store.py            # full run
    python bench/bench_store.py --quick    # smaller sizes (used by tests/test_bench.py)

Measures:
  (a) the broadcast benchmark (N roles all answering each other, 5 rounds, an instant
      model) with ``store=None`` and with the SQLite store — each call durable in the
      store's journal at once and the events of one event-loop turn written together
      (``durability="batched"``, the default), and each call committed alone
      (``durability="call"``): CPU time (process time, which a machine loaded by other
      work disturbs far less than wall time) and the overhead; and, to tell the log's own
      work from the writing, the same run with a store that writes nothing (every event
      described, fingerprinted and encoded, then dropped);
  (b) resume: a run of about 1,000 messages is logged, then the same script is run
      again with its run id, so every round is re-executed from the log (no model
      call) — the time that takes, and that no call reached the model;
  (c) a sequential chain: one role asking the model N times in a row (each call waits for the
      one before), the case where the batched default has nothing to batch: CPU per call for
      store off, batched and ``durability="call"``, and how many transactions each committed;
  (d) the store's size: the SQLite file per 1,000 model calls of the broadcast run;
  (e) a long chat's store: a debate of two roles whose every prompt holds the whole history (1 KB
      answers), 50 / 100 / 200 / 400 rounds — the SQLite file with long texts kept in chunks (payload
      format 4, the default) and kept whole (``rolecast.runs.requests.CHUNKED_FROM = None``, as format 3
      did: every prompt a new text, the store growing with the square of the rounds), interleaved.

Each model call's full request (every message, by reference to the store's texts, and the settings;
payload format 3) is recorded by default; (a), (c) and (d) also run with it off
(``rolecast.runs.log.RECORD_REQUESTS = False``: each call keeps only its summary, as before format 3),
interleaved with the others, so that what recording costs is measured on the same machine.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import hashlib
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import rolecast.runs.log as run_log  # noqa: E402
from actions import Action, UserRequirement  # noqa: E402
from environment import Team  # noqa: E402
from memory import Message  # noqa: E402
from rolecast.runs.store import MemoryRunStore, RunEvent  # noqa: E402
from rolecast.testing import FunctionLLM  # noqa: E402
from roles import Role  # noqa: E402


class Broadcast(Action):
    async def run(self, history: list[Message]) -> str:
        return await self._aask(history[-1].content if history else "")


class _NoWrites(MemoryRunStore):
    """A store that encodes each event and keeps nothing: the log's own work, with writing free."""

    def stage(self, events: Sequence[RunEvent]) -> bool:
        return True

    def extend(self, events: Sequence[RunEvent]) -> None:
        for event in events:
            event.text  # noqa: B018  (encoded, as a store writes it)


def _team(n_roles: int, llm: FunctionLLM, store: object, run_id: str | None = None,
          durability: str = "batched") -> Team:
    team = Team(llm=llm, store=store, run_id=run_id, durability=durability)  # type: ignore[arg-type]
    team.hire(Role(name=f"R{i}", actions=[Broadcast()], watch=[UserRequirement, Broadcast]) for i in range(n_roles))
    return team


class _Summaries:
    """Within the block, logs record each call's summary only (no full request: as before format 3)."""

    def __enter__(self) -> None:
        run_log.RECORD_REQUESTS = False

    def __exit__(self, *exc: object) -> None:
        run_log.RECORD_REQUESTS = True


async def _broadcast(n_roles: int, n_rounds: int, store: object, durability: str = "batched") -> float:
    """CPU seconds of the run (process time: a loaded machine shifts it far less than wall time)."""
    team = _team(n_roles, FunctionLLM(lambda messages: "ok"), store, durability=durability)
    team.run_project("start")
    gc.collect()  # the previous run's garbage is collected now, not in the middle of this one
    t0 = time.process_time()
    await team.run(n_round=n_rounds)
    return time.process_time() - t0


def overhead(n_roles: int, n_rounds: int, repeats: int) -> dict[str, float]:
    off, on, per_call, no_writes, summaries = [], [], [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(repeats):  # interleaved, so every side sees the same machine
            off.append(asyncio.run(_broadcast(n_roles, n_rounds, None)))
            on.append(asyncio.run(_broadcast(n_roles, n_rounds, f"{tmp}/runs-{i}.db")))
            with _Summaries():
                summaries.append(asyncio.run(_broadcast(n_roles, n_rounds, f"{tmp}/summaries-{i}.db")))
            per_call.append(asyncio.run(_broadcast(n_roles, n_rounds, f"{tmp}/call-{i}.db", "call")))
            no_writes.append(asyncio.run(_broadcast(n_roles, n_rounds, _NoWrites())))
    off_s, on_s, call_s = statistics.median(off), statistics.median(on), statistics.median(per_call)
    free_s = statistics.median(no_writes)
    calls = n_roles * n_rounds
    summaries_s = statistics.median(summaries)
    return {"roles": n_roles, "rounds": n_rounds, "off_s": off_s, "on_s": on_s, "overhead": on_s / off_s - 1,
            "on_us_per_call": (on_s - off_s) / calls * 1e6,
            "summaries_s": summaries_s, "summaries_us_per_call": (summaries_s - off_s) / calls * 1e6,
            "per_call_s": call_s, "per_call_overhead": call_s / off_s - 1,
            "no_writes_s": free_s, "no_writes_overhead": free_s / off_s - 1}


def resume(n_roles: int, n_rounds: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        db = f"{tmp}/runs.db"
        calls: list[int] = []

        def answer(messages: list[dict[str, str]]) -> str:
            calls.append(1)
            return f"ok {len(calls)}"

        team = _team(n_roles, FunctionLLM(answer), db, "bench")
        t0 = time.perf_counter()
        history = team.run_sync(n_round=n_rounds, idea="start")
        first = time.perf_counter() - t0
        made = len(calls)
        again = _team(n_roles, FunctionLLM(answer), db, "bench")
        t0 = time.perf_counter()
        replayed = again.run_sync(n_round=n_rounds, idea="start")
        resumed = time.perf_counter() - t0
        assert [m.content for m in replayed] == [m.content for m in history]
        return {"messages": len(history), "first_run_s": first, "resume_s": resumed,
                "model_calls_first": made, "model_calls_on_resume": len(calls) - made}


class Chain(Action):
    """N model calls one after the other, each on the answer before it."""

    n: int = 500

    async def run(self, history: list[Message]) -> str:
        text = history[-1].content if history else ""
        for _ in range(self.n):
            text = await self._aask(text[-40:])
        return text


async def _chain(n_calls: int, store: object, durability: str = "batched") -> tuple[float, int]:
    """(CPU seconds, transactions committed) of one role making ``n_calls`` sequential calls."""
    from rolecast.runs.store import SQLiteRunStore

    counted = [0]
    opened = SQLiteRunStore(store) if isinstance(store, str) else store
    if isinstance(opened, SQLiteRunStore):
        extend = opened.extend

        def counting(events: Sequence[RunEvent]) -> None:
            counted[0] += 1
            extend(events)

        opened.extend = counting  # type: ignore[method-assign]
    n = iter(range(10**9))

    async def answer(messages: list[dict[str, str]]) -> str:
        await asyncio.sleep(0)  # a model answers later, in another turn of the event loop (as any real one does)
        return f"ok {next(n)}"

    team = Team(llm=FunctionLLM(answer), store=opened, durability=durability)  # type: ignore[arg-type]
    team.hire([Role(name="Chain", actions=[Chain(n=n_calls)], watch=[UserRequirement])])
    team.run_project("start")
    gc.collect()
    t0 = time.process_time()
    await team.run(n_round=1)
    spent = time.process_time() - t0
    if opened is not None:
        opened.close()
    return spent, counted[0]


def chain(n_calls: int, repeats: int) -> dict[str, float]:
    off, batched, per_call, commits_b, commits_c, summaries = [], [], [], [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(repeats):  # interleaved, so every side sees the same machine
            off.append(asyncio.run(_chain(n_calls, None))[0])
            spent, commits = asyncio.run(_chain(n_calls, f"{tmp}/b-{i}.db"))
            batched.append(spent)
            commits_b.append(commits)
            with _Summaries():
                summaries.append(asyncio.run(_chain(n_calls, f"{tmp}/s-{i}.db"))[0])
            spent, commits = asyncio.run(_chain(n_calls, f"{tmp}/c-{i}.db", "call"))
            per_call.append(spent)
            commits_c.append(commits)
    off_s = statistics.median(off)
    return {"calls": n_calls, "off_us": off_s / n_calls * 1e6,
            "batched_us": (statistics.median(batched) - off_s) / n_calls * 1e6,
            "summaries_us": (statistics.median(summaries) - off_s) / n_calls * 1e6,
            "call_us": (statistics.median(per_call) - off_s) / n_calls * 1e6,
            "batched_commits": statistics.median(commits_b), "call_commits": statistics.median(commits_c)}


def _size(n_roles: int, n_rounds: int) -> tuple[int, int]:
    """(model calls, bytes) of the SQLite store of one broadcast run, its file vacuumed and checkpointed."""
    from rolecast.runs.store import SQLiteRunStore

    with tempfile.TemporaryDirectory() as tmp:
        db = f"{tmp}/runs.db"
        asyncio.run(_broadcast(n_roles, n_rounds, db))
        store = SQLiteRunStore(db)
        calls = sum(r.llm_calls for r in store.runs())
        store.vacuum()
        total = store.size() or 0
        store.close()
    return calls, total


def size(n_roles: int, n_rounds: int) -> dict[str, float]:
    """The SQLite store's bytes per 1,000 model calls (the broadcast run), with full requests and without."""
    calls, total = _size(n_roles, n_rounds)
    with _Summaries():
        _, summaries = _size(n_roles, n_rounds)
    return {"calls": calls, "bytes": total, "mib_per_1000_calls": total / 2**20 / calls * 1000,
            "summaries_bytes": summaries, "summaries_mib_per_1000_calls": summaries / 2**20 / calls * 1000}


class Argue(Action):
    """One debate turn: the whole history in one prompt (as a debate script writes it), a 1 KB answer."""

    async def run(self, history: list[Message]) -> str:
        transcript = "\n\n".join(f"{m.sent_from}: {m.content}" for m in history)
        return await self._aask(f"You are in a debate. The debate so far:\n\n{transcript}\n\nYour turn: "
                                "answer the last speaker in about a kilobyte.")


def _answer(messages: list[dict[str, str]]) -> str:
    """A 1 KB answer of its own per prompt (lines of about 100 characters, as prose is wrapped)."""
    seed = hashlib.sha256(messages[-1]["content"].encode()).hexdigest()
    return "\n".join(f"{seed[i % 48:i % 48 + 16]} " + "an argument that goes on for a while " * 2 for i in range(10))


def _debate_size(rounds: int, chunked: bool) -> int:
    """Bytes of the SQLite store (vacuumed, checkpointed) after a debate of ``rounds`` rounds."""
    import rolecast.runs.requests as requests
    from rolecast.runs.store import SQLiteRunStore

    kept = requests.CHUNKED_FROM
    requests.CHUNKED_FROM = kept if chunked else None
    try:
        with tempfile.TemporaryDirectory() as tmp:
            db = f"{tmp}/runs.db"
            team = Team(llm=FunctionLLM(_answer), store=db)
            team.hire([Role(name="Pro", actions=[Argue()], watch=[UserRequirement, Argue]),
                       Role(name="Con", actions=[Argue()], watch=[Argue])])
            team.run_sync(n_round=rounds, idea="Motion: a store should grow linearly.")
            store = SQLiteRunStore(db)
            store.vacuum()
            total = store.size() or 0
            store.close()
    finally:
        requests.CHUNKED_FROM = kept
    return total


def debate(rounds: Sequence[int]) -> dict[str, dict[str, float]]:
    """(e): the store's MiB after a debate of each length, long texts chunked and whole, interleaved."""
    result = {}
    for n in rounds:
        whole = _debate_size(n, chunked=False)
        chunked = _debate_size(n, chunked=True)
        result[str(n)] = {"whole_mib": whole / 2**20, "chunked_mib": chunked / 2**20}
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--debate-only", action="store_true", help="only (e), the long chat's store")
    args = parser.parse_args()
    if args.debate_only:
        _print_debate(debate((25, 50) if args.quick else (50, 100, 200, 400)))
        return
    roles, repeats = (30, 3) if args.quick else (100, 7)
    result = {
        "overhead": overhead(roles, 5, repeats),
        "resume": resume(10, 10 if args.quick else 100),
        "chain": chain(100 if args.quick else 500, repeats),
        "size": size(roles, 5),
        "debate": debate((25, 50) if args.quick else (50, 100, 200, 400)),
    }
    o, r = result["overhead"], result["resume"]
    print(f"(a) broadcast {o['roles']} roles x {o['rounds']} rounds: store off {o['off_s'] * 1e3:.1f} ms, "
          f"on {o['on_s'] * 1e3:.1f} ms ({o['overhead'] * 100:+.0f} %); "
          f"a commit per call (durability=\"call\") {o['per_call_s'] * 1e3:.1f} ms "
          f"({o['per_call_overhead'] * 100:+.0f} %); the log's own work, writing nothing, "
          f"{o['no_writes_s'] * 1e3:.1f} ms ({o['no_writes_overhead'] * 100:+.0f} %)")
    print(f"    per call above the store off: {o['on_us_per_call']:.0f} µs with full requests, "
          f"{o['summaries_us_per_call']:.0f} µs with summaries only (RECORD_REQUESTS off)")
    print(f"(b) resume of {r['messages']} messages: {r['resume_s']:.3f} s (first run {r['first_run_s']:.3f} s); "
          f"model calls on resume: {r['model_calls_on_resume']} of {r['model_calls_first']}")
    c, z = result["chain"], result["size"]
    print(f"(c) sequential chain of {c['calls']} calls: the log's cost per call: batched {c['batched_us']:.0f} µs "
          f"({c['batched_commits']:.0f} commits), durability=\"call\" {c['call_us']:.0f} µs "
          f"({c['call_commits']:.0f} commits); the run without a store {c['off_us']:.0f} µs per call; "
          f"batched with summaries only {c['summaries_us']:.0f} µs")
    print(f"(d) store size: {z['bytes'] / 2**20:.2f} MiB for {z['calls']:.0f} model calls = "
          f"{z['mib_per_1000_calls']:.2f} MiB per 1,000 calls "
          f"(summaries only: {z['summaries_mib_per_1000_calls']:.2f})")
    _print_debate(result["debate"])
    out = ROOT / "bench" / "results"
    out.mkdir(exist_ok=True)
    (out / "store.json").write_text(json.dumps(result, indent=1))


def _print_debate(sizes: dict[str, dict[str, float]]) -> None:
    rows = ", ".join(f"{n}: {v['whole_mib']:.2f} -> {v['chunked_mib']:.2f}" for n, v in sizes.items())
    print(f"(e) a debate, the whole history in each prompt: the store in MiB by rounds, texts kept whole "
          f"(format 3) -> in chunks (format 4): {rows}")


if __name__ == "__main__":
    main()
