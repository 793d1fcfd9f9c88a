"""The checks of an evalset, each a function of a finished run's record: pass or fail, and why.

Every check reads only the :class:`~rolecast.eval.record.RunRecord` (what the store holds), so
scoring a run again (``--rescore``) never needs the team. Two run model-written code, in
rolecast's sandbox (``actions.tools.sandbox``: a separate confined process tree, never this
process); the judge (:mod:`rolecast.eval.judge`) asks a model.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from .evalset import Check
from .record import RunRecord, Said

#: where the sandbox lives: in ``actions/tools`` (above the kernel), found by name when a check first
#: runs code — as a provider is found by name — so importing rolecast stays light and one-way
SANDBOX_MODULE = "actions.tools.sandbox"
#: the harness that runs tests against code in the sandbox (results on a channel the code cannot write)
HARNESS_MODULE = "actions.tools.harness"
DEFAULT_TIMEOUT = 20.0


@dataclass
class CheckResult:
    """One check of one run."""

    check: str  # its label, e.g. "max_calls(limit=12)"
    passed: bool
    reason: str
    kind: str = ""
    #: from 0 to 1: a ``python`` check's score, else 1.0 for a pass and 0.0 for a failure
    score: float | None = None

    def __post_init__(self) -> None:
        if self.score is None:
            self.score = 1.0 if self.passed else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {"check": self.check, "kind": self.kind, "passed": self.passed, "score": self.score,
                "reason": self.reason}


def code_of(text: str) -> str:
    """The code of a model's answer: its first fenced block (an unclosed fence runs to the end), else
    the whole text. Linear time: ``str.find`` only."""
    start = text.find("```")
    if start < 0:
        return text.strip()
    line_end = text.find("\n", start + 3)
    body = line_end + 1 if line_end >= 0 else len(text)
    end = text.find("```", body)
    return text[body:end if end >= 0 else len(text)].strip()


def _shown(text: str, limit: int = 60) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")


# ------------------------------------------------------------------ what the run said and did
def check_contains(record: RunRecord, args: dict[str, Any]) -> tuple[bool, str]:
    role = args.get("role")
    said = record.said_by(role)
    text = args["text"]
    fold = (lambda s: s) if args.get("case_sensitive", True) else str.lower
    where = f"{role}'s messages" if role else "the messages"
    if not said:
        return False, f"{role} said nothing" if role else "no role said anything"
    if any(fold(text) in fold(m.content) for m in said):
        return True, f"{_shown(text)} is in {where}"
    return False, f"{_shown(text)} is not in {where} ({len(said)} message(s); the last: {_shown(said[-1].content)})"


def _sequence_matches(actual: list[str], wanted: list[str], order: str) -> tuple[bool, str]:
    """ADK's trajectory match: ``exact`` (the sequence, consecutive repeats merged, is the list),
    ``in_order`` (the list is a subsequence of it), ``any_order`` (every name is in it)."""
    merged = [name for i, name in enumerate(actual) if i == 0 or actual[i - 1] != name]
    if order == "exact":
        return merged == wanted, f"the sequence was {merged}"
    if order == "in_order":
        it = iter(merged)
        ok = all(any(name == seen for seen in it) for name in wanted)
        return ok, f"the sequence was {merged}"
    missing = [name for name in wanted if name not in actual]
    return not missing, f"missing {missing}; the sequence was {merged}" if missing else f"the sequence was {merged}"


def check_roles_spoke(record: RunRecord, args: dict[str, Any]) -> tuple[bool, str]:
    wanted = args["roles"]
    names = set(wanted)
    # a role is named by its name or its profile, whichever the evalset uses
    actual = [m.sender if m.sender in names or m.profile not in names else m.profile
              for m in record.messages if m.sender != "user"]
    ok, seen = _sequence_matches(actual, wanted, args["order"])
    return ok, f"{wanted} spoke ({args['order']}): {seen}" if ok else f"not {wanted} ({args['order']}): {seen}"


def check_actions_ran(record: RunRecord, args: dict[str, Any]) -> tuple[bool, str]:
    wanted = args["actions"]
    actual = [m.action for m in record.messages if m.sender != "user"]
    ok, seen = _sequence_matches(actual, wanted, args["order"])
    return ok, f"{wanted} ran ({args['order']}): {seen}" if ok else f"not {wanted} ({args['order']}): {seen}"


def check_max_calls(record: RunRecord, args: dict[str, Any]) -> tuple[bool, str]:
    limit = args["limit"]
    return record.calls <= limit, f"{record.calls} model call(s), {'within' if record.calls <= limit else 'over'} " \
                                  f"the limit {limit}"


def check_max_cost(record: RunRecord, args: dict[str, Any]) -> tuple[bool, str]:
    limit = args["limit"]
    ok = record.cost <= limit
    return ok, f"cost ${record.cost:.4f}, {'within' if ok else 'over'} the limit ${limit}"


# ------------------------------------------------------------------ code run in the sandbox
async def run_in_sandbox(code: str, timeout: float) -> Any:
    """``actions.tools.sandbox.run_python(code)``: the result (stdout, stderr, ok, timed_out)."""
    sandbox = importlib.import_module(SANDBOX_MODULE)
    return await sandbox.run_python(code, timeout=timeout)


def _last_of(record: RunRecord, role: str | None = None, action: str | None = None) -> Said | None:
    for said in reversed(record.messages):
        if said.sender == "user":
            continue
        if (role is None or role in (said.sender, said.profile)) and (action is None or said.action == action):
            return said
    return None


def _failure(result: Any) -> str:
    if result.timed_out:
        return "timed out"
    lines = [line for line in str(result.stderr).strip().splitlines() if line.strip()]
    return lines[-1][:200] if lines else f"exit status {result.returncode}"


async def check_python_runs(record: RunRecord, args: dict[str, Any]) -> tuple[bool, str]:
    said = _last_of(record, args.get("role"), args.get("action"))
    who = " / ".join(str(args[k]) for k in ("role", "action") if k in args)
    if said is None:
        return False, f"{who} wrote nothing"
    code = code_of(said.content)
    if not code:
        return False, f"{who}'s last message holds no code"
    try:
        compile(code, "<code>", "exec")
    except (SyntaxError, ValueError) as exc:
        return False, f"{who}'s code does not parse: {getattr(exc, 'msg', exc)} (line {getattr(exc, 'lineno', '?')})"
    result = await run_in_sandbox(code, float(args.get("timeout", DEFAULT_TIMEOUT)))
    if result.ok:
        return True, f"{who}'s code ran in the sandbox"
    return False, f"{who}'s code fails when run: {_failure(result)}"


async def run_tests(code: str, tests: str, timeout: float) -> tuple[dict[str, str] | None, Any]:
    """``actions.tools.harness.run_tests``: each test's outcome against ``code``, run in the sandbox (found by
    name, as the sandbox is: the harness lives beside it, above the kernel)."""
    harness = importlib.import_module(HARNESS_MODULE)
    return await harness.run_tests(code, tests, timeout)


async def check_tests_pass(record: RunRecord, args: dict[str, Any]) -> tuple[bool, str]:
    if "code" in args:  # the evalset author's correct solution: the check measures the team's tests
        code = args["code"]
    else:
        code_msg = _last_of(record, args["code_from"])
        if code_msg is None:
            return False, f"{args['code_from']} wrote nothing"
        code = code_of(code_msg.content)
    against = "the reference solution" if "code" in args else "the code"
    if "tests_from" in args:
        tests_msg = _last_of(record, args["tests_from"])
        if tests_msg is None:
            return False, f"{args['tests_from']} wrote nothing"
        tests, whose = code_of(tests_msg.content), f"{args['tests_from']}'s"
    else:  # the evalset author's reference tests (``tests:``, or ``tests_file:`` read when the evalset loaded)
        tests, whose = args["tests"], "the reference"
    results, result = await run_tests(code, tests, float(args.get("timeout", DEFAULT_TIMEOUT)))
    if results is None:
        return False, f"{whose} tests could not be run against {against}: {_failure(result)}"
    if not results:
        return False, f"{whose} tests hold no test function (def test_...) and no top-level assert"
    failed = {name: why for name, why in results.items() if why != "passed"}
    if failed:
        name, why = next(iter(failed.items()))
        return False, f"{len(failed)} of {len(results)} test(s) failed ({whose} tests; first: {name}: {why})"
    return True, f"{len(results)} test(s) passed against {against} ({whose} tests)"


# ------------------------------------------------------------------ the evalset author's own function
def _author_function(file: str, function: str) -> Callable[..., Any]:
    """``attr`` of the module in ``file`` (a file of the evalset's folder, checked when the evalset was
    read), loaded from that file under a private name: nothing on ``sys.path`` is consulted."""
    spec = importlib.util.spec_from_file_location(f"_rolecast_evaluator_{abs(hash(file)):x}", file)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {file}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    attr = function.rsplit(":", 1)[1]
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise AttributeError(f"{file} has no function {attr!r}")
    return fn


def score_of(value: Any) -> tuple[float, str]:
    """A ``python`` check's answer as (score, reason): a bool, a number from 0 to 1, or either with a reason."""
    reason = ""
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], str):
        value, reason = value
    if isinstance(value, bool):
        return (1.0 if value else 0.0), reason
    if isinstance(value, (int, float)) and 0.0 <= value <= 1.0:
        return float(value), reason
    raise TypeError(f"returned {value!r:.80}; a check function returns a bool, a score from 0 to 1, "
                    f"or (either, 'a reason')")


