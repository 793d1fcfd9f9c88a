"""The studio's Eval page: the evals of the store (``rolecast eval``), one eval's cases and runs, two
evals side by side, and the optimizations (``rolecast optimize``): each candidate's scores and the
winner's diff.

An eval's scores are kept beside the store (``<store folder>/evals/<eval id>.json``, written by
:func:`rolecast.eval.runner.save_result` after each scoring); its runs are ordinary runs of the
store, linked to their pages. Only SQLite stores have such a folder: for another store the page
says so.
"""

from __future__ import annotations

import asyncio
import difflib
import json
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from ..eval.runner import EVAL_ID
from .source import RunSource

#: the largest scores file read (an eval of thousands of runs is a few MiB)
MAX_BYTES = 16 * 2**20


def evals_folder(source: RunSource) -> Path | None:
    path = source.path
    return None if path is None else Path(path).parent / "evals"


def _read_kept(folder: Path, file_id: str) -> dict[str, Any] | None:
    """The JSON object kept as ``folder/<file_id>.json`` (None: a bad id, no such file, too big, not JSON)."""
    if not EVAL_ID.fullmatch(file_id or ""):
        return None
    file = folder / f"{file_id}.json"
    try:
        if not file.is_file() or file.stat().st_size > MAX_BYTES:
            return None
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def read_eval(folder: Path, eval_id: str) -> dict[str, Any] | None:
    """The scores of ``eval_id`` (None: no such eval, a bad id, or a file that does not read as scores)."""
    data = _read_kept(folder, eval_id)
    return data if data is not None and isinstance(data.get("cases"), list) else None


def read_optimization(folder: Path, optimization_id: str) -> dict[str, Any] | None:
    """The report of ``optimization_id`` kept beside the store (None: none, a bad id, not a report)."""
    data = _read_kept(folder, optimization_id)
    ok = data is not None and isinstance(data.get("candidates"), list) and isinstance(data.get("baseline"), dict)
    return data if ok else None


def list_optimizations(folder: Path | None) -> list[dict[str, Any]]:
    """Every optimization with a kept report, by id."""
    if folder is None or not folder.is_dir():
        return []
    found = [read_optimization(folder, f.stem) for f in sorted(folder.glob("*.json"))]
    return [o for o in found if o is not None]


def diff_lines(before: str, after: str) -> list[tuple[str, str]]:
    """``(kind, line)`` of the text as written against as tuned: kind ``-`` (gone), ``+`` (new) or ``" "``."""
    return [(line[:1], line[2:]) for line in difflib.ndiff(str(before).splitlines(), str(after).splitlines())
            if line[:1] in "-+ "]


def list_evals(folder: Path | None) -> list[dict[str, Any]]:
    """Every eval with kept scores, newest first (ids end with their UTC start time)."""
    if folder is None or not folder.is_dir():
        return []
    found = [read_eval(folder, f.stem) for f in folder.glob("*.json")]
    return sorted((e for e in found if e is not None), key=lambda e: str(e.get("eval_id", ""))[-15:], reverse=True)


def side_by_side(a: dict[str, Any], b: dict[str, Any]) -> list[dict[str, Any]]:
    """Per case id (in ``a``'s order, then ``b``'s own): each eval's case, or None where it has none."""
    cases_b = {c.get("id"): c for c in b["cases"]}
    rows = [{"id": c.get("id"), "a": c, "b": cases_b.pop(c.get("id"), None)} for c in a["cases"]]
    return rows + [{"id": key, "a": None, "b": case} for key, case in cases_b.items()]


async def evals(request: Request) -> Response:
    """``/evals``: the list; ``/evals?id=EVAL``: one eval; ``&with=OTHER``: two side by side."""
    studio = request.app.state.studio
    folder = evals_folder(studio.source)
    runs = folder.parent / "optimizations" if folder is not None else None
    wanted, other = request.query_params.get("id", ""), request.query_params.get("with", "")
    optimization = request.query_params.get("optimization", "")
    if optimization:
        report = await asyncio.to_thread(read_optimization, runs, optimization) if runs is not None else None
        if report is None:
            return studio.page("error.html", 404, title="Not found", kind="UsageError",
                               message=f"no optimization {optimization!r} with a kept report beside this store")
        changes = [{**change, "diff": diff_lines(change.get("before", ""), change.get("after", ""))
                    if change.get("before") != change.get("after") else []}  # (only demonstrations added)
                   for change in report.get("changes") or [] if isinstance(change, dict)]
        return studio.page("optimization.html", title=f"Optimization {optimization}", report=report,
                           changes=changes)
    if not wanted:
        found = await asyncio.to_thread(list_evals, folder)
        optimizations = await asyncio.to_thread(list_optimizations, runs)
        return studio.page("evals.html", title="Evals", evals=found, folder=folder, one=None, two=None,
                           optimizations=optimizations)
    one = await asyncio.to_thread(read_eval, folder, wanted) if folder is not None else None
    if one is None:
        return studio.page("error.html", 404, title="Not found", kind="UsageError",
                           message=f"no eval {wanted!r} with kept scores beside this store")
    two = await asyncio.to_thread(read_eval, folder, other) if other and folder is not None else None
    if other and two is None:
        return studio.page("error.html", 404, title="Not found", kind="UsageError",
                           message=f"no eval {other!r} with kept scores beside this store")
    rows = side_by_side(one, two) if two is not None else []
    return studio.page("evals.html", title=f"Eval {wanted}", evals=[], folder=folder, one=one, two=two, rows=rows)


__all__ = ["diff_lines", "evals", "evals_folder", "list_evals", "list_optimizations", "read_eval",
           "read_optimization", "side_by_side"]
