"""Benchmark: prompt-prefix reuse on the embedded model (state selection, the README main job).

    python bench/bench_prefix.py                 # state-selection latencies + memory held
    python bench/bench_prefix.py --main-job 3    # also the README main job's wall time, 3 runs

Measures, on SmolLM2-135M-Instruct (``LocalLLM.choose`` under its grammar, temperature 0):

* **cold**: a role's state-selection prompt (its prefix + ``STATE_TEMPLATE`` over a
  history of several messages) with nothing saved for the role;
* **grown**: the same role right after, its history one message longer — what a role
  pays at its next turn. With per-role prefix reuse only the new part is evaluated;
* the same pair with another role calling the model in between (its state must not
  leak, and the first role's saved state must survive);
* the memory held by the saved states (bytes per state, per token);
* ``--main-job N``: wall time of ``python examples/build_customized_multi_agents.py
  "write a function that adds two numbers"`` in a fresh process, N times (median).

Writes ``bench/results/prefix.json``. Works on three trees: the llama.cpp engine's slot
cache (now: "cold" asks with ``cache_prompt: false``, so the prompt is evaluated whole
and then kept in its slot), the hand-written per-role KV cache of llama-cpp-python (the
first "before": "cold" clears it), and no reuse at all (every call cold).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from rolecast.context import Context  # noqa: E402
from rolecast.llm.local.provider import LocalLLM  # noqa: E402
from roles import PREFIX_TEMPLATE, STATE_TEMPLATE  # noqa: E402

HISTORY = [
    "Human: Write a function that returns the n-th Fibonacci number and a test suite for it.",
    "Product Manager: The PRD is written: the function takes n >= 0 and returns an int; negative n raises.",
    "Architect: The design is one module fib.py with fib(n) and a tests/test_fib.py file run by pytest.",
    "Engineer: def fib(n): return n if n < 2 else fib(n - 1) + fib(n - 2)",
    "QaEngineer: 3 tests written; test_fib_negative fails with RecursionError instead of ValueError.",
    "Engineer: Fixed the recursion error by validating that n >= 0 and raising ValueError otherwise.",
    "QaEngineer: All 12 tests pass, but fib(35) takes 4 seconds; please make it iterative.",
    "Engineer: fib is now iterative: a, b = 0, 1; loop n times; return a. fib(90) is instant.",
    "Human: Please review the code before merging and write the release note.",
    "QaEngineer: Reviewed: the docstring misses the ValueError; otherwise fine.",
]
STATES = ["WriteCode", "WriteCodeReview", "WriteTest", "RunCode", "DebugError", "WriteDocs"]
ROLES = [("Engineer", "Alex", "write elegant, readable, extensible, efficient code"),
         ("QaEngineer", "Edward", "write comprehensive and robust tests to ensure codes will work as expected"),
         ("Architect", "Bob", "design a concise, usable, complete software system")]
SETTINGS = {"temperature": 0.0, "seed": 0}


TEMPLATE = STATE_TEMPLATE


def state_prompt(role: tuple[str, str, str], history: list[str]) -> str:
    """The prompt ``Role._think`` builds (role prefix + STATE_TEMPLATE)."""
    profile, name, goal = role
    prefix = PREFIX_TEMPLATE.format(profile=profile, name=name, goal=goal)
    return prefix + TEMPLATE.format(
        history="\n".join(history), previous_state=-1,
        states="\n".join(f"{i}. {s}" for i, s in enumerate(STATES)), n_states=len(STATES) - 1,
    )


def _engine_tree(llm: LocalLLM) -> bool:
    """True on the llama.cpp-server engine (xllamacpp), False on llama-cpp-python."""
    return hasattr(llm, "stats")


async def timed_choose(llm: LocalLLM, context: Context, role: str, prompt: str, *, cold: bool = False) -> float:
    settings: dict[str, Any] = dict(SETTINGS)
    if cold and _engine_tree(llm):
        settings["extra"] = {"cache_prompt": False}  # the engine evaluates the whole prompt (and keeps it)
    with context.scope(role=role):
        t0 = time.perf_counter()
        await llm.choose(prompt, len(STATES), settings=settings)
        return time.perf_counter() - t0


def _clear(llm: LocalLLM) -> None:
    cache = getattr(llm, "prefix_cache", None)  # the hand-written cache of llama-cpp-python's tree
    if cache is not None:
        cache.clear()


def _load(llm: LocalLLM) -> None:
    """Load the model before timing anything."""
    if _engine_tree(llm):
        llm.stats()
    else:
        llm.llama  # noqa: B018


async def state_selection(llm: LocalLLM, reps: int, k: int) -> dict[str, Any]:
    """Cold vs grown-by-one latency, alone and with another role calling in between."""
    rows = []
    context = Context()
    for rep in range(reps):
        role = ROLES[rep % len(ROLES)]
        other = ROLES[(rep + 1) % len(ROLES)]
        history = HISTORY[:k]
        _clear(llm)
        before = llm.stats() if _engine_tree(llm) else None
        cold = await timed_choose(llm, context, role[1], state_prompt(role, history), cold=True)
        if before is not None:
            tokens = llm.stats().prompt_tokens - before.prompt_tokens
        grown = await timed_choose(llm, context, role[1], state_prompt(role, HISTORY[: k + 1]))
        # interleaved: the other role calls, then the first role's history grows again
        await timed_choose(llm, context, other[1], state_prompt(other, history))
        grown_after_other = await timed_choose(llm, context, role[1], state_prompt(role, HISTORY[: k + 2]))
        rows.append({"cold_s": cold, "grown_s": grown, "grown_after_other_s": grown_after_other})
    if not _engine_tree(llm):
        tokens = len(llm.llama.tokenize(state_prompt(ROLES[0], HISTORY[:k]).encode()))
    out: dict[str, Any] = {"history_messages": k, "prompt_tokens": tokens, "reps": reps, "rows": rows}
    for name in ("cold_s", "grown_s", "grown_after_other_s"):
        out[name] = statistics.median(r[name] for r in rows)
    out["grown_over_cold"] = out["grown_s"] / out["cold_s"]
    out["grown_after_other_over_cold"] = out["grown_after_other_s"] / out["cold_s"]
    if _engine_tree(llm):
        stats = llm.stats()
        out["engine"] = {"prompt_tokens": stats.prompt_tokens, "cached_tokens": stats.cached_tokens,
                         "cached_share": stats.cached_tokens / max(1, stats.prompt_tokens)}
    cache = getattr(llm, "prefix_cache", None)
    if cache is not None:
        stats = cache.stats()
        out["cache"] = {"entries": stats.entries, "bytes": stats.bytes, "budget_bytes": stats.budget_bytes,
                        "hits": stats.hits, "misses": stats.misses, "evictions": stats.evictions}
        held = [(len(s.tokens), s.nbytes) for s in cache._states.values()]
        out["cache"]["bytes_per_token"] = sum(b for _, b in held) / max(1, sum(t for t, _ in held))
    return out


def main_job(runs: int) -> dict[str, Any]:
    """Wall time of the README's main job in a fresh process (model load included; this checkout's code)."""
    cmd = [sys.executable, "examples/build_customized_multi_agents.py", "write a function that adds two numbers"]
    walls = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True,
                       env={**os.environ, "ROLECAST_STORE": "none", "PYTHONPATH": str(ROOT)})
        walls.append(time.perf_counter() - t0)
    return {"runs": runs, "median_s": statistics.median(walls), "min_s": min(walls), "walls_s": walls}


def report(res: dict[str, Any]) -> str:
    s = res["state_selection"]
    lines = [
        f"state selection on {res['model']}, {s['prompt_tokens']}-token prompt ({s['history_messages']} history "
        f"messages), median of {s['reps']}:",
        f"  cold (the whole prompt evaluated):              {s['cold_s']:.3f} s",
        f"  history grown by one message:                   {s['grown_s']:.3f} s  ({s['grown_over_cold']:.2f}x cold)",
        f"  grown again, after another role's call:         {s['grown_after_other_s']:.3f} s  "
        f"({s['grown_after_other_over_cold']:.2f}x cold)",
    ]
    if "engine" in s:
        e = s["engine"]
        lines.append(f"  the engine took {e['cached_tokens']} of {e['prompt_tokens']} prompt tokens from its slots' "
                     f"cache ({e['cached_share']:.0%})")
    if "cache" in s:
        c = s["cache"]
        lines.append(f"  saved states: {c['entries']} holding {c['bytes'] / 2**20:.1f} MiB "
                     f"({c['bytes_per_token'] / 1024:.1f} KiB per token), budget {c['budget_bytes'] / 2**20:.0f} MiB")
    if "main_job" in res:
        m = res["main_job"]
        lines.append(f"README main job: median {m['median_s']:.1f} s over {m['runs']} runs (min {m['min_s']:.1f} s)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--history", type=int, default=7, help="history messages in the cold prompt")
    parser.add_argument("--main-job", type=int, default=0, metavar="N", help="also time the README job N times")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "prefix.json")
    args = parser.parse_args(argv)
    llm = LocalLLM()
    _load(llm)
    res: dict[str, Any] = {"model": llm.model,
                           "state_selection": asyncio.run(state_selection(llm, args.reps, args.history))}
    if args.main_job:
        res["main_job"] = main_job(args.main_job)
    print(report(res))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=2))
    return res


if __name__ == "__main__":
    main()
