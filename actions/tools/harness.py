"""Run tests against model-written code in the sandbox, with results the code cannot forge.

:func:`run_tests` is what ``tests_pass`` (``rolecast eval``) and :class:`~actions.coding.RunCode` use: the
code, then the tests, run in one namespace in rolecast's sandbox (:func:`~actions.tools.sandbox.run_python`:
a separate confined process, never the framework's); each ``test_`` function the tests define is called
(top-level asserts count as one test; ``pytest.mark.parametrize`` makes one per case; ``import pytest``
gets a stand-in with its basics, as the sandbox sees no site-packages) and its outcome — "passed", or the
error with the failing line — comes back on a line keyed by a nonce the code never sees.
"""

from __future__ import annotations

import json
import secrets
from typing import Any

from .sandbox import run_python

# The harness run in the sandbox: the code, then the tests, in one namespace; each test_ function the tests
# defined is called. The outcome goes out on a channel the code cannot write: a line keyed by a nonce the
# harness takes out of its environment before any of the code runs, written through the stdout handle it
# saved first (the code may print anything, replace print, sys.stdout or json: none of it is read as
# results). A nonce-less "@@results@@" line the code prints is just output. Code that kills the process,
# or leaves before the tests ran, leaves no results: the check fails. (What stays open: code written to
# dig the nonce out of the harness's own memory — the sandbox bounds what that could reach.)
_HARNESS = """
import json as _json, linecache as _linecache, os as _os, sys as _sys, traceback as _traceback
@PYTEST@
def _rolecast_harness(code, tests):
    nonce = _os.environ.pop("ROLECAST_RESULTS_NONCE", "")
    write, fd, dumps, frames = _os.write, _sys.__stdout__.fileno(), _json.dumps, _traceback.extract_tb
    for name, source in (("<code>", code), ("<tests>", tests)):  # (tracebacks show the failing line)
        _linecache.cache[name] = (len(source), None, source.splitlines(True), name)
    def failure(exc):
        where = [f for f in frames(exc.__traceback__) if f.filename in ("<code>", "<tests>")]
        line = f" (at {where[-1].filename} line {where[-1].lineno}: {where[-1].line})" if where else ""
        return f"{type(exc).__name__}: {exc}"[:200] + line[:200]
    results = {}
    namespace = {"__name__": "__main__", "__builtins__": __builtins__}
    exec(compile(code, "<code>", "exec"), namespace)
    if "pytest" not in _sys.modules:  # the sandbox sees no site-packages: tests "using pytest" get its basics
        _sys.modules["pytest"] = _rolecast_pytest()
    before = {name: value for name, value in namespace.items() if name.startswith("test")}
    try:
        exec(compile(tests, "<tests>", "exec"), namespace)
    except BaseException as exc:
        results["<tests' top level>"] = failure(exc)
    else:
        ran_top = any(not line.startswith(("def ", "class ", "import ", "from ", "#", " ", "\t", "@"))
                      for line in tests.splitlines() if line.strip())
        for name, fn in list(namespace.items()):
            if not (name.startswith("test") and callable(fn)) or before.get(name) is fn:
                continue
            params = getattr(fn, "_rolecast_params", None)  # @pytest.mark.parametrize: one result per case
            calls = [(name, {})] if params is None else [
                (f"{name}[{i}]", dict(zip(params[0], values if len(params[0]) > 1 else (values,))))
                for i, values in enumerate(params[1])]
            for key, kwargs in calls:
                try:
                    fn(**kwargs)
                    results[key] = "passed"
                except BaseException as exc:
                    results[key] = failure(exc)
        if not results and ran_top:
            results["<tests' top level>"] = "passed"
    try:
        _sys.stdout.flush()  # what the code printed first, then the results line
    except BaseException:
        pass
    write(fd, ("\\n@@results-" + nonce + "@@" + dumps(results) + "\\n").encode())
_rolecast_harness(@CODE@, @TESTS@)
"""
# What a test "using pytest" needs of it, where pytest itself cannot be imported (the sandbox keeps the
# framework's packages out of reach): raises (with match), approx, fail, skip, mark.parametrize; other marks
# and fixture decorators leave the function as it is (a test that asks for a fixture fails, saying so).
_PYTEST = """
def _rolecast_pytest():
    import math, re, types
    pytest = types.ModuleType("pytest")
    class RaisesContext:
        def __init__(self, expected, match):
            self.expected, self.match, self.value = expected, match, None
        def __enter__(self):
            return self
        def __exit__(self, kind, value, tb):
            if kind is None:
                raise AssertionError(f"DID NOT RAISE {self.expected}")
            if not issubclass(kind, self.expected):
                return False
            if self.match is not None and not re.search(self.match, str(value)):
                raise AssertionError(f"the pattern {self.match!r} is not in {str(value)!r}")
            self.value = value
            return True
    def raises(expected, *args, match=None, **kwargs):
        context = RaisesContext(expected, match)
        if args:
            with context:
                args[0](*args[1:], **kwargs)
        return context
    class approx:
        def __init__(self, expected, rel=None, abs=None):
            self.expected, self.rel, self.abs = expected, rel, abs
        def __eq__(self, other):
            if isinstance(self.expected, (list, tuple)):
                return len(other) == len(self.expected) and all(
                    approx(e, self.rel, self.abs) == o for e, o in zip(self.expected, other))
            return math.isclose(other, self.expected, rel_tol=1e-6 if self.rel is None else self.rel,
                                abs_tol=1e-12 if self.abs is None else self.abs)
        def __repr__(self):
            return f"approx({self.expected!r})"
    class Skipped(Exception):
        pass
    def fail(reason=""):
        raise AssertionError(reason)
    def skip(reason=""):
        raise Skipped(reason)
    def keep(*args, **kwargs):
        return args[0] if len(args) == 1 and callable(args[0]) and not kwargs else (lambda fn: fn)
    class Mark:
        def parametrize(self, names, values, **kwargs):
            names = [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)
            def mark(fn):
                fn._rolecast_params = (names, list(values))
                return fn
            return mark
        def __getattr__(self, name):
            return keep
    pytest.raises, pytest.approx, pytest.fail, pytest.skip, pytest.mark = raises, approx, fail, skip, Mark()
    pytest.fixture = keep
    return pytest
"""
_RESULTS = "@@results-{nonce}@@"


async def run_tests(code: str, tests: str, timeout: float) -> tuple[dict[str, str] | None, Any]:
    """Run ``tests`` against ``code`` in the sandbox: each test's outcome ("passed" or the error), or None
    when the harness left none (the code failed at import, or ended the process); and the sandbox result."""
    nonce = secrets.token_hex(16)
    program = _HARNESS.replace("@PYTEST@", _PYTEST).replace("@CODE@", repr(code)).replace("@TESTS@", repr(tests))
    result = await run_python(program, timeout=timeout,
                                      env={"ROLECAST_RESULTS_NONCE": nonce})
    marker = _RESULTS.format(nonce=nonce)
    found = [line for line in str(result.stdout).splitlines() if line.startswith(marker)]
    if len(found) != 1:
        return None, result
    try:
        results = json.loads(found[0][len(marker):])
    except ValueError:
        return None, result
    return results, result



__all__ = ["run_tests"]
