"""``rolecast optimize``: a team made better from its evalset, measured on cases it never learnt from.

1. The evalset's cases are split (seeded) into **train** and **dev**; ``--dev`` sets dev's share.
2. The **baseline** — the team as written — runs every case (an ordinary eval in the run store).
3. **Candidates** are tunings (:mod:`rolecast.tuning.surface`) made from what worked:

   * ``bootstrap`` (DSPy's BootstrapFewShot, for role teams): the calls of the baseline's *passing train*
     runs become demonstrations of the actions that made them (a prompt the action sent and the answer it
     got); candidates hold 1 … ``max_demos`` demonstrations per action;
   * ``instruct`` (GEPA-style reflection): a teacher model (``--teacher``: a service of the configuration,
     else the default model) reads the failing train runs' check reasons and rewrites one action's
     instruction; the rewrite keeps every ``{placeholder}`` of the template (else it is dropped unasked);
   * ``gepa``: both.

4. Each candidate is an eval of every case with its tuning applied, reusing the baseline's unchanged calls
   (``rolecast eval --baseline``: only the calls a tuning changes reach a model). Its train and dev pass
   rates are kept; the **winner** is the candidate with the best dev pass rate (ties: train, then fewer
   changes) that beats the baseline on dev — else the baseline (an empty tuning).
5. The winner's tuning is written to ``--out`` after every candidate (the best so far, always), and the
   report (``--json``): ``baseline``, ``best``, ``candidates`` (each: id, changed keys, train and dev pass
   rates with Wilson intervals, live and reused calls), and the paired comparison on dev.

Every eval has an id made from the optimization's plan and the candidate's tuning: the same command run
again (after kill -9) finds the finished evals and their runs in the store and redoes none of them.
``--budget-calls`` bounds the model calls that reach a model (live calls; reused ones are free): before each
eval the calls spent so far and those the eval may need (the baseline's calls per run, times its runs) are
checked; an eval that would pass the budget is not started, and the result so far is reported.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loguru import logger

from ..context import Context
from ..errors import UsageError
from ..eval.evalset import Case, Evalset, load_evalset
from ..eval.results import EvalResult, RunResult, wilson
from ..eval.runner import TeamSource, keep_json, run_eval
from ..runs import LLM_CALL, open_store
from ..runs.base import RunStore
from ..runs.binding import RunBinding, bind_next_team
from ..runs.in_memory import MemoryRunStore
from ..runs.log import new_run_id
from ..runs.requests import requests_of
from .surface import Demo, KeyTuning, Tuning, digest, surface, tuning_active

OPTIMIZERS = ("bootstrap", "instruct", "gepa")
#: how long a demonstration's prompt and answer may be (characters): a demo is for a small window too
MAX_DEMO_CHARS = 1500

TEACHER_PROMPT = """You improve the instruction of one step of a team of AI agents.
The step is the action {action}. Its instruction (a template: keep every {{placeholder}} exactly) is:
---
{instruction}
---
In these runs the team failed its checks, for these reasons:
{reasons}
Rewrite the instruction so that the step avoids these failures. Keep it short and concrete; keep every
{{placeholder}}. Answer with the new instruction only."""


@dataclass
class Candidate:
    """One tuning tried: what it changes, and how it scored."""

    id: str
    tuning: Tuning
    origin: str
    eval_id: str = ""
    train: tuple[int, int] = (0, 0)  # passed, runs
    dev: tuple[int, int] = (0, 0)
    live_calls: int = 0
    reused_calls: int = 0
    dev_cases: dict[str, bool] = field(default_factory=dict)
    #: checks passed and checks made on dev: the finer score that breaks a tie of pass rates (a tuning that
    #: makes the tester's tests right while the coder still fails the case is progress)
    dev_checks: tuple[int, int] = (0, 0)

    @property
    def check_rate(self) -> float:
        passed, made = self.dev_checks
        return passed / made if made else 0.0

    @property
    def changed(self) -> list[str]:
        return sorted(self.tuning.keys)

    def rate(self, split: str) -> float:
        passed, runs = self.train if split == "train" else self.dev
        return passed / runs if runs else 0.0

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "from": self.origin, "eval_id": self.eval_id,
                               "changed_keys": self.changed, "live_calls": self.live_calls,
                               "reused_calls": self.reused_calls}
        for split in ("train", "dev"):
            passed, runs = self.train if split == "train" else self.dev
            low, high = wilson(passed, runs)
            out[split] = {"passed": passed, "runs": runs, "pass_rate": round(self.rate(split), 4),
                          "wilson95": [round(low, 4), round(high, 4)]}
        out["dev"]["checks_passed"], out["dev"]["checks"] = self.dev_checks
        return out


@dataclass
class OptimizeResult:
    """What an optimization found: the baseline, every candidate, the winner, and the comparison on dev."""

    evalset: str
    train: list[str]
    dev: list[str]
    baseline: Candidate
    candidates: list[Candidate]
    best: Candidate
    spent_calls: int
    budget_calls: int | None
    stopped: str = ""
    #: the optimization's id (``opt-<evalset>-<plan>``: the same command again has the same one)
    id: str = ""
    #: what the winner changes, per key: the text as written and as tuned, and its demonstrations
    changes: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        base, best = self.baseline, self.best
        better = sum(1 for c, ok in best.dev_cases.items() if ok and not base.dev_cases.get(c))
        worse = sum(1 for c, ok in best.dev_cases.items() if not ok and base.dev_cases.get(c))
        return {
            "id": self.id, "evalset": self.evalset, "split": {"train": self.train, "dev": self.dev},
            "baseline": base.as_dict(), "best": best.as_dict(),
            "candidates": [c.as_dict() for c in self.candidates],
            "paired_dev": {"improved": better, "worsened": worse, "cases": len(best.dev_cases)},
            "live_calls": self.spent_calls, "budget_calls": self.budget_calls, "stopped": self.stopped,
            "changes": self.changes,
        }


def winner_changes(best: Candidate, known: dict[str, str]) -> list[dict[str, Any]]:
    """Per key the winner tunes: ``key``, ``before`` (the text as written), ``after`` (the tuned text, or the
    same when only demonstrations are added) and ``demos`` (each ``input`` and ``output``)."""
    return [{"key": key, "before": known.get(key, ""),
             "after": tuned.text if tuned.text is not None else known.get(key, ""),
             "demos": [demo.as_dict() for demo in tuned.demos]}
            for key, tuned in sorted(best.tuning.keys.items())]


def report_file(home: Path | None, optimization_id: str) -> Path | None:
    """Where an optimization's report is kept beside the store, rewritten after every candidate (the
    studio's Evals page reads it): ``<store folder>/optimizations/<id>.json``; None without a folder."""
    return None if home is None else home / "optimizations" / f"{optimization_id}.json"


