"""When the multi-agent example's artifacts are well formed (stdlib only; the example and bench/ use it).

Model-written code is only *parsed* here (``ast.parse``), never run.
"""

from __future__ import annotations

import ast


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
