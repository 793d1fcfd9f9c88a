"""``rolecast optimize EVALSET --out TUNING …``: see :mod:`rolecast.tuning.optimize`."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from .. import enable_logging
from .optimize import OPTIMIZERS, Candidate, optimize


def add_parser(sub: Any) -> None:
    """The ``optimize`` command, on ``rolecast``'s subparsers."""
    cmd = sub.add_parser("optimize", help="tune a team's instructions and demonstrations from its evalset",
                         description="Split EVALSET's cases into train and dev, run the team as written, try "
                                     "tunings made from what passed (demonstrations) or proposed by a teacher "
                                     "model (instructions), and write the one that does best on dev.")
    cmd.add_argument("evalset", help="the evalset file (.yaml, .yml or .json)")
    cmd.add_argument("--out", required=True, metavar="TUNING", help="where the winning tuning (YAML) is written")
    cmd.add_argument("--dev", type=float, default=0.34, metavar="SHARE",
                     help="the share of cases held out as dev, never learnt from (default 0.34)")
    cmd.add_argument("--seed", type=int, default=0, help="the seed of the train/dev split (default 0)")
    cmd.add_argument("--optimizer", choices=OPTIMIZERS, default="bootstrap",
                     help="bootstrap: demonstrations from passing runs; instruct: a teacher rewrites "
                          "instructions from failing checks; gepa: both (default bootstrap)")
    cmd.add_argument("--teacher", metavar="SERVICE", help="the model that proposes instructions (a service of "
                                                          "the configuration; default: the default model)")
    cmd.add_argument("--budget-calls", type=int, metavar="N", dest="budget_calls",
                     help="model calls that may reach a model, in all (reused calls are free)")
    cmd.add_argument("--max-demos", type=int, default=3, metavar="K", dest="max_demos",
                     help="demonstrations per action, at most (candidates hold 1 … K; default 3)")
    cmd.add_argument("--json", dest="json_out", metavar="OUT", help="write the report as JSON to OUT ('-': stdout)")
    cmd.add_argument("--store", metavar="PATH|URL", help="the run store (default: $ROLECAST_STORE or "
                                                         "./.rolecast/runs.db)")


def _line(candidate: Candidate, best: Candidate) -> str:
    return (f"{candidate.id} ({candidate.origin}, {', '.join(candidate.changed)}): train "
            f"{candidate.rate('train'):.0%} dev {candidate.rate('dev'):.0%} (checks {candidate.check_rate:.0%}), "
            f"{candidate.live_calls} live / "
            f"{candidate.reused_calls} reused calls; best so far: {best.id}")


def run(args: argparse.Namespace) -> int:
    """Carry out ``rolecast optimize …``; the exit status."""
    enable_logging("WARNING")

    def told(candidate: Candidate, best: Candidate) -> None:
        print(_line(candidate, best), file=sys.stderr, flush=True)

    result = asyncio.run(optimize(
        args.evalset, args.out, store=args.store, dev=args.dev, seed=args.seed, optimizer=args.optimizer,
        budget_calls=args.budget_calls, max_demos=args.max_demos, teacher=args.teacher, on_candidate=told,
    ))
    report = result.as_dict()
    text = json.dumps(report, indent=1, ensure_ascii=False)
    if args.json_out == "-":
        print(text)
    else:
        if args.json_out:
            Path(args.json_out).parent.mkdir(parents=True, exist_ok=True)
            Path(args.json_out).write_text(text + "\n", encoding="utf-8")
        print(f"{'candidate':10} {'from':10} {'train':>6} {'dev':>6} {'checks':>6} {'live':>5} {'reused':>6}  changed")
        for c in [result.baseline, *result.candidates]:
            print(f"{c.id:10} {c.origin[:10]:10} {c.rate('train'):6.0%} {c.rate('dev'):6.0%} {c.check_rate:6.0%} "
                  f"{c.live_calls:5} {c.reused_calls:6}  {', '.join(c.changed) or '-'}")
        paired = report["paired_dev"]
        print(f"best: {result.best.id} — dev {result.baseline.rate('dev'):.0%} -> {result.best.rate('dev'):.0%} "
              f"(checks {result.baseline.check_rate:.0%} -> {result.best.check_rate:.0%}) "
              f"({paired['improved']} case(s) better, {paired['worsened']} worse); {result.spent_calls} live calls"
              f"{'; ' + result.stopped if result.stopped else ''}; tuning written to {args.out}")
    return 0


__all__ = ["add_parser", "run"]
