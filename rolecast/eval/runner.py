"""Run an evalset: every case ``repeat`` times, each run an ordinary durable run; then score them.

* **Ids.** An eval's id is ``<name>-<plan digest>-<UTC time>``; its runs are ``<eval id>.<case>.<n>``,
  tagged in their ``run_started`` event with ``{"eval", "evalset", "case", "repeat"}``.
* **Resume.** Started again with the same plan (team, ideas, rounds, repeats: not the checks), an
  eval whose runs are not all finished goes on: a finished run is read, not run again; an
  interrupted one (``kill -9``) resumes under its own id (the team's recorded calls are answered
  from its log); a missing one is run.
* **Rescore** (``rescore=EVAL_ID``): the eval's recorded runs scored by the checks as they are now —
  no team, no model call but the judge's for a new or changed ``judge`` check.
* **Baseline** (``baseline=EVAL_ID``): each run reuses the baseline's run of the same case and
  number (``Team(reuse=...)``): a model call whose request did not change is answered from it.

The team comes from the evalset's ``team: module:callable``, imported from the evalset's folder:
a factory called once per run (built inside :func:`~rolecast.runs.binding.bind_next_team`, so the
first ``Team`` it makes takes the run's id, store and tags), or a module-level ``Team``, for which
the module is run again per run.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import inspect
import json
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from loguru import logger

from ..errors import EvalsetError, UsageError
from ..llm.base import BaseLLM
from ..llm.errortext import error_text
from ..runs.base import RunStore
from ..runs.binding import RunBinding, bind_next_team
from ..runs.store import default_store, open_store
from .checks import CheckResult, run_check
from .evalset import Case, Evalset, check_plan_size, load_evalset
from .judge import Judges, run_judge
from .record import RunRecord, read_run
from .results import CaseResult, EvalResult, RunResult

#: what an eval id may be (its runs' ids are ``EVAL_ID.CASE.N``: no dot in it)
EVAL_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,71}")


def new_eval_id(evalset: Evalset, repeat: int) -> str:
    return f"{evalset.slug}-{evalset.plan_key(repeat)}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}"


def run_id_of(eval_id: str, case: str, repeat: int) -> str:
    return f"{eval_id}.{case}.{repeat}"


def eval_runs(store: RunStore, eval_id: str) -> dict[tuple[str, int], str]:
    """The runs of eval ``eval_id`` in ``store``, by (case, run number)."""
    found: dict[tuple[str, int], str] = {}
    for info in store.runs():
        head, _, rest = info.run_id.partition(".")
        if head != eval_id:
            continue
        case, _, number = rest.rpartition(".")
        if case and number.isdigit():
            found[(case, int(number))] = info.run_id
    return found


def _latest_eval(store: RunStore, prefix: str) -> str | None:
    ids = {info.run_id.partition(".")[0] for info in store.runs() if info.run_id.startswith(prefix)}
    return max(ids) if ids else None


# ------------------------------------------------------------------ the team
class TeamSource:
    """Builds the evalset's team once per run (see the module docstring)."""

    def __init__(self, evalset: Evalset):
        self.spec = evalset.team
        self.folder = evalset.folder
        module_name, _, self.attribute = self.spec.partition(":")
        if str(self.folder) not in sys.path:
            sys.path.insert(0, str(self.folder))
        try:
            self.module = importlib.import_module(module_name)
        except Exception as exc:
            raise EvalsetError(f"team {self.spec!r}: cannot import {module_name!r} from {self.folder}: "
                               f"{type(exc).__name__}: {exc}") from exc
        if not hasattr(self.module, self.attribute):
            raise EvalsetError(f"team {self.spec!r}: module {module_name!r} has no {self.attribute!r}")

    async def build(self, binding: RunBinding) -> Any:
        """A fresh team that took ``binding`` (its run id, store, reuse and tags)."""
        target = getattr(self.module, self.attribute)
        with bind_next_team(binding):
            if callable(target) and not hasattr(target, "run_id"):
                team = target()
                if inspect.isawaitable(team):
                    team = await team
            else:  # a module-level Team: the module is run again, and its Team takes the binding
                team = getattr(self._fresh_module(), self.attribute)
        if getattr(team, "run_id", None) != binding.run_id or not hasattr(team, "run"):
            raise EvalsetError(
                f"team {self.spec!r} gave {type(team).__name__}, not a Team that took the eval's run "
                f"{binding.run_id}: return a new Team built with no run_id, reuse or fork of its own")
        return team

    def _fresh_module(self) -> Any:
        origin = getattr(self.module, "__file__", None)
        spec = importlib.util.spec_from_file_location(f"_rolecast_eval_{id(self)}_{time.monotonic_ns()}", origin or "")
        if origin is None or spec is None or spec.loader is None:
            raise EvalsetError(f"team {self.spec!r} is a Team object of a module that cannot be run again: "
                               "give a function that returns a new Team")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module


