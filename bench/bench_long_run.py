"""Benchmark: a long two-role debate on the embedded model, with and without compaction.

    python bench/bench_long_run.py                          # 60 rounds, n_ctx 8192, both sides
    python bench/bench_long_run.py --n-round 24 --n-ctx 1024 --compaction off --check
    python bench/bench_long_run.py --by-size                # seconds per call by prompt size (issue 44)
    python bench/bench_long_run.py --by-size --kv-windows 1 # ... with the KV buffer of one window (before)

Two debaters in ``react`` mode, two actions each (so the numeric state prompt carries the
conversation and each action gets the history), on SmolLM2-135M-Instruct via
``run_sync(n_round=...)``. Before rolecast fitted prompts to the window, this run died after
about 8 of 24 rounds on ``n_ctx: 1024`` ("request exceeds the available context size").

For each side it reports the rounds run, the model calls (and the compaction's summary calls),
the largest logged prompt and call (prompt + answer tokens, as the engine counted them), the
earlier messages prompts left out, and the time per round over the run (the mean of each block of
10 rounds): flat once the history fills the window, not growing with it. ``--check`` exits 1
when a side ran fewer rounds than asked or logged a call over the window. Writes ``bench/results/long_run.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from actions import Action, UserRequirement  # noqa: E402
from environment import Team  # noqa: E402
from memory import Message  # noqa: E402
from rolecast.core.settings import LLMSettings  # noqa: E402
from rolecast.runs.events import HISTORY_FITTED, LLM_CALL, ROUND_FINISHED, RUN_STARTED  # noqa: E402
from rolecast.runs.store import SQLiteRunStore  # noqa: E402
from roles import Role  # noqa: E402
from roles.fitting import COMPACTED, Compaction  # noqa: E402

TOPIC = "Should cities ban cars from their centres?"


class Argue(Action):
    name: str = "Argue"
    desc: str = "make a new argument for your side"

    async def run(self, history: list[Message]) -> str:
        debate = "\n".join(str(m) for m in history)
        return await self._aask(f"## DEBATE SO FAR\n{debate}\n## YOUR TURN\n{self.desc.capitalize()}, in 60 words:")


class Rebut(Argue):
    name: str = "Rebut"
    desc: str = "answer your opponent's latest argument"


class Debater(Role):
    """A react-mode debater that never leaves the debate: when the state prompt's answer is -1 (the
    135M model's "done", which its batching on a busy machine makes more or less likely), it rebuts.
    The run measures the window over a long run, not when a small model decides to stop."""

    async def _think(self) -> bool:
        if await super()._think():
            return True
        self._set_state(len(self.actions) - 1)
        return True


def debater(name: str, side: str) -> Role:
    return Debater(name=name, profile="Debater", goal=f"argue {side} on: {TOPIC}", actions=[Argue(), Rebut()],
                   watch=[UserRequirement, Argue, Rebut], react_mode="react", max_react_loop=1)


def one_side(n_round: int, n_ctx: int, compaction: Compaction | None, max_tokens: int, store_path: Path,
             llm: Any = None) -> dict[str, Any]:
    """One run of the debate (on ``llm``, else the embedded model with ``n_ctx``) and its figures."""
    if llm is None:
        from rolecast.llm.local.provider import LocalLLM

        llm = LocalLLM(n_ctx=n_ctx, settings=LLMSettings(max_tokens=max_tokens) if max_tokens else None)
    store = SQLiteRunStore(store_path)
    team = Team(llm=llm, roles=[debater("Ada", "for"), debater("Ben", "against")], store=store,
                compaction=compaction)
    team.invest(1.0)
    # the process's CPU seconds (the engine's threads included) at each round's end: on a shared machine
    # a round's wall time follows the load, its CPU time what the round asked of the model
    cpu = [time.process_time()]
    team.run_log.subscribe(lambda event: cpu.append(time.process_time()) if event.kind == ROUND_FINISHED else None)
    started = time.perf_counter()
    team.run_sync(n_round=n_round, idea=TOPIC, send_to="Ada")
    wall = time.perf_counter() - started
    found = figures(list(store.events(team.run_id)))
    per_round = [b - a for a, b in itertools.pairwise(cpu)]
    return {"compaction": compaction.share if compaction else False, "n_ctx": llm.context_window,
            "max_tokens": int(llm._effective(llm.settings, None).max_tokens or 0), **found,
            "round_cpu_seconds_by_block": _blocks(per_round, found["rounds_per_block"]), "seconds": round(wall, 1)}


def _blocks(values: list[float], size: int) -> list[float]:
    return [round(statistics.mean(values[i:i + size]), 2) for i in range(0, len(values), size)]


def figures(events: list[Any]) -> dict[str, Any]:
    """A run's figures from its log: rounds, calls (and the compaction's summary calls), the largest
    prompt and call in the engine's tokens, the prompts that left messages out, and per block of 10
    rounds (a quarter of the run when it has fewer than 20) the mean seconds a round, the mean prompt
    of its calls (flat once the history fills the window) and the tokens the model wrote a round."""
    calls = [e for e in events if e.kind == LLM_CALL and "response" in e.data]
    usage = [c.data["response"].get("usage") or {} for c in calls]
    prompts = [int(u.get("prompt_tokens", 0)) for u in usage]
    sizes = [p + int(u.get("completion_tokens", 0)) for p, u in zip(prompts, usage, strict=True)]
    rounds = [e for e in events if e.kind == ROUND_FINISHED]
    start_ts = next(e.ts for e in events if e.kind == RUN_STARTED)
    per_round = [b - a for a, b in itertools.pairwise([start_ts, *(e.ts for e in rounds)])]
    block = 10 if len(per_round) >= 20 else max(1, len(per_round) // 4)
    by_round: dict[int, list[int]] = {}
    for call, tokens in zip(calls, prompts, strict=True):
        by_round.setdefault(call.round, []).append(tokens)
    answers: dict[int, int] = {}
    for call, u in zip(calls, usage, strict=True):
        answers[call.round] = answers.get(call.round, 0) + int(u.get("completion_tokens", 0))
    round_prompts = [statistics.mean(by_round.get(r, [0])) for r in range(1, len(rounds) + 1)]
    fitted = [e for e in events if e.kind == HISTORY_FITTED]
    return {
        "rounds": len(rounds), "calls": len(calls),
        "summary_calls": sum(c.data.get("action") == COMPACTED for c in calls),
        "largest_prompt_tokens": max(prompts, default=0), "largest_call_tokens": max(sizes, default=0),
        "prompts_that_left_messages_out": len(fitted),
        "most_left_out": max((int(e.data.get("omitted", 0)) for e in fitted), default=0),
        "rounds_per_block": block,
        # the first block includes loading the model
        "round_seconds_by_block": _blocks(per_round, block),
        "prompt_tokens_by_block": [round(t) for t in _blocks(round_prompts, block)],
        # the tokens the model wrote a round: what a round's time follows, once its prompts are flat
        "answer_tokens_by_block": [round(t) for t in _blocks([answers.get(r, 0) for r in range(1, len(rounds) + 1)],
                                                             block)],
    }


async def by_size(n_ctx: int, words: int, answer_tokens: int, kv_windows: int) -> dict[str, Any]:
    """Seconds per call by prompt size: two conversations on one engine (a debate's sides), each call's
    prompt its side's previous one and ``words`` more words of transcript, up to the window. Each row:
    the side, the prompt's tokens, those the engine took from its cache, the answer's tokens, seconds."""
    from rolecast.llm.local import provider

    provider.KV_WINDOWS = kv_windows  # read when the model loads (this process loads it here)
    llm = provider.LocalLLM(n_ctx=n_ctx)
    vocabulary = "car city street bus bike walk air noise shop rent park tram road space child tree".split()
    transcript: list[str] = []
    rows: list[dict[str, Any]] = []
    for turn in itertools.count():
        side = ("Ada", "Ben")[turn % 2]
        debate = "\n".join(transcript)
        messages = [{"role": "system", "content": f"You are {side}, a debater on: {TOPIC}"},
                    {"role": "user", "content": f"## DEBATE SO FAR\n{debate}\n## YOUR TURN\nArgue, in 60 words:"}]
        prompt = await llm.count_tokens(messages)
        if prompt + answer_tokens > n_ctx:
            break
        cached_before = llm.stats().cached_tokens
        started = time.perf_counter()
        answer = await llm.complete(messages, settings={"max_tokens": answer_tokens, "temperature": 0})
        rows.append({"side": side, "prompt_tokens": prompt, "cached_tokens": llm.stats().cached_tokens - cached_before,
                     "answer_tokens": answer.usage.completion_tokens,
                     "seconds": round(time.perf_counter() - started, 2)})
        print(json.dumps(rows[-1]), flush=True)
        transcript.append(f"{side}: " + " ".join(vocabulary[(turn * 7 + i * 3) % len(vocabulary)]
                                                 for i in range(words)))

    def band(low: int, high: int) -> float | None:
        found = [r["seconds"] for r in rows if low <= r["prompt_tokens"] < high]
        return round(statistics.mean(found), 2) if found else None

    bands = {f"{k}k": band(k * 1000, (k + 1) * 1000) for k in range(n_ctx // 1000 + 1)}
    at_3k = bands.get("3k")
    past = [v for k, v in bands.items() if int(k[:-1]) >= 4 and v is not None]
    return {"n_ctx": n_ctx, "kv_windows": kv_windows, "words_a_turn": words, "answer_tokens": answer_tokens,
            "seconds_a_call_by_thousand_prompt_tokens": bands,
            "worst_past_4k_over_3k": round(max(past) / at_3k, 2) if past and at_3k else None,
            "calls_that_evaluated_the_whole_prompt": sum(r["cached_tokens"] == 0 for r in rows[2:]), "calls": rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-round", type=int, default=60)
    parser.add_argument("--n-ctx", type=int, default=8192, help="the embedded model's window (default: its default)")
    parser.add_argument("--max-tokens", type=int, default=0, help="an answer's room (0: the model's default, 512)")
    parser.add_argument("--compaction", choices=["off", "on", "both"], default="both")
    parser.add_argument("--share", type=float, default=Compaction.share,
                        help="compaction's share of the window (default: Compaction's own, 0.6)")
    parser.add_argument("--check", action="store_true", help="exit 1 unless every round ran within the window")
    parser.add_argument("--store", type=Path, help="keep the runs' logs (NAME-0.db, NAME-1.db …) to look at")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "long_run.json")
    parser.add_argument("--by-size", action="store_true",
                        help="seconds per call by prompt size on the engine, not the debate (issue 44)")
    parser.add_argument("--words", type=int, default=150, help="--by-size: words a turn adds to the transcript")
    parser.add_argument("--kv-windows", type=int, default=2,
                        help="--by-size: windows the KV buffer holds (1: as before issue 44)")
    args = parser.parse_args(argv)
    if args.by_size:
        found = asyncio.run(by_size(args.n_ctx, args.words, args.max_tokens or 40, args.kv_windows))
        summary = {k: v for k, v in found.items() if k != "calls"}
        print(json.dumps(summary))
        out = args.out.with_name(f"long_run_by_size_kv{args.kv_windows}.json")
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(found, indent=2) + "\n")
        return 0
    sides = {"off": [False], "on": [True], "both": [False, True]}[args.compaction]
    results = []
    with tempfile.TemporaryDirectory() as folder:
        for i, compaction in enumerate(sides):
            store = args.store.with_name(f"{args.store.stem}-{i}{args.store.suffix}") if args.store else None
            chosen = Compaction(share=args.share) if compaction else None
            result = one_side(args.n_round, args.n_ctx, chosen, args.max_tokens,
                              store or Path(folder) / f"runs{i}.db")
            print(json.dumps(result), flush=True)
            results.append(result)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    if args.check:
        bad = [r for r in results if r["rounds"] < args.n_round or r["largest_call_tokens"] > args.n_ctx]
        return 1 if bad else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
