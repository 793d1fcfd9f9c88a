"""An eval's results: per run (its checks), per case (pass rate with a Wilson interval), in all."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from .checks import CheckResult
from .record import RunRecord


def wilson(passed: int, total: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of a pass rate (95% by default): ``(low, high)``; ``(0, 1)`` for no runs."""
    if total <= 0:
        return 0.0, 1.0
    p = passed / total
    denominator = 1 + z * z / total
    centre = (p + z * z / (2 * total)) / denominator
    half = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass
class RunResult:
    """One run of a case, scored."""

    case: str
    repeat: int
    run_id: str
    checks: list[CheckResult]
    record: RunRecord

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    @property
    def failures(self) -> list[CheckResult]:
        return [c for c in self.checks if not c.passed]

    @property
    def score(self) -> float:
        """The mean of its checks' scores (each from 0 to 1); 1.0 for a run with no check."""
        return sum(c.score or 0.0 for c in self.checks) / len(self.checks) if self.checks else 1.0

    def as_dict(self) -> dict[str, Any]:
        r = self.record
        return {"run_id": self.run_id, "repeat": self.repeat, "passed": self.passed, "score": round(self.score, 4),
                "checks": [c.as_dict() for c in self.checks], "calls": r.calls, "live_calls": r.live_calls,
                "reused_calls": r.reused_calls, "judge_calls": r.judge_calls, "cost": r.cost,
                "seconds": round(r.seconds, 3), "stop_reason": r.stop_reason}


@dataclass
class CaseResult:
    """A case's runs; with ``baseline``, the same case's runs in the eval compared against."""

    id: str
    runs: list[RunResult]
    baseline: CaseResult | None = None

    @property
    def passed(self) -> int:
        return sum(r.passed for r in self.runs)

    @property
    def pass_rate(self) -> float:
        return self.passed / len(self.runs) if self.runs else 0.0

    @property
    def interval(self) -> tuple[float, float]:
        return wilson(self.passed, len(self.runs))

    @property
    def first_failure(self) -> str:
        for run in self.runs:
            for check in run.failures:
                return f"{check.kind or check.check}: {check.reason}"
        return ""

    def total(self, attribute: str) -> Any:
        return sum(getattr(r.record, attribute) for r in self.runs)

    def as_dict(self) -> dict[str, Any]:
        low, high = self.interval
        out: dict[str, Any] = {
            "id": self.id, "runs": len(self.runs), "passed": self.passed, "pass_rate": self.pass_rate,
            "interval": [round(low, 4), round(high, 4)], "run_ids": [r.run_id for r in self.runs],
            "failures": [{"run_id": r.run_id, "check": c.check, "kind": c.kind, "reason": c.reason}
                         for r in self.runs for c in r.failures],
            "calls": self.total("calls"), "live_calls": self.total("live_calls"),
            "reused_calls": self.total("reused_calls"), "judge_calls": self.total("judge_calls"),
            "cost": self.total("cost"), "results": [r.as_dict() for r in self.runs],
        }
        if self.baseline is not None:
            out["baseline_pass_rate"] = self.baseline.pass_rate
            out["change"] = self.pass_rate - self.baseline.pass_rate
        return out


@dataclass
class EvalResult:
    """The whole eval: its id (the runs' ids begin with it), the cases, and whether it reached the threshold."""

    evalset: str
    eval_id: str
    threshold: float
    cases: list[CaseResult]
    seconds: float = 0.0
    baseline_id: str | None = None
    rescored: bool = False
    #: what the eval did: runs made now, runs found finished (resumed), model calls made by the judge
    made_runs: int = 0
    found_runs: int = 0
    judge_live_calls: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def runs(self) -> int:
        return sum(len(c.runs) for c in self.cases)

    @property
    def passed_runs(self) -> int:
        return sum(c.passed for c in self.cases)

    @property
    def pass_rate(self) -> float:
        return self.passed_runs / self.runs if self.runs else 0.0

    @property
    def passed(self) -> bool:
        """The pass rate over all runs reaches the threshold (and there were runs)."""
        return self.runs > 0 and self.pass_rate >= self.threshold - 1e-12

    @property
    def exit_code(self) -> int:
        return 0 if self.passed else 1

    def total(self, attribute: str) -> Any:
        return sum(c.total(attribute) for c in self.cases)

    def as_dict(self) -> dict[str, Any]:
        low, high = wilson(self.passed_runs, self.runs)
        out: dict[str, Any] = {
            "evalset": self.evalset, "eval_id": self.eval_id, "pass_rate": self.pass_rate,
            "threshold": self.threshold, "passed": self.passed, "interval": [round(low, 4), round(high, 4)],
            "runs": self.runs, "passed_runs": self.passed_runs, "rescored": self.rescored,
            "made_runs": self.made_runs, "found_runs": self.found_runs,
            "calls": self.total("calls"), "live_calls": self.total("live_calls"),
            "reused_calls": self.total("reused_calls"), "judge_calls": self.total("judge_calls"),
            "judge_live_calls": self.judge_live_calls, "cost": self.total("cost"),
            "seconds": round(self.seconds, 3), "notes": list(self.notes),
            "cases": [c.as_dict() for c in self.cases],
        }
        if self.baseline_id is not None:
            out["baseline"] = self.baseline_id
            base = [r for c in self.cases if c.baseline is not None for r in c.baseline.runs]
            out["baseline_pass_rate"] = sum(r.passed for r in base) / len(base) if base else 0.0
        return out


__all__ = ["CaseResult", "EvalResult", "RunResult", "wilson"]
