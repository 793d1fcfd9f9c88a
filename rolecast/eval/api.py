"""The eval from plain code and from pytest::

    from rolecast.eval import assert_evalset

    def test_my_team_still_works(tmp_path):
        assert_evalset("evals/adder.yaml", store=tmp_path / "runs.db")   # AssertionError: the failures

:func:`evaluate` is :func:`~rolecast.eval.runner.run_eval` for code outside an event loop.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from ..errors import NestedEventLoopError
from .evalset import Evalset
from .report import table
from .results import EvalResult
from .runner import run_eval


def evaluate(evalset: Evalset | str | Path, **options: Any) -> EvalResult:
    """:func:`run_eval` run to the end (not inside a running event loop: ``await run_eval(...)`` there)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(run_eval(evalset, **options))
    raise NestedEventLoopError("evaluate() was called inside a running event loop; use `await run_eval(...)`")


def assert_evalset(evalset: Evalset | str | Path, **options: Any) -> EvalResult:
    """Run the evalset; an AssertionError with the results table when its pass rate is under the threshold."""
    result = evaluate(evalset, **options)
    if not result.passed:
        raise AssertionError(f"evalset {result.evalset} failed its threshold:\n{table(result, color=False)}")
    return result


__all__ = ["assert_evalset", "evaluate"]