async def _run_one(source: TeamSource, store: RunStore, case: Case, binding: RunBinding) -> None:
    team = await source.build(binding)
    if case.investment is not None:
        team.invest(case.investment)
    try:
        await team.run(n_round=case.n_round, idea=case.idea, console=False)  # (eval prints its own progress)
    except UsageError:
        raise
    except Exception as exc:  # the run's own failure: logged in its run_stopped, scored as a failed run
        logger.warning("eval run {} failed: {}: {}", binding.run_id, type(exc).__name__, error_text(exc))
    finally:
        close = getattr(team, "close", None)
        if callable(close):
            close()


# ------------------------------------------------------------------ scoring
async def score_run(store: RunStore, case: Case, record: RunRecord, judges: Judges) -> list[CheckResult]:
    """Every check of ``case`` on ``record`` (the run's own failure first, when it failed)."""
    results: list[CheckResult] = []
    if record.stop_reason is None:
        results.append(CheckResult("run", False, "the run did not finish (no run_stopped in its log)", "run"))
    elif record.failed:
        results.append(CheckResult("run", False, f"the run stopped: {record.failed}", "run"))
    for check in case.expect:
        if check.kind == "judge":
            results.append(await run_judge(store, record, check, judges))
        else:
            results.append(await run_check(record, check))
    return results


async def _score_all(
    store: RunStore, evalset: Evalset, planned: dict[tuple[str, int], str], judges: Judges, concurrency: int,
) -> list[CaseResult]:
    limit = asyncio.Semaphore(concurrency)

    async def one(case: Case, number: int, run_id: str) -> RunResult:
        async with limit:
            record = read_run(store, run_id)
            return RunResult(case.id, number, run_id, await score_run(store, case, record, judges), record)

    out = []
    for case in evalset.cases:
        keys = sorted(k for k in planned if k[0] == case.id)
        runs = await asyncio.gather(*(one(case, k[1], planned[k]) for k in keys))
        out.append(CaseResult(case.id, list(runs)))
    return out


# ------------------------------------------------------------------ the eval
def _open(store: Any) -> RunStore:
    opened = default_store() if store is None else open_store(store)
    if opened is None:
        raise UsageError("an eval needs a run store (its runs are ordinary durable runs): give store=PATH")
    return opened


async def run_eval(
    evalset: Evalset | str | Path, *, repeat: int | None = None, threshold: float | None = None, store: Any = None,
    concurrency: int = 1, rescore: str | None = None, baseline: str | None = None, eval_id: str | None = None,
    judges: dict[str, BaseLLM] | None = None, on_run: Callable[[str, str, bool], None] | None = None,
) -> EvalResult:
    """Run (or ``rescore``) an evalset and score it; see the module docstring.

    ``store``: a path, URL or :class:`~rolecast.runs.RunStore` (default ``$ROLECAST_STORE`` or
    ``./.rolecast/runs.db``); ``judges``: models by the names judge checks use (``"default"``);
    ``on_run(run_id, case, made)``: told as each run is done (made now, or found finished)."""
    started = time.monotonic()
    if not isinstance(evalset, Evalset):
        evalset = load_evalset(evalset)
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise UsageError(f"concurrency is a whole number >= 1, not {concurrency!r}")
    repeats = evalset.repeat if repeat is None else repeat
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise UsageError(f"repeat is a whole number >= 1, not {repeats!r}")
    check_plan_size(f"evalset {evalset.name!r}", len(evalset.cases), repeats)
    bar = evalset.threshold if threshold is None else threshold
    if not 0.0 <= bar <= 1.0:
        raise UsageError(f"threshold is a pass rate between 0 and 1, not {bar!r}")
    if rescore is not None and baseline is not None:
        raise UsageError("rescore scores recorded runs, baseline makes new ones: give one of them")
    given = isinstance(store, RunStore)
    opened = _open(store)
    try:
        result = await _evaluate(evalset, opened, repeats, bar, concurrency, rescore, baseline, eval_id,
                                 Judges(judges), on_run)
        result.seconds = time.monotonic() - started
        save_result(opened, result)
    finally:
        if not given:
            opened.close()
    return result


def results_file(home: Path | None, eval_id: str) -> Path | None:
    """Where an eval's latest scores are kept beside the store: ``<store folder>/evals/<eval id>.json``
    (None for a store with no folder: PostgreSQL, memory). The studio's Eval page reads them."""
    if home is None or not EVAL_ID.fullmatch(eval_id):
        return None
    return home / "evals" / f"{eval_id}.json"


def save_result(store: RunStore, result: EvalResult) -> None:
    """Keep ``result`` in :func:`results_file` (a rescore replaces the eval's scores); never fails the eval."""
    keep_json(results_file(store.home, result.eval_id), result.as_dict(), f"the scores of eval {result.eval_id}")


def keep_json(path: Path | None, data: dict[str, Any], what: str) -> None:
    """Write ``data`` to ``path`` as JSON, atomically (a reader never sees half a file); nothing for None. A
    failure to write is a warning naming ``what``: keeping a report never ends the work it reports."""
    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".part")
        partial.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
        partial.replace(path)
    except OSError as exc:
        logger.warning("could not keep {} in {}: {}", what, path, exc)