async def check_python(record: RunRecord, args: dict[str, Any]) -> tuple[bool, str, float]:
    fn = _author_function(args["file"], args["function"])
    value = fn(record)
    if inspect.isawaitable(value):
        value = await value
    score, reason = score_of(value)
    passed = score >= args["threshold"]
    shown = f"score {score:.2f} {'>=' if passed else '<'} threshold {args['threshold']:.2f}"
    return passed, f"{args['function']}: {shown}" + (f": {reason}" if reason else ""), score


PLAIN: dict[str, Callable[[RunRecord, dict[str, Any]], tuple[bool, str]]] = {
    "contains": check_contains, "roles_spoke": check_roles_spoke, "actions_ran": check_actions_ran,
    "max_calls": check_max_calls, "max_cost": check_max_cost,
}
SANDBOXED: dict[str, Callable[[RunRecord, dict[str, Any]], Awaitable[tuple[bool, str]]]] = {
    "python_runs": check_python_runs, "tests_pass": check_tests_pass,
}


async def run_check(record: RunRecord, check: Check) -> CheckResult:
    """Score ``record`` by one non-judge check (an error in the check is a failure that says so)."""
    score: float | None = None
    try:
        if check.kind == "python":
            passed, reason, score = await check_python(record, check.args)
        elif check.kind in PLAIN:
            passed, reason = PLAIN[check.kind](record, check.args)
        else:
            passed, reason = await SANDBOXED[check.kind](record, check.args)
    except Exception as exc:  # a sandbox that cannot start, an author's function that raises: the check fails
        passed, reason, score = False, f"the check could not run: {type(exc).__name__}: {exc}", 0.0
    return CheckResult(check.label, passed, reason, check.kind, score)


__all__ = ["CheckResult", "code_of", "run_check", "run_in_sandbox", "run_tests", "score_of"]
