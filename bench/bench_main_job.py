"""Benchmark: the README main job on the embedded model, the engine's prompt cache on and off.

    python bench/bench_main_job.py                 # 3 runs of each side, interleaved
    python bench/bench_main_job.py --runs 5 --n-threads 2

The job is ``python examples/build_customized_multi_agents.py "write a function that adds
two numbers"`` (a coder, a tester and a reviewer, 5 rounds, SmolLM2-135M-Instruct, no API
key). Each run is a fresh process, timed from its start to its exit (interpreter start-up
and model load included); the sides take turns (on, off, on, off …) so that a change in
the machine's load hits both. The sides differ in one setting, given to the job through a
YAML file named by ``ROLECAST_CONFIG``:

* **on**: the defaults (llama.cpp's slot cache: a prompt evaluates only what no slot holds);
* **off**: ``prefix_cache_mib: 0``, every call evaluates its whole prompt.

Every run also reports where its time went, from llama.cpp's own timings of each
request: interpreter start and imports, model load, prompt evaluation, generation, and
the rest (framework, exit). Requests decoded together overlap, so with concurrent roles
the per-request times add up to more than the wall time they took. Whether both sides
held the same conversation is reported (a digest of the answers the roles got): the
engine's arithmetic depends on how tokens are batched, so a cached prefix may change a
close greedy choice. Writes ``bench/results/main_job.json``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import runpy
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "build_customized_multi_agents.py"
IDEA = "write a function that adds two numbers"
SIDES = {"on": {}, "off": {"prefix_cache_mib": 0}}
MARK = "BENCH_MAIN_JOB "


# ------------------------------------------------------------------ one run (child process)
def child(idea: str) -> None:
    """Run the example as its command line does, with counters around the model; print them last."""
    started = time.perf_counter()
    sys.path[:0] = [str(ROOT), str(EXAMPLE.parent)]
    from rolecast.llm.local import provider as local

    calls: list[dict[str, Any]] = []
    answers: list[str] = []  # the answers as the roles got them (a loop's copies trimmed)
    loads: list[float] = []
    request, complete, load = local._request, local.LocalLLM._complete, local._load

    def timed_load(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return load(*args, **kwargs)
        finally:
            loads.append(time.perf_counter() - t0)

    def counted_request(*args: Any, **kwargs: Any) -> Any:
        out = request(*args, **kwargs)
        usage, t = out.usage, out.timings
        calls.append({"prompt": usage.prompt_tokens if usage else out.prompt_tokens,
                      "completion": usage.completion_tokens if usage else len(out.pieces),
                      "n_p_eval": int(t.get("prompt_n") or 0), "t_p_eval_s": float(t.get("prompt_ms") or 0) / 1000,
                      "n_eval": int(t.get("predicted_n") or 0), "t_eval_s": float(t.get("predicted_ms") or 0) / 1000})
        return out

    async def kept_complete(self: Any, *args: Any, **kwargs: Any) -> Any:
        completion = await complete(self, *args, **kwargs)
        answers.append(completion.text)
        return completion

    local._load, local._request = timed_load, counted_request
    local.LocalLLM._complete = kept_complete  # type: ignore[method-assign]
    sys.argv = [str(EXAMPLE), idea]
    imported = time.perf_counter()
    try:
        runpy.run_path(str(EXAMPLE), run_name="__main__")
    finally:
        done = time.perf_counter()
        perf = {k: sum(c[k] for c in calls) for k in ("n_p_eval", "t_p_eval_s", "n_eval", "t_eval_s")}
        out = {"imports_s": imported - started, "job_s": done - imported, "load_s": sum(loads), "calls": calls,
               **perf, "digest": hashlib.blake2b(json.dumps(answers).encode(), digest_size=8).hexdigest()}
        print(MARK + json.dumps(out), flush=True)


# ------------------------------------------------------------------ the parent
def run_once(side: str, extra: dict[str, Any], idea: str, tmp: Path,
             env_extra: dict[str, str] | None = None) -> dict[str, Any]:
    settings = {"provider": "local", **SIDES[side], **extra}
    config = tmp / f"{side}.yaml"
    config.write_text("llm:\n" + "".join(f"  {k}: {json.dumps(v)}\n" for k, v in settings.items()))
    env = {**os.environ, "ROLECAST_CONFIG": str(config), "ROLECAST_STORE": "none", "PYTHONPATH": str(ROOT),
           **(env_extra or {})}
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, __file__, "--child", "--idea", idea], cwd=tmp, env=env,
                          capture_output=True, text=True)
    wall = time.perf_counter() - t0
    lines = [line for line in proc.stdout.splitlines() if line.startswith(MARK)]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"the {side} run failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    r = json.loads(lines[-1][len(MARK):])
    calls = r.pop("calls")
    r.update(side=side, wall_s=wall, n_calls=len(calls), prompt_tokens=sum(c["prompt"] for c in calls),
             generated_tokens=sum(c["completion"] for c in calls))
    r["other_s"] = wall - r["imports_s"] - r["load_s"] - r.get("t_p_eval_s", 0.0) - r.get("t_eval_s", 0.0)
    return r


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for side in SIDES:
        mine = [r for r in rows if r["side"] == side]
        if not mine:
            continue
        walls = [r["wall_s"] for r in mine]
        med = {k: statistics.median(r[k] for r in mine) for k in
               ("imports_s", "load_s", "t_p_eval_s", "t_eval_s", "other_s", "n_p_eval", "n_eval",
                "n_calls", "prompt_tokens", "generated_tokens")}
        out[side] = {"runs": len(mine), "wall_min_s": min(walls), "wall_median_s": statistics.median(walls),
                     "wall_max_s": max(walls), **med,
                     "gen_tokens_per_s": med["n_eval"] / med["t_eval_s"] if med["t_eval_s"] else None,
                     "prompt_tokens_per_s": med["n_p_eval"] / med["t_p_eval_s"] if med["t_p_eval_s"] else None,
                     "digests": sorted({r["digest"] for r in mine})}
    on, off = [r for r in rows if r["side"] == "on"], [r for r in rows if r["side"] == "off"]
    pairs = [b["wall_s"] / a["wall_s"] for a, b in zip(on, off, strict=False)]
    if pairs:
        out["off_over_on"] = {"median": statistics.median(pairs), "min": min(pairs), "max": max(pairs)}
    out["same_conversation"] = len({r["digest"] for r in rows}) == 1
    return out


def report(s: dict[str, Any]) -> str:
    lines = []
    for side, label in (("off", "prompt cache off"), ("on", "prompt cache on (the default)")):
        if side not in s:
            continue
        x = s[side]
        lines += [
            f"{label}: wall median {x['wall_median_s']:.1f} s (min {x['wall_min_s']:.1f}, max {x['wall_max_s']:.1f}; "
            f"{x['runs']} runs), {x['n_calls']:.0f} calls, {x['prompt_tokens']:.0f} prompt tokens "
            f"({x['n_p_eval']:.0f} evaluated), {x['generated_tokens']:.0f} generated",
            f"    imports {x['imports_s']:.1f} s | model load {x['load_s']:.1f} s | "
            f"prompt eval {x['t_p_eval_s']:.1f} s ({x['prompt_tokens_per_s'] or 0:.0f} tok/s) | "
            f"generation {x['t_eval_s']:.1f} s "
            f"({x['gen_tokens_per_s'] or 0:.1f} tok/s) | other {x['other_s']:.1f} s",
        ]
    if "off_over_on" in s:
        r = s["off_over_on"]
        lines.append(f"off/on wall, run by run: median {r['median']:.2f}x (min {r['min']:.2f}, max {r['max']:.2f})")
    lines.append("same conversation on every run: " + ("yes" if s["same_conversation"] else "no"))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=3, help="runs of each side")
    parser.add_argument("--sides", default="on,off", help="which sides to run (on, off or both)")
    parser.add_argument("--n-threads", type=int, default=None, help="LocalConfig.n_threads for both sides")
    parser.add_argument("--idea", default=IDEA)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "main_job.json")
    args = parser.parse_args(argv)
    if args.child:
        child(args.idea)
        return {}
    extra = {"n_threads": args.n_threads} if args.n_threads else {}
    sides = [s for s in args.sides.split(",") if s in SIDES]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.runs):
            for side in sides:
                row = run_once(side, extra, args.idea, Path(tmp))
                rows.append(row)
                print(f"run {i + 1} {side}: {row['wall_s']:.1f} s, {row['generated_tokens']} tokens generated",
                      file=sys.stderr, flush=True)
    res = {"idea": args.idea, "settings": extra, "rows": rows, "summary": summarise(rows)}
    print(report(res["summary"]))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=2))
    return res


if __name__ == "__main__":
    main()
