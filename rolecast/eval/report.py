"""An eval's results as a terminal table, JSON, and JUnit XML (for CI)."""

from __future__ import annotations

import io
import json
import os
import re
from pathlib import Path
from xml.etree import ElementTree as ET

from ..observe.printable import printable
from .results import EvalResult, wilson


def _pct(rate: float) -> str:
    return f"{rate * 100:.0f}%"


def _interval(low: float, high: float) -> str:
    return f"[{low * 100:.0f}–{high * 100:.0f}%]"


def rows(result: EvalResult) -> tuple[list[str], list[list[str]]]:
    """The table's header and rows: per case, then the totals."""
    header = ["case", "runs", "passed", "pass rate", "95% CI"]
    compare = result.baseline_id is not None
    if compare:
        header += ["baseline", "change", "calls live/reused"]
    header += ["first failure"]
    out = []
    for case in result.cases:
        row = [case.id, str(len(case.runs)), str(case.passed), _pct(case.pass_rate), _interval(*case.interval)]
        if compare:
            base = case.baseline
            change = case.pass_rate - base.pass_rate if base is not None else 0.0
            row += [_pct(base.pass_rate) if base is not None else "-", f"{change * 100:+.0f} pts",
                    f"{case.total('live_calls')}/{case.total('reused_calls')}"]
        row.append(printable(case.first_failure[:100]))
        out.append(row)
    total = ["all", str(result.runs), str(result.passed_runs), _pct(result.pass_rate),
             _interval(*wilson(result.passed_runs, result.runs))]
    if compare:
        total += ["", "", f"{result.total('live_calls')}/{result.total('reused_calls')}"]
    total.append("")
    out.append(total)
    return header, out


#: the most characters of one failing check's reason the table's list shows (the JSON has them whole)
REASON_CHARS = 2000


def failures(result: EvalResult) -> list[str]:
    """Every failing check of every run, one line each: case, repeat, run id, check and the whole reason."""
    lines = []
    for case in result.cases:
        for run in case.runs:
            for check in run.failures:
                reason = printable(check.reason)
                if len(reason) > REASON_CHARS:
                    reason = reason[:REASON_CHARS] + f" [{len(reason) - REASON_CHARS} more characters in the JSON]"
                lines.append(f"{case.id}#{run.repeat} ({run.run_id}) {printable(check.check)}: {reason}")
    return lines


def summary_line(result: EvalResult) -> str:
    verdict = "PASSED" if result.passed else "FAILED"
    what = "rescored" if result.rescored else f"{result.made_runs} run(s) made, {result.found_runs} found finished"
    return (f"eval {result.eval_id} ({result.evalset}): {verdict} — pass rate {_pct(result.pass_rate)} "
            f"({result.passed_runs}/{result.runs}), threshold {_pct(result.threshold)}; {what}; "
            f"model calls {result.total('calls')} ({result.total('live_calls')} live, "
            f"{result.total('reused_calls')} reused), judge calls {result.total('judge_calls')} "
            f"({result.judge_live_calls} asked now); "
            f"cost ${result.total('cost'):.4f}; {result.seconds:.1f} s")


def table(result: EvalResult, *, color: bool | None = None) -> str:
    """The results as text: a rich table when rich is installed, else plain columns."""
    header, body = rows(result)
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:  # (rich is a dependency; a trimmed install may lack it)
        widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
        lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)) for r in [header, *body]]
        return "\n".join([*lines, summary_line(result), *result.notes])
    grid = Table(title=f"eval {result.eval_id}", show_lines=False)
    for name in header:
        grid.add_column(name, overflow="fold")
    for i, row in enumerate(body):
        grid.add_row(*row, style="bold" if i == len(body) - 1 else None)
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=bool(color), width=int(os.environ.get("COLUMNS", "140")),
                      no_color=not color)
    console.print(grid)
    console.print(summary_line(result), markup=False)
    failing = failures(result)
    if failing:
        console.print(f"failing checks ({len(failing)}):", markup=False)
        for line in failing:
            console.print("  " + line, markup=False, soft_wrap=True)
    for note in result.notes:
        console.print(f"note: {note}", markup=False)
    return buffer.getvalue().rstrip("\n")


def to_json(result: EvalResult) -> str:
    return json.dumps(result.as_dict(), indent=1, ensure_ascii=False)


#: what XML 1.0 cannot hold, even escaped: control characters but tab, newline and carriage return,
#: lone surrogates, U+FFFE and U+FFFF
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _xml(text: object) -> str:
    """``text`` as XML can hold it: a character XML forbids written as ``\\xNN`` / ``\\uNNNN``."""
    value = text if isinstance(text, str) else str(text)
    return _NOT_XML.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100
                        else f"\\u{ord(m.group()):04x}", value)


def to_junit(result: EvalResult) -> str:
    """JUnit XML: a suite per evalset, a test case per run (classname: the case), a failure per failing run."""
    suite = ET.Element("testsuite", {
        "name": _xml(result.evalset), "tests": str(result.runs), "failures": str(result.runs - result.passed_runs),
        "errors": "0", "time": f"{result.seconds:.3f}",
    })
    props = ET.SubElement(suite, "properties")
    for name, value in (("eval_id", result.eval_id), ("pass_rate", f"{result.pass_rate:.4f}"),
                        ("threshold", f"{result.threshold}"), ("passed", str(result.passed).lower())):
        ET.SubElement(props, "property", {"name": name, "value": _xml(value)})
    for case in result.cases:
        for run in case.runs:
            test = ET.SubElement(suite, "testcase", {
                "classname": _xml(f"{result.evalset}.{case.id}"), "name": _xml(f"{case.id}#{run.repeat}"),
                "time": f"{run.record.seconds:.3f}",
            })
            failures = run.failures
            if failures:
                failure = ET.SubElement(test, "failure", {"message": _xml(printable(failures[0].reason)[:500]),
                                                          "type": _xml(failures[0].kind or "check")})
                failure.text = _xml("\n".join(f"{c.check}: {c.reason}" for c in failures))
            out = ET.SubElement(test, "system-out")
            out.text = _xml(f"run {run.run_id}: rolecast runs show {run.run_id}")
    return ET.tostring(suite, encoding="unicode", xml_declaration=True)


def write(path: str | Path, text: str) -> None:
    target = Path(path)
    if target.parent and not target.parent.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text + "\n", encoding="utf-8")


__all__ = ["failures", "rows", "summary_line", "table", "to_json", "to_junit", "write"]
