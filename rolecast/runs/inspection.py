"""Reading runs back from the store: the list, a timeline, the message graph, JSON lines.

What ``rolecast runs list|show|graph|export`` prints; each function returns text so
that it can be used (and tested) without the command line.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

from ..errors import UsageError
from .base import RunStore
from .events import (
    LINEAGE,
    LLM_CALL,
    MESSAGE,
    ROUND_STARTED,
    RUN_STARTED,
    RUN_STOPPED,
    TURN_FAILED,
    RunEvent,
    payload,
    usage,
)

ALL = "<all>"
PREVIEW = 100


def _short(text: str, limit: int = PREVIEW) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _events(store: RunStore, run_id: str) -> list[RunEvent]:
    events = list(store.events(run_id))
    if not events:
        known = ", ".join(r.run_id for r in store.runs()[:5]) or "none"
        raise UsageError(f"no run {run_id!r} in the store (recent runs: {known})")
    return events


def list_runs(store: RunStore) -> str:
    """One line per run, newest first."""
    runs = store.runs()
    if not runs:
        return "no runs in the store"
    lines = [f"{'run id':<26} {'started':<19} {'rounds':>6} {'messages':>8} {'calls':>6}  stop      idea"]
    for r in runs:
        started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r.started))
        origin = f"  ({r.origin})" if r.origin else ""
        lines.append(f"{r.run_id:<26} {started:<19} {r.last_round:>6} {r.messages:>8} {r.llm_calls:>6}  "
                     f"{(r.stop_reason or 'running?'):<9} {_short(r.idea, 40)}{origin}")
    return "\n".join(lines)


def _describe(event: RunEvent) -> str | None:
    d = payload(event)
    if event.kind == RUN_STARTED:
        roles = ", ".join(f"{r['name']} ({r.get('profile', '')})" for r in d.get("roles", []))
        what = "resumed" if d.get("resumed") else "started"
        return f"run {event.run_id} {what}: idea {_short(d.get('idea', ''))!r}; roles {roles}"
    if event.kind == ROUND_STARTED:
        return f"round {event.round}"
    if event.kind == MESSAGE:
        m = d["message"]
        to = ", ".join(m.get("send_to") or [ALL])
        action = str(m.get("cause_by", "")).rsplit(".", 1)[-1]
        return f"  {m.get('sent_from') or '?'} → {to} [{action}]: {_short(m.get('content', ''))}"
    if event.kind == LINEAGE:
        if d.get("relation") == "fork":
            return f"run {event.run_id}: fork of {d.get('parent')} at round {d.get('at')}"
        return f"run {event.run_id}: reuses the answers of {d.get('parent')}"
    if event.kind == LLM_CALL:
        if "reused" in d:
            return (f"    model {d.get('model')} for {event.role}/{d.get('action')}: reused from "
                    f"{d['reused'].get('run')} (saved ${d['reused'].get('cost', 0):.6f})")
        if d.get("error"):
            return f"    model call by {event.role} in {d.get('action')} failed: {_short(d['error'])}"
        tokens = usage(event)
        return (f"    model {d.get('model')} for {event.role}/{d.get('action')}: "
                f"{tokens.get('prompt_tokens', 0)}+{tokens.get('completion_tokens', 0)} tokens, "
                f"${d.get('cost', 0):.6f}, {d.get('latency', 0):.2f} s")
    if event.kind == TURN_FAILED:
        return f"  {event.role} failed: {d.get('type')}: {_short(d.get('error', ''))}"
    if event.kind == RUN_STOPPED:
        return (f"stopped ({d.get('reason')}) after {d.get('rounds')} round(s): "
                f"{d.get('calls', 0)} model call(s), ${d.get('cost', 0):.6f}")
    return None


def show_run(store: RunStore, run_id: str) -> str:
    """A readable timeline: rounds, messages (who to whom, which action), model calls, failures; for a
    fork or a rerun, its origin first and, last, its model calls: live, reused, and the cost saved."""
    events = _events(store, run_id)
    lines = [line for e in events if (line := _describe(e)) is not None]
    origin = next((e.data for e in events if e.kind == LINEAGE), None)
    if origin is not None:
        live, reused, saved = call_counts(events)
        parent = origin.get("parent")
        lines.append(f"model calls: {live} live, {reused} reused from {parent} (saved ${saved:.6f})"
                     if origin.get("relation") == "reuse" else
                     f"model calls: {live} live after round {origin.get('at')}; rounds up to it are {parent}'s")
    return "\n".join(lines)


def call_counts(events: list[RunEvent]) -> tuple[int, int, float]:
    """(live calls, calls reused from another run, what the reused ones cost that run) of a run's events."""
    live = reused = 0
    saved = 0.0
    for e in events:
        if e.kind != LLM_CALL or e.data.get("error"):
            continue
        if "reused" in e.data:
            reused += 1
            saved += float(e.data["reused"].get("cost") or 0.0)
        else:
            live += 1
    return live, reused, saved