def save_report(store: RunStore, result: OptimizeResult, running: bool) -> None:
    """Keep ``result`` in :func:`report_file` (atomically); a failure to write is a warning, never the
    optimization's end."""
    keep_json(report_file(store.home, result.id), {**result.as_dict(), "running": running},
              f"the report of optimization {result.id}")


def split_cases(evalset: Evalset, dev_share: float, seed: int) -> tuple[list[str], list[str]]:
    """Train and dev case ids: a seeded shuffle; dev gets ``dev_share`` of the cases (at least one each)."""
    ids = [c.id for c in evalset.cases]
    if len(ids) < 2:
        raise UsageError(f"optimize needs at least 2 cases (a train and a dev one); {evalset.name!r} has {len(ids)}")
    if not 0.0 < dev_share < 1.0:
        raise UsageError(f"the dev share is between 0 and 1, not {dev_share!r}")
    shuffled = ids[:]
    random.Random(seed).shuffle(shuffled)
    n_dev = min(len(ids) - 1, max(1, round(len(ids) * dev_share)))
    dev = sorted(shuffled[:n_dev], key=ids.index)
    return [i for i in ids if i not in dev], dev


def _plan_id(evalset: Evalset, train: list[str], seed: int) -> str:
    text = json.dumps([evalset.name, evalset.plan_key(evalset.repeat), train, seed])
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def _tuning_id(tuning: Tuning) -> str:
    return hashlib.sha256(tuning.dump().encode()).hexdigest()[:8]


