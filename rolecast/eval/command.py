"""``rolecast eval EVALSET``: the command line of the eval package (``rolecast.cli`` hands it the arguments).

    rolecast eval EVALSET [--repeat N] [--threshold P] [--json OUT] [--junit OUT] [--store PATH|URL]
                          [--concurrency K] [--rescore EVAL_ID | --baseline EVAL_ID] [--eval-id ID]

Exit status: 0 when the pass rate over all runs reaches the threshold, 1 when it does not, 2 for a
usage or evalset error (``rolecast.cli`` maps every :class:`~rolecast.errors.RolecastError` to 2).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from .. import enable_logging
from ..errors import UsageError
from ..tuning.surface import load_tuning, tuning_active
from . import report
from .runner import run_eval


def _rate(text: str) -> float:
    try:
        value = float(text.rstrip("%")) / (100 if text.endswith("%") else 1)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a pass rate such as 0.8 or 80%, not {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"a pass rate between 0 and 1, not {text!r}")
    return value


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a whole number >= 1, not {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"a whole number >= 1, not {text!r}")
    return value


def add_parser(sub: Any) -> None:
    """The ``eval`` command, on ``rolecast``'s subparsers."""
    cmd = sub.add_parser("eval", help="run an evalset against a team: pass rates, rescoring, A/B runs",
                         description="Run every case of EVALSET (a YAML or JSON file) against its team, score "
                                     "each run by the case's checks, and report pass rates.")
    cmd.add_argument("evalset", help="the evalset file (.yaml, .yml or .json)")
    cmd.add_argument("--repeat", type=_positive, metavar="N", help="runs per case (default: the evalset's repeat)")
    cmd.add_argument("--threshold", type=_rate, metavar="P",
                     help="the pass rate over all runs needed for exit status 0 (default: the evalset's)")
    cmd.add_argument("--json", dest="json_out", metavar="OUT", help="write the results as JSON to OUT ('-': stdout)")
    cmd.add_argument("--junit", dest="junit_out", metavar="OUT", help="write JUnit XML to OUT (for CI)")
    cmd.add_argument("--store", metavar="PATH|URL",
                     help="the run store (default: $ROLECAST_STORE or ./.rolecast/runs.db)")
    cmd.add_argument("--concurrency", type=_positive, default=1, metavar="K", help="runs at once (default 1)")
    which = cmd.add_mutually_exclusive_group()
    which.add_argument("--rescore", metavar="EVAL_ID",
                       help="score EVAL_ID's recorded runs by the checks as they are now (no team, no model "
                            "call but a new or changed judge's)")
    which.add_argument("--baseline", metavar="EVAL_ID",
                       help="run the team reusing every unchanged model call of EVAL_ID's runs; report the change")
    cmd.add_argument("--quiet", action="store_true", help="no progress line per run on stderr")
    cmd.add_argument("--tuning", metavar="PATH",
                     help="apply this tuning (rolecast optimize's output) to every run's team")
    cmd.add_argument("--eval-id", metavar="ID", help="the eval's id (default: the unfinished eval of this plan, "
                                                    "else a new one)")


def run(args: argparse.Namespace) -> int:
    """Carry out ``rolecast eval …``; the exit status."""
    # (the roles' turns logged at INFO would drown the table)
    enable_logging("DEBUG" if getattr(args, "verbose", False) else "WARNING")
    if args.eval_id is not None and args.rescore is not None:
        raise UsageError("--eval-id names a new or unfinished eval; --rescore names the eval to score")
    done = 0

    def progress(run_id: str, case: str, made: bool) -> None:
        # a line a run as it ends (a team on a small model takes a while): on stderr, stdout keeps the results
        nonlocal done
        done += 1
        if getattr(args, "quiet", False):
            return
        print(f"run {done}: {case} {'finished' if made else 'found finished'} ({run_id})", file=sys.stderr,
              flush=True)

    tuning = load_tuning(args.tuning) if getattr(args, "tuning", None) else None
    with tuning_active(tuning):
        result = asyncio.run(run_eval(
            args.evalset, repeat=args.repeat, threshold=args.threshold, store=args.store,
            concurrency=args.concurrency, rescore=args.rescore, baseline=args.baseline, eval_id=args.eval_id,
            on_run=progress,
        ))
    text = report.to_json(result)
    if args.json_out == "-":
        print(text)
    else:
        print(report.table(result, color=sys.stdout.isatty()))
        if args.json_out:
            report.write(args.json_out, text)
    if args.junit_out:
        report.write(args.junit_out, report.to_junit(result))
    return result.exit_code


__all__ = ["add_parser", "run"]
