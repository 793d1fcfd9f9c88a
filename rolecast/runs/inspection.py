"""Reading runs back from the store: the list, a timeline, the message graph, JSON lines.

What ``rolecast runs list|show|graph|export`` prints; each function returns text so
that it can be used (and tested) without the command line.

Names, ids and texts in a run come from users and models: the list and the timeline show
control characters in them escaped (:func:`~rolecast.observe.printable.printable`), and the graphs
quote and escape every identifier and label (a participant whose name is not a plain word
gets an id of its own, ``_p0``, ``_p1`` …, and its name is only a label), so nothing in a run
adds a line, an attribute or a node to a diagram.
"""

from __future__ import annotations

import json
import re
import shlex
import time
from collections.abc import Iterator
from typing import Any

from ..accounting.cost import NO_ROLE
from ..errors import UsageError
from ..observe.printable import printable
from .base import RunStore
from .events import (
    HISTORY_FITTED,
    LINEAGE,
    LLM_CALL,
    MESSAGE,
    MESSAGE_ROUTE_TO_ALL,
    ROUND_STARTED,
    RUN_STARTED,
    RUN_STOPPED,
    STATE_INVALID,
    TURN_FAILED,
    RunEvent,
    command_argv,
    payload,
    usage,
)
from .ids import check_run_id
from .requests import CallRequest, requests_of

ALL = MESSAGE_ROUTE_TO_ALL
PREVIEW = 100


def _short(text: str, limit: int = PREVIEW) -> str:
    text = printable(" ".join(str(text).split()))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def no_run(store: RunStore, run_id: str) -> UsageError:
    """The error every ``rolecast runs`` command gives for a run the store does not hold."""
    known = ", ".join(printable(r.run_id) for r in store.runs()[:5]) or "none"
    return UsageError(f"no run {run_id!r} in the store (recent runs: {known})")


def run_events(store: RunStore, run_id: str) -> list[RunEvent]:
    """Every event of ``run_id``; a bad run id, or a run the store does not hold, a UsageError."""
    events = list(store.events(check_run_id(run_id)))
    if not events:
        raise no_run(store, run_id)
    return events


def list_runs(store: RunStore) -> str:
    """One line per run, newest first."""
    runs = store.runs()
    if not runs:
        return "no runs in the store"
    lines = [f"{'run id':<26} {'started':<19} {'rounds':>6} {'messages':>8} {'calls':>6}  stop      idea"]
    for r in runs:
        started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r.started))
        origin = f"  ({printable(r.origin)})" if r.origin else ""
        stop = "damaged" if r.damaged else printable(r.stop_reason or "running?")
        idea = printable(r.damaged) if r.damaged else _short(r.idea, 40)
        lines.append(f"{printable(r.run_id):<26} {started:<19} {r.last_round:>6} {r.messages:>8} {r.llm_calls:>6}  "
                     f"{stop:<9} {idea}{origin}")
    return "\n".join(lines)


#: what a model call was for, when no action made it (the request's kind)
_CALL_PURPOSE = {"choose": "choose the next action", "embed": "embed text", "complete": "a call outside an action"}


def _caller(role: str, d: Any) -> str:
    """Who made a model call: ``role/action``, or for a call made in no action what it was for
    (``Carl (choose the next action)``: a state choice), never an empty ``Carl/``."""
    action = d.get("action")
    if action:
        return f"{role}/{_short(action, 60)}"
    kind = (d.get("request") or {}).get("kind") if isinstance(d.get("request"), dict) else None
    return f"{role} ({_CALL_PURPOSE.get(str(kind), 'no action')})"