async def _evaluate(
    evalset: Evalset, store: RunStore, repeats: int, bar: float, concurrency: int, rescore: str | None,
    baseline: str | None, eval_id: str | None, judges: Judges, on_run: Callable[[str, str, bool], None] | None,
) -> EvalResult:
    notes: list[str] = []
    for spec in evalset.cases:  # a judge model nobody configured: said now, not after the runs
        for check in spec.expect:
            if check.kind == "judge":
                judges.check(check.args.get("model"))
    if eval_id is not None and not EVAL_ID.fullmatch(eval_id):
        raise UsageError(f"{eval_id!r} is not an eval id: 1 to 72 ASCII letters, digits, '_' or '-', "
                         "beginning with a letter or a digit (its runs are EVAL_ID.CASE.N)")
    if rescore is not None:
        planned = eval_runs(store, rescore)
        if not planned:
            raise UsageError(f"no runs of eval {rescore!r} in the store to rescore")
        known = {c.id for c in evalset.cases}
        dropped = sorted({case for case, _ in planned if case not in known})
        if dropped:
            notes.append(f"recorded cases no longer in the evalset, not scored: {', '.join(dropped)}")
        missing = sorted(known - {case for case, _ in planned})
        if missing:
            notes.append(f"cases of the evalset eval {rescore} never ran: {', '.join(missing)} (0 runs)")
        cases = await _score_all(store, evalset, planned, judges, concurrency)
        return EvalResult(evalset.name, rescore, bar, cases, rescored=True, found_runs=len(planned), notes=notes,
                          judge_live_calls=judges.live)
    parent = eval_runs(store, baseline) if baseline is not None else {}
    if baseline is not None and not parent:
        raise UsageError(f"no runs of eval {baseline!r} in the store to compare against")
    eval_id, made, found, planned = await _run_missing(evalset, store, repeats, concurrency, eval_id, parent, on_run)
    cases = await _score_all(store, evalset, planned, judges, concurrency)
    if baseline is not None:
        base_cases = await _score_all(store, evalset, parent, judges, concurrency)
        for case, base in zip(cases, base_cases, strict=True):
            case.baseline = base
    return EvalResult(evalset.name, eval_id, bar, cases, baseline_id=baseline, made_runs=made, found_runs=found,
                      notes=notes, judge_live_calls=judges.live)


def _baseline_run(parent: dict[tuple[str, int], str], case: str, number: int) -> str | None:
    if (case, number) in parent:
        return parent[(case, number)]
    same = sorted(k for k in parent if k[0] == case)
    return parent[same[(number - 1) % len(same)]] if same else None


async def _run_missing(
    evalset: Evalset, store: RunStore, repeats: int, concurrency: int, eval_id: str | None,
    parent: dict[tuple[str, int], str], on_run: Callable[[str, str, bool], None] | None,
) -> tuple[str, int, int, dict[tuple[str, int], str]]:
    """Run every planned run not finished yet; the eval id, runs made, runs found finished, the plan."""
    if eval_id is None:
        latest = _latest_eval(store, f"{evalset.slug}-{evalset.plan_key(repeats)}-")
        if latest is not None and not _complete(store, evalset, latest, repeats):
            eval_id = latest
            logger.info("eval {} did not finish: going on with it", latest)
        else:
            eval_id = new_eval_id(evalset, repeats)
            # a second eval of the same plan within the same second (a quick scripted team, or an A/B
            # run right after its baseline) must not take the first one's finished runs for its own
            taken, n = eval_id, 1
            while eval_runs(store, eval_id):
                n += 1
                eval_id = f"{taken}-{n}"
    planned = {(c.id, n): run_id_of(eval_id, c.id, n) for c in evalset.cases for n in range(1, repeats + 1)}
    todo = []
    found = 0
    for (case_id, number), run_id in planned.items():
        if read_run(store, run_id).finished:
            found += 1
            if on_run is not None:
                on_run(run_id, case_id, False)
        else:
            todo.append((evalset.case(case_id), number, run_id))
    if todo:
        source = TeamSource(evalset)
        limit = asyncio.Semaphore(concurrency)

        async def one(case: Case, number: int, run_id: str) -> None:
            async with limit:
                tags = {"eval": eval_id or "", "evalset": evalset.name, "case": case.id, "repeat": str(number)}
                binding = RunBinding(run_id, store, _baseline_run(parent, case.id, number), tags)
                await _run_one(source, store, case, binding)
                if on_run is not None:
                    on_run(run_id, case.id, True)

        await asyncio.gather(*(one(*item) for item in todo))
    return eval_id, len(todo), found, planned


def _complete(store: RunStore, evalset: Evalset, eval_id: str, repeats: int) -> bool:
    return all(read_run(store, run_id_of(eval_id, c.id, n)).finished
               for c in evalset.cases for n in range(1, repeats + 1))


__all__ = [
    "EVAL_ID", "TeamSource", "eval_runs", "new_eval_id", "results_file", "run_eval", "run_id_of", "save_result",
    "score_run",
]
