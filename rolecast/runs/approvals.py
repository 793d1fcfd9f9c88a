"""Approvals that wait: a deferred approval asked in a run's log, answered later from any process.

A run with :meth:`Approval.deferred() <rolecast.control.approval.Approval.deferred>` installed does not
block on a question: it writes an :data:`~rolecast.runs.events.APPROVAL_REQUESTED` event (the id,
the role, the tool and its arguments, the tool's JSON schema) and pauses — ``team.run`` returns a
history whose ``status`` is ``"waiting"``, and the process may exit. A person answers with
:func:`decide` (``rolecast runs approve RUN [ID]``, ``reject RUN ID --why TEXT``, ``edit RUN ID
--args JSON``), which appends an :data:`~rolecast.runs.events.APPROVAL_DECIDED` event; running the
script again under the same run id resumes it with the answer applied (every model call before
it answered from the log). openai-agents does the same by saving ``RunState`` with its pending
``interruptions``; here the log is the state.

An edit is checked against the tool's schema here, before it is written (:func:`schema_problems`),
and again by the tool when the run applies it.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

from ..errors import ApprovalAnswered, UsageError
from .base import RunStore
from .events import APPROVAL_DECIDED, APPROVAL_REQUESTED, RunEvent

VERDICTS = ("approve", "reject", "edit")
#: the exit status of a script whose run waits for an approval (``rolecast.observe.console.run_script`` and
#: ``History.exit_code`` use it): not 0 (it did not finish), not 1 (nothing failed)
EXIT_WAITING = 3
#: how deep a schema or a value may nest before it is refused (the checker is recursive)
MAX_DEPTH = 32


def too_deep(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether ``value`` (decoded JSON) nests deeper than ``limit`` levels; iterative, so a value nested
    100,000 levels is measured, not a RecursionError."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            if depth >= limit:
                return True
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return False


def json_arguments(text: str, what: str = "--args") -> dict[str, Any]:
    """An edit's arguments from JSON text: an object nested at most :data:`MAX_DEPTH` levels; else a
    :class:`UsageError` (text nested 30,000 levels is one too, before the decoder recurses)."""
    brackets = 0
    deepest = 0
    for char in re.sub(r'"(?:[^"\\]|\\.)*"', "", text):  # (strings out: a bracket in one does not count)
        if char in "[{":
            brackets += 1
            deepest = max(deepest, brackets)
        elif char in "]}":
            brackets -= 1
    if deepest > MAX_DEPTH:
        raise UsageError(f"{what} nests {deepest} levels deep: at most {MAX_DEPTH}")
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise UsageError(f"{what} is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise UsageError(f"{what} is a JSON object of the call's arguments, such as '{{\"x\": 1}}'")
    return value


def approvals(store: RunStore, run_id: str) -> list[dict[str, Any]]:
    """Every approval asked in run ``run_id``, in order, each with its ``decision`` (None: pending)."""
    asked: dict[str, dict[str, Any]] = {}
    for event in store.events(run_id, [APPROVAL_REQUESTED, APPROVAL_DECIDED]):
        data = event.data
        if event.kind == APPROVAL_REQUESTED:
            asked.setdefault(data["id"], {**data, "decision": None})
        elif data["id"] in asked and asked[data["id"]]["decision"] is None:
            asked[data["id"]]["decision"] = data
    return list(asked.values())


def pending_approvals(store: RunStore, run_id: str) -> list[dict[str, Any]]:
    """The approvals of run ``run_id`` that wait for an answer."""
    return [a for a in approvals(store, run_id) if a["decision"] is None]


def decide(
    store: RunStore, run_id: str, approval_id: str | None, verdict: str, *,
    arguments: dict[str, Any] | None = None, reason: str = "", by: str = "",
) -> dict[str, Any]:
    """Answer approval ``approval_id`` of run ``run_id`` (None: its only pending one); the decision.

    An approval is answered once: a second answer — even one racing the first from another process —
    is :class:`~rolecast.errors.ApprovalAnswered`, naming the first (the check and the write are one
    transaction: :meth:`RunStore.append_checked <rolecast.runs.base.RunStore.append_checked>`).
    ``verdict`` is ``approve``, ``reject`` (with a ``reason``) or ``edit`` (with ``arguments``, checked
    against the tool's schema). A :class:`~rolecast.errors.UsageError` says what is wrong: no such
    run or approval, one answered already, an edit the schema refuses."""
    if verdict not in VERDICTS:
        raise UsageError(f"an approval's verdict is one of {', '.join(VERDICTS)}, not {verdict!r}")
    every = approvals(store, run_id)
    if not every and not store.has_run(run_id):
        raise UsageError(f"no run {run_id!r} in the store")
    waiting = [a for a in every if a["decision"] is None]
    if approval_id is None:
        if len(waiting) != 1:
            ids = ", ".join(a["id"] for a in waiting) or "none"
            raise UsageError(f"run {run_id!r} has {len(waiting)} pending approval(s) ({ids}): name the one to answer")
        approval_id = waiting[0]["id"]
    found = next((a for a in every if a["id"] == approval_id), None)
    if found is None:
        ids = ", ".join(a["id"] for a in waiting) or "none"
        raise UsageError(f"run {run_id!r} asked no approval {approval_id!r} (pending: {ids})")
    if found["decision"] is not None:
        raise ApprovalAnswered(run_id, approval_id, found["decision"])
    decision: dict[str, Any] = {"id": approval_id, "verdict": verdict, "by": by, "at": time.time()}
    if verdict == "edit":
        if not isinstance(arguments, dict):
            raise UsageError("an edit gives the call's new arguments as a JSON object, such as {\"x\": 1}")
        if too_deep(arguments):
            raise UsageError(f"the edited arguments nest deeper than {MAX_DEPTH} levels")
        problems = schema_problems(arguments, found.get("schema") or {})
        if problems:
            raise UsageError(f"the edited arguments do not fit {found.get('name')!r}'s schema: " + "; ".join(problems))
        decision["arguments"] = arguments
    elif arguments is not None:
        raise UsageError(f"{verdict} takes no arguments (edit does)")
    if verdict == "reject":
        decision["reason"] = reason
    answer = RunEvent(run_id, APPROVAL_DECIDED, decision, found.get("round", 0), found.get("role", ""))
    store.append_checked(answer, [APPROVAL_DECIDED], lambda decided: _unanswered(run_id, approval_id, decided))
    return decision


def _unanswered(run_id: str, approval_id: str, decided: list[RunEvent]) -> None:
    """Raise :class:`ApprovalAnswered` when ``decided`` (the run's decisions, read in the transaction that
    writes the new one) answers ``approval_id`` already: between the first read and the write, another
    process may have answered it."""
    for event in decided:
        if event.data.get("id") == approval_id:
            raise ApprovalAnswered(run_id, approval_id, event.data)


_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,), "array": (list,), "string": (str,), "integer": (int,), "number": (int, float),
    "boolean": (bool,), "null": (type(None),),
}


def schema_problems(value: Any, schema: dict[str, Any], path: str = "arguments", depth: int = 0) -> list[str]:
    """What is wrong with ``value`` under a JSON schema (the subset tools' schemas use: ``type``,
    ``properties``, ``required``, ``additionalProperties``, ``items``, ``enum``, ``anyOf``); [] when it
    fits. Linear in the size of value and schema, and refuses nesting deeper than :data:`MAX_DEPTH`."""
    if depth > MAX_DEPTH:
        return [f"{path}: nested deeper than {MAX_DEPTH} levels"]
    if not isinstance(schema, dict):
        return []
    if "anyOf" in schema and isinstance(schema["anyOf"], list):
        options = [schema_problems(value, s, path, depth + 1) for s in schema["anyOf"][:16]]
        return [] if any(not p for p in options) else options[0]
    problems: list[str] = []
    wanted = schema.get("type")
    if wanted is not None:
        names = wanted if isinstance(wanted, list) else [wanted]
        kinds = tuple(t for n in names for t in _TYPES.get(str(n), (object,)))
        is_bool = isinstance(value, bool)
        if not isinstance(value, kinds) or (is_bool and "boolean" not in names):
            return [f"{path}: expected {' or '.join(map(str, names))}, got {type(value).__name__}"]
    if "enum" in schema and isinstance(schema["enum"], list) and value not in schema["enum"]:
        problems.append(f"{path}: {value!r} is not one of {schema['enum']!r}")
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        for name in schema.get("required") or []:
            if name not in value:
                problems.append(f"{path}: {name!r} is required")
        if schema.get("additionalProperties") is False or (props and schema.get("additionalProperties") is None
                                                          and schema.get("type") == "object"):
            extra = sorted(set(value) - set(props))
            if extra:
                problems.append(f"{path}: unknown argument(s) {extra}")
        for name, item in value.items():
            if name in props:
                problems += schema_problems(item, props[name], f"{path}.{name}", depth + 1)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            problems += schema_problems(item, schema["items"], f"{path}[{i}]", depth + 1)
    return problems


__all__ = [
    "EXIT_WAITING", "VERDICTS", "approvals", "decide", "json_arguments", "pending_approvals", "schema_problems",
    "too_deep",
]
