"""Benchmark: the embedded model idle and with one core kept busy by another process.

    python bench/bench_contention.py                       # every setting, 3 interleaved pairs
    python bench/bench_contention.py --settings default,two --pairs 5
    python bench/bench_contention.py --no-main-job         # tokens/s only (a minute)

A user's machine always runs something else (a browser, an IDE, the test suite). This
measures what that costs, as the user sees it, for each engine setting compared:

* **the README main job** (``examples/build_customized_multi_agents.py "write a function
  that adds two numbers"``, a fresh process, start to exit, as :mod:`bench_main_job` runs it);
* **aggregate tokens/s at 1, 2 and 4 concurrent calls** (as :mod:`bench_engine` measures
  it, in a fresh process per setting so that OpenMP's environment applies).

Each measurement is taken twice in a row, idle and busy (``python -c "while True: pass"``
running beside it, started before and killed after), the order alternating from pair to
pair, so that a change in the machine's load hits both sides; the figure that matters is
the median over pairs of busy/idle. "Idle" means nothing of ours beside it: on a shared
machine other programs run too, so the 1-minute load average is recorded with every row.

The settings (``--settings``):

* ``default``: what rolecast picks (one thread per two cores: one thread on a 2-core machine);
* ``two``: ``n_threads: 2`` (the default before issue 31 on a 2-core machine), OpenMP's own
  wait policy (spin ~300,000 times at each barrier, then sleep);
* ``two-passive``: ``n_threads: 2`` with ``OMP_WAIT_POLICY=PASSIVE`` (sleep at once);
* ``two-spin1k``: ``n_threads: 2`` with ``GOMP_SPINCOUNT=1000`` (spin briefly, then sleep).

Writes ``bench/results/contention.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
for _p in (str(ROOT), str(ROOT / "bench")):
    if _p not in sys.path:
        sys.path.insert(0, _p)

import bench_main_job  # noqa: E402

#: name -> (LocalConfig settings, environment of the process)
SETTINGS: dict[str, tuple[dict[str, Any], dict[str, str]]] = {
    "default": ({}, {}),
    "two": ({"n_threads": 2}, {}),
    "two-passive": ({"n_threads": 2}, {"OMP_WAIT_POLICY": "PASSIVE"}),
    "two-spin1k": ({"n_threads": 2}, {"GOMP_SPINCOUNT": "1000"}),
}
MARK = "BENCH_CONTENTION "
BUSY = [sys.executable, "-c", "while True: pass"]


def load1() -> float:
    return os.getloadavg()[0]


# ------------------------------------------------------------------ tokens/s (child process)
def child_tokens(n_threads: int | None, levels: list[int], tokens: int) -> None:
    import bench_engine

    from rolecast.llm.local.provider import LocalLLM

    async def go() -> list[dict[str, Any]]:
        llm = LocalLLM(n_threads=n_threads)
        await llm.complete([{"role": "user", "content": "Hi"}], settings={"max_tokens": 2})  # load
        return [await bench_engine.level(llm, n, tokens, 0) for n in levels]

    print(MARK + json.dumps(asyncio.run(go())), flush=True)


def tokens_once(setting: str, levels: list[int], tokens: int) -> dict[str, Any]:
    config, env = SETTINGS[setting]
    args = [sys.executable, __file__, "--child-tokens", "--levels", ",".join(map(str, levels)),
            "--tokens", str(tokens)]
    if config.get("n_threads"):
        args += ["--n-threads", str(config["n_threads"])]
    proc = subprocess.run(args, capture_output=True, text=True, env={**os.environ, **env, "PYTHONPATH": str(ROOT)})
    lines = [line for line in proc.stdout.splitlines() if line.startswith(MARK)]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"the {setting} tokens run failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return {f"tps_{r['concurrent']}": r["tokens_per_s"] for r in json.loads(lines[-1][len(MARK):])}


def main_job_once(setting: str, tmp: Path) -> dict[str, Any]:
    config, env = SETTINGS[setting]
    row = bench_main_job.run_once("on", config, bench_main_job.IDEA, tmp, env_extra=env)
    return {"main_job_s": row["wall_s"], "gen_tokens_per_s": row["n_eval"] / row["t_eval_s"] if row["t_eval_s"] else 0}


# ------------------------------------------------------------------ the parent
def measure(what: str, setting: str, busy: bool, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    hog = subprocess.Popen(BUSY) if busy else None
    try:
        before = load1()
        if what == "main_job":
            row = main_job_once(setting, tmp)
        else:
            row = tokens_once(setting, args.levels, args.tokens)
        return {"what": what, "setting": setting, "busy": busy, "load1_before": before, "load1_after": load1(), **row}
    finally:
        if hog is not None:
            hog.kill()
            hog.wait()


def run(args: argparse.Namespace) -> dict[str, Any]:
    whats = (["main_job"] if args.main_job else []) + (["tokens"] if args.tokens_per_s else [])
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for pair in range(args.pairs):
            for what in whats:
                for setting in args.settings:
                    order = (False, True) if pair % 2 == 0 else (True, False)
                    for busy in order:
                        rows.append(measure(what, setting, busy, args, Path(tmp)))
                        r = rows[-1]
                        shown = (f"{r['main_job_s']:.1f} s" if what == "main_job"
                                 else " ".join(f"{r[k]:.1f}" for k in r if k.startswith("tps_")) + " tokens/s")
                        print(f"pair {pair + 1} {what} {setting} {'busy' if busy else 'idle'}: {shown} "
                              f"(load {r['load1_before']:.1f})", file=sys.stderr, flush=True)
    return {"settings": {k: SETTINGS[k] for k in args.settings}, "cores": os.cpu_count(), "rows": rows,
            "summary": summarise(rows)}


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for setting in dict.fromkeys(r["setting"] for r in rows):
        mine = [r for r in rows if r["setting"] == setting]
        idle, busy = [r for r in mine if not r["busy"]], [r for r in mine if r["busy"]]
        keys = [k for k in mine[0] if k == "main_job_s" or k.startswith("tps_")]
        keys += [k for r in mine for k in r if (k == "main_job_s" or k.startswith("tps_")) and k not in keys]
        entry: dict[str, Any] = {"load1_median": statistics.median(r["load1_before"] for r in mine)}
        for key in dict.fromkeys(keys):
            a = [r[key] for r in idle if key in r]
            b = [r[key] for r in busy if key in r]
            ratios = [y / x for x, y in zip(a, b, strict=False) if x]
            entry[key] = {"idle_median": statistics.median(a), "busy_median": statistics.median(b),
                          "busy_over_idle_median": statistics.median(ratios) if ratios else None}
        out[setting] = entry
    return out


def report(summary: dict[str, Any]) -> str:
    lines = ["setting        measure        idle      busy   busy/idle (median of pairs)   load"]
    for setting, entry in summary.items():
        for key, v in entry.items():
            if key == "load1_median":
                continue
            unit = "s" if key == "main_job_s" else "tok/s"
            label = "main job" if key == "main_job_s" else f"{key[4:]} concurrent"
            lines.append(f"{setting:<14} {label:<13} {v['idle_median']:7.1f}{unit:<5} {v['busy_median']:6.1f}{unit:<5}"
                         f" {v['busy_over_idle_median']:5.2f}x{'':<24}{entry['load1_median']:.1f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--settings", default=",".join(SETTINGS), help=f"comma-separated: {', '.join(SETTINGS)}")
    parser.add_argument("--pairs", type=int, default=3, help="interleaved idle/busy pairs per measurement")
    parser.add_argument("--levels", default="1,2,4", help="concurrent calls for tokens/s")
    parser.add_argument("--tokens", type=int, default=64, help="tokens per call for tokens/s")
    parser.add_argument("--no-main-job", dest="main_job", action="store_false")
    parser.add_argument("--no-tokens", dest="tokens_per_s", action="store_false")
    parser.add_argument("--n-threads", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--child-tokens", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "contention.json")
    args = parser.parse_args(argv)
    args.levels = [int(x) for x in str(args.levels).split(",")]
    if args.child_tokens:
        child_tokens(args.n_threads, args.levels, args.tokens)
        return {}
    args.settings = [s for s in args.settings.split(",") if s]
    unknown = [s for s in args.settings if s not in SETTINGS]
    if unknown:
        parser.error(f"unknown setting(s) {unknown}; known: {', '.join(SETTINGS)}")
    # a SIGTERM (timeout, kill) ends the run through its finally blocks: the busy process dies with it
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    started = time.perf_counter()
    res = run(args)
    res["wall_s"] = time.perf_counter() - started
    print(report(res["summary"]))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=2))
    return res


if __name__ == "__main__":
    main()