def _score(candidate: Candidate, result: EvalResult, train: list[str], dev: list[str]) -> None:
    by_case = {case.id: case for case in result.cases}
    for split, ids in (("train", train), ("dev", dev)):
        runs = [run for i in ids for run in by_case[i].runs]
        value = (sum(r.passed for r in runs), len(runs))
        if split == "train":
            candidate.train = value
        else:
            candidate.dev = value
    candidate.dev_cases = {i: all(r.passed for r in by_case[i].runs) for i in dev}
    checks = [c for i in dev for r in by_case[i].runs for c in r.checks]
    candidate.dev_checks = (sum(c.passed for c in checks), len(checks))
    candidate.live_calls = result.total("live_calls") + result.judge_live_calls
    candidate.reused_calls = result.total("reused_calls")
    candidate.eval_id = result.eval_id


#: the arguments of a check that name the roles whose work it judges
ROLE_ARGS = ("role", "code_from", "tests_from")


def credited_roles(case: Case, run: RunResult) -> set[str] | None:
    """The roles whose work passed a check of ``run`` and failed none that judges it alone: their calls are
    demonstrations even when another role's check failed (a tester's tests that pass against a correct
    solution teach a tester, whatever the coder did). A failed check that names two roles (Bob's tests
    against Alice's code) blames neither: either may be wrong. None: the whole run passed."""
    if run.passed:
        return None
    checks = run.checks[-len(case.expect):] if case.expect else []
    if len(checks) != len(case.expect) or any(c.kind == "run" for c in run.checks):
        return set()  # the run itself failed: nothing in it is credited
    passed_one: set[str] = set()
    failed: set[str] = set()
    for check, outcome in zip(case.expect, checks, strict=True):
        names = {name for arg in ROLE_ARGS if isinstance(name := check.args.get(arg), str)}
        if outcome.passed:
            passed_one |= names
        elif len(names) == 1:  # a failed check of two roles' work (Bob's tests on Alice's code) blames neither
            failed |= names
    return passed_one - failed


def demos_of(store: RunStore, result: EvalResult, train: list[str],
             evalset: Evalset | None = None) -> dict[str, list[Demo]]:
    """Demonstrations from the train runs of ``result``: per action class, the (prompt, answer) of each of
    its completion calls in a passing run, or made by a role that passed every check of its own work
    (:func:`credited_roles`, with ``evalset``), in order (the newest run's last)."""
    found: dict[str, list[Demo]] = {}
    cases = {c.id: c for c in evalset.cases} if evalset is not None else {}
    for case in result.cases:
        if case.id not in train:
            continue
        for run in case.runs:
            credited = credited_roles(cases[case.id], run) if case.id in cases else None if run.passed else set()
            if credited is not None and not credited:
                continue
            events = [e for e in store.events(run.run_id, [LLM_CALL]) if e.data.get("action") and
                      not e.data.get("error") and (credited is None or e.role in credited)]
            for event, request in zip(events, requests_of(store, events), strict=True):
                answer = str((event.data.get("response") or {}).get("text") or "")
                prompts = [m for m in request.messages if m.get("role") == "user"]
                if request.kind != "complete" or not prompts or not answer:
                    continue
                asked = str(prompts[-1].get("content") or "")
                if len(asked) + len(answer) > MAX_DEMO_CHARS:
                    continue
                action = str(event.data["action"])
                demos = found.setdefault(action, [])
                if all(d.input != asked for d in demos):
                    demos.append(Demo(asked, answer, run.run_id))
    return found