def _describe(event: RunEvent) -> str | None:
    d = payload(event)
    role = printable(event.role)
    if event.kind == RUN_STARTED:
        roles = ", ".join(f"{printable(r['name'])} ({printable(r.get('profile', ''))})" for r in d.get("roles", []))
        what = "resumed" if d.get("resumed") else "started"
        line = f"run {printable(event.run_id)} {what}: idea {_short(d.get('idea', ''))!r}; roles {roles}"
        command = d.get("command")
        if command and command.get("argv"):  # (what ``rolecast runs rerun`` runs again)
            line += (f"\n  command: {printable(shlex.join(command_argv(command)))}"
                     f"  (in {printable(str(command.get('cwd', '?')))})")
        return line
    if event.kind == ROUND_STARTED:
        return f"round {event.round}"
    if event.kind == MESSAGE:
        m = d.get("message") or {}
        to = printable(", ".join(m.get("send_to") or [ALL]))
        action = printable(str(m.get("cause_by", "")).rsplit(".", 1)[-1])
        return f"  {printable(m.get('sent_from') or '?')} → {to} [{action}]: {_short(m.get('content', ''))}"
    if event.kind == LINEAGE:
        if d.get("relation") == "fork":
            return f"run {printable(event.run_id)}: fork of {printable(d.get('parent'))} at round {d.get('at')}"
        return f"run {printable(event.run_id)}: reuses the answers of {printable(d.get('parent'))}"
    if event.kind == LLM_CALL:
        if "reused" in d:
            return (f"    model {printable(d.get('model'))} for {_caller(role, d)}: reused from "
                    f"{printable(d['reused'].get('run'))} (saved ${d['reused'].get('cost', 0):.6f})")
        if d.get("error"):
            return f"    model call by {_caller(role, d)} failed: {_short(d['error'])}"
        tokens = usage(event)
        return (f"    model {printable(d.get('model'))} for {_caller(role, d)}: "
                f"{tokens.get('prompt_tokens', 0)}+{tokens.get('completion_tokens', 0)} tokens, "
                f"${d.get('cost', 0):.6f}, {d.get('latency', 0):.2f} s")
    if event.kind == STATE_INVALID:
        n = int(d.get("n_options") or 0)
        return (f"  {role}: the answer to \"choose the next action\" was {_short(d.get('raw', ''), 200)!r}, "
                f"not a number from -1 to {n - 1}: its turn ended")
    if event.kind == HISTORY_FITTED:
        return (f"  {role}: {printable(d.get('purpose', 'a prompt'))} left out {d.get('omitted')} earlier "
                f"{printable(d.get('unit', 'message'))}(s), kept {d.get('kept')}, to fit the context window of "
                f"{d.get('window')} tokens")
    if event.kind == TURN_FAILED:
        if d.get("type") == "ApprovalPending":  # (the turn waits for a person's answer: not a failure)
            return f"  {role} waits: {_short(d.get('error', ''))}"
        return f"  {role} failed: {printable(d.get('type'))}: {_short(d.get('error', ''))}"
    if event.kind == RUN_STOPPED:
        asked = f" of {d['n_round']}" if d.get("n_round") else ""
        return (f"stopped ({printable(d.get('reason'))}) after {d.get('rounds')}{asked} round(s): "
                f"{d.get('calls', 0)} model call(s), ${d.get('cost', 0):.6f}")
    return None


def _indented(text: str, pad: str) -> list[str]:
    """``text``'s lines (control characters escaped), each indented under its message's head."""
    return [f"{pad}  {line}" for line in printable(text, lines=True).split("\n")]


def _request_lines(request: CallRequest) -> list[str]:
    """A model call's request under its line in the timeline: each message (role, then its text,
    indented), then the settings; a call logged before requests were whole, its summary."""
    pad = " " * 8
    if not request.full:
        s = request.summary
        lines = [f"{pad}(logged before full requests were kept: {s.get('n_messages', '?')} message(s); "
                 f"the summary follows)"]
        if s.get("system"):
            lines += [f"{pad}[system, start]", *_indented(s["system"], pad)]
        return [*lines, f"{pad}[last message, end]", *_indented(s.get("last", ""), pad)]
    lines = []
    for i, message in enumerate(request.messages, 1):
        extras = {k: v for k, v in message.items() if k not in ("role", "content")}
        head = f"{pad}[{i} {printable(message.get('role', ''))}]"
        if extras:
            head += " " + printable(json.dumps(extras, ensure_ascii=False, default=str))
        lines.append(head)
        content = message.get("content")
        text = "(text not in the store)" if content is None and "content" not in extras else str(content or "")
        lines += _indented(text, pad)
    lines.append(f"{pad}settings: {printable(json.dumps(request.settings, ensure_ascii=False, default=str))}")
    return lines


def show_run(store: RunStore, run_id: str, *, calls: bool = False) -> str:
    """A readable timeline: rounds, messages (who to whom, which action), model calls, failures; for a
    fork or a rerun, its origin first and, last, its model calls: live, reused, and the cost saved.
    ``calls``: each model call's full request under it (every message, the settings)."""
    events = run_events(store, run_id)
    requests = iter(requests_of(store, [e for e in events if e.kind == LLM_CALL])) if calls else None
    lines = []
    for e in events:
        line = _describe(e)
        if line is not None:
            lines.append(line)
        if requests is not None and e.kind == LLM_CALL:
            lines += _request_lines(next(requests))
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
        m = e.data.get("message") or {}
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


_PLAIN_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,63}")
# words with a meaning in a Mermaid sequence diagram or in DOT: never an id
_KEYWORDS = frozenset(
    "participant actor as note loop alt else opt par and rect end activate deactivate title autonumber critical "
    "break box over left right of sequencediagram links link properties details create destroy "
    "node edge graph digraph subgraph strict".split()
)


def _graph_id(name: str, i: int) -> str:
    """A participant's id in a diagram: its name when that is a plain word (``Ada``), else
    ``_p<i>`` — an id no plain name can be, so ids never collide and never carry syntax."""
    return name if _PLAIN_NAME.fullmatch(name) and name.lower() not in _KEYWORDS else f"_p{i}"


