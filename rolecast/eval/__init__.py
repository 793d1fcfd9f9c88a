"""rolecast eval: know whether a change made the team better.

An *evalset* (YAML or JSON) names a team factory, the ideas it is given (cases) and the checks
each run must pass — on artifacts (code that runs, tests that pass, text said), trajectories
(which roles spoke, which actions ran, in which order), a judge model, calls and cost. Each case
runs ``repeat`` times; every run is an ordinary durable run in the run store (``rolecast runs
show`` and the studio read it, ``fork`` and ``reuse`` take it), so an interrupted eval resumes,
recorded runs are scored again without a model call, and a changed team is measured against a
baseline paying only for the calls that changed.

* :func:`run_eval` (async) / :func:`evaluate` (sync) — the Python API; :class:`EvalResult` the results;
* :func:`assert_evalset` — the pytest entry point (an AssertionError listing the failures);
* :func:`load_evalset` — read and check a file; :mod:`.command` — ``rolecast eval``.

The README's *Evaluating a team* section documents the file's keys and the checks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..core.lazy import lazy_exports

if TYPE_CHECKING:
    from .api import assert_evalset, evaluate
    from .evalset import CHECKS, Case, Check, Evalset, load_evalset
    from .results import CaseResult, EvalResult, RunResult, wilson
    from .runner import run_eval

_LAZY = {
    "CHECKS": ".evalset", "Case": ".evalset", "Check": ".evalset", "Evalset": ".evalset", "load_evalset": ".evalset",
    "assert_evalset": ".api", "evaluate": ".api", "CaseResult": ".results", "EvalResult": ".results",
    "RunResult": ".results", "wilson": ".results", "run_eval": ".runner",
}
__getattr__, __dir__ = lazy_exports(__name__, globals(), _LAZY)

__all__ = [
    "CHECKS", "Case", "CaseResult", "Check", "EvalResult", "Evalset", "RunResult", "assert_evalset", "evaluate",
    "load_evalset", "run_eval", "wilson",
]