def bootstrap_candidates(demos: dict[str, list[Demo]], known: dict[str, str], max_demos: int) -> list[Tuning]:
    """Tunings of 1 … ``max_demos`` demonstrations for each action that has some (and is a key of the team)."""
    tunings: list[Tuning] = []
    for k in range(1, max_demos + 1):
        keys = {}
        for action, found in sorted(demos.items()):
            key = f"action:{action}.demos"
            if key in known and found:
                keys[key] = KeyTuning(demos=tuple(found[:k]), origin="bootstrap")
        if keys and (not tunings or any(len(v.demos) == k for v in keys.values())):
            tunings.append(Tuning(keys))
    return tunings


async def instruct_candidates(
    teacher: Any, result: EvalResult, train: list[str], known: dict[str, str], limit: int,
) -> list[Tuning]:
    """Tunings that each rewrite one action's instruction, proposed by ``teacher`` from the failing train
    runs' reasons; a rewrite that loses one of the template's ``{placeholders}`` is dropped."""
    reasons = [f"- {c.check}: {c.reason}"[:300] for case in result.cases if case.id in train
               for run in case.runs for c in run.failures][:12]
    if not reasons:
        return []
    tunings: list[Tuning] = []
    for key, text in sorted(known.items()):
        if not key.endswith(".instruction") or not text.strip() or len(tunings) >= limit:
            continue
        action = key[len("action:"):-len(".instruction")]
        prompt = TEACHER_PROMPT.format(action=action, instruction=text, reasons="\n".join(reasons))
        proposal = (await teacher.ask(prompt, settings={"max_tokens": 400})).strip().strip("`").strip()
        wanted = set(re.findall(r"{(\w*)}", text))
        if not proposal or set(re.findall(r"{(\w*)}", proposal)) != wanted or proposal == text.strip():
            logger.info("optimize: the teacher's rewrite of {} was dropped (placeholders changed or none)", key)
            continue
        tunings.append(Tuning({key: KeyTuning(text=proposal, source=digest(text), origin="teacher")}))
    return tunings


