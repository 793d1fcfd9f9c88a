"""When the multi-agent example's artifacts are well formed, and whether they work.

The checks of form (:func:`code_problem`, :func:`test_problem`) only *parse* model-written
code (``ast.parse``) and need nothing but the standard library (bench/ uses them too).
:func:`verdicts` goes further for the example's final summary: it runs the code, and the
tests against it, in rolecast's sandbox — never in this process — and says per artifact
whether it passed, whatever the model wrote.
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass
from typing import Any


def code_problem(code: str) -> str | None:
    """Why ``code`` is not a usable artifact (it must parse and define a function), or None."""
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        return f"the code does not parse: {exc.msg} (line {exc.lineno})"
    if not any(isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) for node in tree.body):
        return "the code defines no function: write `def name(...):` with a body"
    return None


def function_names(code: str) -> set[str]:
    """The top-level functions ``code`` defines (empty when it does not parse)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return set()
    return {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def test_problem(tests: str, functions: set[str]) -> str | None:
    """Why ``tests`` are not usable pytest tests of ``functions`` (parse, ``def test_…``, call one), or None."""
    try:
        tree = ast.parse(tests)
    except SyntaxError as exc:
        return f"the tests do not parse: {exc.msg} (line {exc.lineno})"
    test_fns = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test")]
    if not test_fns:
        return "there is no test function: write `def test_...():` with an assert"
    called = {
        node.func.id for fn in test_fns for node in ast.walk(fn)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    }
    if functions and not called & functions:
        return f"no test calls the function under test ({', '.join(sorted(functions))})"
    return None


# ------------------------------------------------------------------ verdicts for the summary
@dataclass
class Verdict:
    """One artifact of the run and whether it passed its check, with what was found."""

    artifact: str  # "code", "tests", "review"
    author: str
    passed: bool
    detail: str

    def line(self) -> str:
        verdict = "PASSED" if self.passed else "FAILED"
        return f"{self.artifact:<7} ({self.author or 'nobody'}): {verdict} — {self.detail}"


# runs in the sandbox after the code and the tests: each test_ function called, the outcome printed as JSON
_RUN_TESTS = """
import json as _json
_results = {}
for _name, _fn in list(globals().items()):
    if _name.startswith("test") and callable(_fn):
        try:
            _fn()
            _results[_name] = "passed"
        except BaseException as _exc:
            _results[_name] = f"{type(_exc).__name__}: {_exc}"[:200]
print("@@results@@" + _json.dumps(_results))
"""


def _last(history: list[Any], action: str) -> Any:
    return next((m for m in reversed(history) if str(m.cause_by).endswith("." + action)), None)


def _failure(stderr: str) -> str:
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    return lines[-1][:200] if lines else "no error output"


async def verdicts(history: list[Any], timeout: float = 20.0) -> list[Verdict]:
    """Per artifact of a coder/tester/reviewer run: the code (parses, defines a function, runs),
    the tests (parse, test the function, and pass when run against the code), the review (given)."""
    from actions import parse_code
    from actions.tools.sandbox import run_python

    out: list[Verdict] = []
    code_msg = _last(history, "SimpleWriteCode")
    code = parse_code(code_msg.content) if code_msg is not None else ""
    functions = function_names(code)
    if code_msg is None:
        out.append(Verdict("code", "", False, "no code was written"))
    elif (why := code_problem(code)) is not None:
        out.append(Verdict("code", code_msg.sent_from, False, why))
    else:
        ran = await run_python(code, timeout=timeout)
        shown = ", ".join(f"{f}()" for f in sorted(functions))
        out.append(Verdict("code", code_msg.sent_from, ran.ok,
                           f"parses, defines {shown}, runs" if ran.ok else f"defines {shown} but fails when run: "
                           f"{'timed out' if ran.timed_out else _failure(ran.stderr)}"))
    tests_msg = _last(history, "SimpleWriteTest")
    tests = parse_code(tests_msg.content) if tests_msg is not None else ""
    if tests_msg is None:
        out.append(Verdict("tests", "", False, "no tests were written"))
    elif (why := test_problem(tests, functions)) is not None:
        out.append(Verdict("tests", tests_msg.sent_from, False, why))
    else:
        ran = await run_python(f"{code}\n\n{tests}\n{_RUN_TESTS}", timeout=timeout)
        marker = next((line for line in ran.stdout.splitlines() if line.startswith("@@results@@")), None)
        if marker is None:
            why = "timed out" if ran.timed_out else _failure(ran.stderr)
            out.append(Verdict("tests", tests_msg.sent_from, False, f"parse, but could not be run: {why}"))
        else:
            results: dict[str, str] = json.loads(marker[len("@@results@@"):])
            failed = {name: why for name, why in results.items() if why != "passed"}
            detail = f"{len(results)} test(s) ran against the code: {len(results) - len(failed)} passed"
            if failed:
                name, why = next(iter(failed.items()))
                detail += f", {len(failed)} failed (first: {name}: {why})"
            out.append(Verdict("tests", tests_msg.sent_from, bool(results) and not failed, detail))
    review = _last(history, "SimpleWriteReview")
    given = review is not None and bool(review.content.strip())
    out.append(Verdict("review", review.sent_from if review is not None else "", given,
                       f"given ({len(review.content.split())} words)" if given else "no review was given"))
    return out