def _flow(events: list[RunEvent]) -> tuple[list[str], list[tuple[int, str, str, str]]]:
    """The participants and every (round, sender, receiver, text) of a run."""
    roles: list[str] = []
    for e in events:
        if e.kind == RUN_STARTED:
            roles = [r["name"] for r in e.data.get("roles", [])]
    edges = []
    participants = list(roles)
    for e in events:
        if e.kind != MESSAGE:
            continue
        m = e.data["message"]
        sender = m.get("sent_from") or "user"
        if sender not in participants:
            participants.insert(0, sender)
        targets = m.get("send_to") or [ALL]
        receivers = [r for r in roles if r != sender] if ALL in targets else [t for t in targets if t != sender]
        for receiver in receivers:
            if receiver not in participants:
                participants.append(receiver)
            edges.append((e.round, sender, receiver, _short(m.get("content", ""), 60)))
    return participants, edges


def _ident(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name) or "_"


def graph_run(store: RunStore, run_id: str, fmt: str = "mermaid") -> str:
    """The message flow as a Mermaid sequence diagram or a Graphviz digraph."""
    participants, edges = _flow(_events(store, run_id))
    if fmt == "mermaid":
        lines = ["sequenceDiagram"] + [f"    participant {_ident(p)} as {p}" for p in participants]
        current = None
        for rnd, sender, receiver, text in edges:
            if rnd != current:
                current = rnd
                lines.append(f"    Note over {_ident(participants[0])},{_ident(participants[-1])}: round {rnd}")
            lines.append(f"    {_ident(sender)}->>{_ident(receiver)}: {text.replace(';', ',').replace('#', '')}")
        return "\n".join(lines)
    if fmt == "dot":
        lines = ["digraph run {", "    rankdir=LR;"] + [f'    "{p}";' for p in participants]
        for rnd, sender, receiver, text in edges:
            label = json.dumps(f"r{rnd}: {text}")
            lines.append(f'    "{sender}" -> "{receiver}" [label={label}];')
        return "\n".join([*lines, "}"])
    raise UsageError(f"graph format must be 'mermaid' or 'dot', not {fmt!r}")


def export_run(store: RunStore, run_id: str) -> Iterator[str]:
    """The run's events as JSON lines."""
    for event in _events(store, run_id):
        yield event.to_json()


def run_summary(store: RunStore, run_id: str) -> dict[str, Any]:
    """Totals of a run: messages, model calls, tokens and cost per role."""
    per_role: dict[str, dict[str, float]] = {}
    for e in _events(store, run_id):
        if e.kind == LLM_CALL and not e.data.get("error"):
            tokens = usage(e)
            row = per_role.setdefault(e.role or "<none>", {"calls": 0, "tokens": 0, "cost": 0.0})
            row["calls"] += 1
            row["tokens"] += tokens.get("prompt_tokens", 0) + tokens.get("completion_tokens", 0)
            row["cost"] += e.data.get("cost", 0.0)
    return per_role


__all__ = ["call_counts", "export_run", "graph_run", "list_runs", "run_summary", "show_run"]