async def optimize(
    evalset: Evalset | str | Path, out: str | Path, *, store: Any = None, dev: float = 0.34, seed: int = 0,
    optimizer: str = "bootstrap", budget_calls: int | None = None, max_demos: int = 3, teacher: Any = None,
    on_candidate: Callable[[Candidate, Candidate], None] | None = None,
) -> OptimizeResult:
    """Optimize ``evalset``'s team; the winner's tuning is written to ``out`` (see the module docstring).

    ``teacher``: a model (or a service name) that proposes instructions (``instruct``/``gepa``; default: the
    configured default model); ``on_candidate(candidate, best_so_far)``: told after each candidate."""
    if optimizer not in OPTIMIZERS:
        raise UsageError(f"optimizer is one of {', '.join(OPTIMIZERS)}, not {optimizer!r}")
    if budget_calls is not None and (isinstance(budget_calls, bool) or budget_calls < 1):
        raise UsageError(f"budget_calls is a whole number >= 1, not {budget_calls!r}")
    if not isinstance(evalset, Evalset):
        evalset = load_evalset(evalset)
    train, dev_ids = split_cases(evalset, dev, seed)
    plan = _plan_id(evalset, train, seed)
    opened = store if isinstance(store, RunStore) else open_store(store)
    if opened is None:
        raise UsageError("optimize needs a run store (its evals are ordinary durable runs): give store=PATH")
    spent = 0
    stopped = ""

    async def evaluate(tuning: Tuning, label: str, baseline: str | None) -> EvalResult:
        nonlocal spent
        eval_id = f"opt-{evalset.slug[:24]}-{plan}-{label}-{_tuning_id(tuning)}"
        made: set[str] = set()
        with tuning_active(tuning):
            result = await run_eval(evalset, store=opened, eval_id=eval_id, baseline=baseline,
                                    on_run=lambda run_id, case, now: made.add(run_id) if now else None)
        # the calls made now: a run found finished (an optimization started again) cost nothing this time
        spent += sum(run.record.live_calls for case in result.cases for run in case.runs if run.run_id in made)
        spent += result.judge_live_calls
        return result

    try:
        base = Candidate("baseline", Tuning(), "as written")
        base_result = await evaluate(base.tuning, "base", None)
        _score(base, base_result, train, dev_ids)
        per_run = max(1, base.live_calls + base.reused_calls) / max(1, len(base_result.cases) * evalset.repeat)
        best = base
        best_tuning_written(out, best, evalset)
        known = _surface_of(evalset)
        candidates: list[Candidate] = []

        def reported(running: bool) -> OptimizeResult:  # (kept beside the store after each candidate)
            made = OptimizeResult(evalset.name, train, dev_ids, base, candidates, best, spent, budget_calls,
                                  stopped, f"opt-{evalset.slug[:24]}-{plan}", winner_changes(best, known))
            save_report(opened, made, running)
            return made

        reported(running=True)
        tunings: list[tuple[Tuning, str]] = []
        if optimizer in ("bootstrap", "gepa"):
            demos = demos_of(opened, base_result, train, evalset)
            tunings += [(t, "bootstrap") for t in bootstrap_candidates(demos, known, max_demos)]
        if optimizer in ("instruct", "gepa"):
            model = teacher if teacher is not None and not isinstance(teacher, str) else \
                Context().llm(teacher) if isinstance(teacher, str) else Context().llm()
            tunings += [(t, "teacher") for t in await instruct_candidates(model, base_result, train, known, 3)]
        for i, (tuning, origin) in enumerate(tunings, 1):
            need = int(per_run * len(base_result.cases) * evalset.repeat)
            if budget_calls is not None and spent + need > budget_calls:
                stopped = f"budget: {spent} live calls spent, the next candidate may need {need} of {budget_calls}"
                break
            candidate = Candidate(f"c{i}", tuning, origin)
            _score(candidate, await evaluate(tuning, f"c{i}", base.eval_id), train, dev_ids)
            candidates.append(candidate)
            if _better(candidate, best, base):
                best = candidate
                best_tuning_written(out, best, evalset)
            reported(running=True)
            if on_candidate is not None:
                on_candidate(candidate, best)
        return reported(running=False)
    finally:
        if not isinstance(store, RunStore):
            opened.close()


def _better(candidate: Candidate, best: Candidate, base: Candidate) -> bool:
    """Whether ``candidate`` beats the best so far; a winner beats the team as written on the cases it never
    learnt from (dev): more runs passed, or as many and more of their checks."""
    if (candidate.rate("dev"), candidate.check_rate) <= (base.rate("dev"), base.check_rate):
        return False
    return (candidate.rate("dev"), candidate.check_rate, candidate.rate("train"), -len(candidate.changed)) > \
        (best.rate("dev"), best.check_rate, best.rate("train"), -len(best.changed))


def best_tuning_written(out: str | Path, best: Candidate, evalset: Evalset) -> None:
    tuning = Tuning(dict(best.tuning.keys), str(evalset.path or evalset.name))
    tuning.save(out)


def _surface_of(evalset: Evalset) -> dict[str, str]:
    """The tunable keys of the evalset's team (built once, run never)."""
    source = TeamSource(evalset)
    target = getattr(source.module, source.attribute)
    # built on a store in memory: reading the surface writes no run, and waits on no store's lock
    with bind_next_team(RunBinding(new_run_id(), MemoryRunStore())):
        team = target() if callable(target) and not hasattr(target, "run_id") else target
    try:
        return surface(team)
    finally:
        close = getattr(team, "close", None)
        if callable(close):
            close()


__all__ = ["OPTIMIZERS", "Candidate", "OptimizeResult", "bootstrap_candidates", "demos_of", "optimize", "report_file",
           "split_cases", "winner_changes"]
