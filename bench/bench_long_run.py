"""Benchmark: a long two-role debate on the embedded model, with and without compaction.

    python bench/bench_long_run.py                          # 60 rounds, n_ctx 8192, both sides
    python bench/bench_long_run.py --n-round 24 --n-ctx 1024 --compaction off --check

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
    args = parser.parse_args(argv)
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