def _mermaid_text(text: str) -> str:
    """Text for a Mermaid label or message: every character but letters, digits, space and ``_.,()-``
    written as an entity code (``#35;`` for ``#``), so no text adds a line or a statement."""
    return "".join(c if (c.isascii() and c.isalnum()) or c in " _.,()-" else f"#{ord(c)};" for c in printable(text))


def _dot_string(text: str) -> str:
    """A Graphviz double-quoted string: control characters shown escaped, ``\\`` and ``"`` escaped
    (no escString such as ``\\N`` or ``\\G`` is left for Graphviz to expand)."""
    return '"' + printable(text).replace("\\", "\\\\").replace('"', '\\"') + '"'


def graph_run(store: RunStore, run_id: str, fmt: str = "mermaid") -> str:
    """The message flow as a Mermaid sequence diagram or a Graphviz digraph.

    A participant's id is its name when that is a plain word, else ``_p<i>``; its name and every
    message are labels, escaped for the format (DOT ids are quoted too).
    """
    if fmt not in ("mermaid", "dot"):
        raise UsageError(f"graph format must be 'mermaid' or 'dot', not {fmt!r}")
    participants, edges = _flow(run_events(store, run_id))
    ids = {name: _graph_id(name, i) for i, name in enumerate(participants)}
    if fmt == "mermaid":
        lines = ["sequenceDiagram"] + [f"    participant {ids[p]} as {_mermaid_text(p)}" for p in participants]
        current = None
        for rnd, sender, receiver, text in edges:
            if rnd != current:
                current = rnd
                lines.append(f"    Note over {ids[participants[0]]},{ids[participants[-1]]}: round {int(rnd)}")
            lines.append(f"    {ids[sender]}->>{ids[receiver]}: {_mermaid_text(text)}")
        return "\n".join(lines)
    node = {p: _dot_string(ids[p]) for p in participants}
    lines = ["digraph run {", "    rankdir=LR;"] + [f"    {node[p]} [label={_dot_string(p)}];" for p in participants]
    for rnd, sender, receiver, text in edges:
        lines.append(f"    {node[sender]} -> {node[receiver]} [label={_dot_string(f'r{int(rnd)}: {text}')}];")
    return "\n".join([*lines, "}"])


#: model calls whose requests are read from the store together (one read of their texts)
EXPORT_BATCH = 200


def export_run(store: RunStore, run_id: str) -> Iterator[str]:
    """The run's events as JSON lines; a model call's line has its full request beside the event's
    data, its texts in place: ``"request": {"messages": [{"role", "content", …}], "settings": {…}}``
    (absent for a call logged before full requests were kept: its ``data.request`` is the summary).

    A run whose idea was given with ``Team.run_project`` logged its start before ``run`` said how
    many rounds to run: its ``run_started`` line gets ``n_round`` from the ``run_stopped`` that
    follows it (which records it), instead of ``null``.
    """
    events = run_events(store, run_id)
    asked: dict[int, Any] = {}  # the index of a run_started -> the n_round its run_stopped records
    start = None
    for i, event in enumerate(events):
        if event.kind == RUN_STARTED:
            start = i
        elif event.kind == RUN_STOPPED and start is not None:
            asked[start], start = event.data.get("n_round"), None
    calls = [e for e in events if e.kind == LLM_CALL]
    full: dict[int, CallRequest] = {}
    for i, event in enumerate(events):
        if i in asked and asked[i] is not None and event.data.get("n_round") is None:
            event = RunEvent(event.run_id, event.kind, {**event.data, "n_round": asked[i]}, event.round,
                             event.role, event.seq, event.ts)
        extra = None
        if event.kind == LLM_CALL:
            if id(event) not in full:  # the next batch of calls, their texts read at once
                at = calls.index(event)
                batch = calls[at:at + EXPORT_BATCH]
                full = dict(zip(map(id, batch), requests_of(store, batch), strict=True))
            request = full[id(event)]
            if request.full:
                extra = {"request": {"messages": request.messages, "settings": request.settings}}
        yield event.to_json(extra)


def run_summary(store: RunStore, run_id: str) -> dict[str, Any]:
    """Totals of a run: messages, model calls, tokens and cost per role."""
    per_role: dict[str, dict[str, float]] = {}
    for e in run_events(store, run_id):
        if e.kind == LLM_CALL and not e.data.get("error"):
            tokens = usage(e)
            row = per_role.setdefault(e.role or NO_ROLE, {"calls": 0, "tokens": 0, "cost": 0.0})
            row["calls"] += 1
            row["tokens"] += tokens.get("prompt_tokens", 0) + tokens.get("completion_tokens", 0)
            row["cost"] += e.data.get("cost", 0.0)
    return per_role


__all__ = ["call_counts", "export_run", "graph_run", "list_runs", "no_run", "run_events", "run_summary", "show_run"]
