"""What the pages draw, worked out from the adapter's values: pure Python, no web framework.

* :func:`group` turns a page of events into rounds → role turns → events (a turn is every event
  a role wrote in a round, in order: its model calls, its messages, its failure);
* :func:`graph` lays out the message graph (roles on a circle, one arrow per sender and receiver,
  counting the messages on it) as coordinates the template writes as SVG — no graph library;
* :func:`compare` lines two runs' messages up and finds where they part, and where their model
  calls do.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ..runs.events import MESSAGE, ROUND_STARTED, RUN_STARTED
from .align import Stop, opcodes
from .source import EVERYONE, EventView, MessageEdge, MessageView

#: the most rows a comparison shows (the rest are counted: a page of 16,000 changed messages would be
#: tens of megabytes of HTML)
MAX_ROWS = 400

#: colour classes (the stylesheet's ``role-0`` … ``role-7``); "user" and unknown senders are grey
PALETTE = 8


def colours(roles: list[str]) -> dict[str, str]:
    """A stable colour class per role (by its place in the team), ``role-user`` for the user."""
    out = {name: f"role-{i % PALETTE}" for i, name in enumerate(roles)}
    out.setdefault("user", "role-user")
    return out


@dataclass
class Turn:
    role: str
    events: list[EventView] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return any(e.failed for e in self.events)


@dataclass
class RoundGroup:
    round: int
    head: list[EventView] = field(default_factory=list)  # the run's and the round's start
    turns: list[Turn] = field(default_factory=list)
    tail: list[EventView] = field(default_factory=list)  # the round's end, the run's stop, a checkpoint …

    def turn(self, role: str) -> Turn:
        for turn in self.turns:
            if turn.role == role:
                return turn
        turn = Turn(role)
        self.turns.append(turn)
        return turn


_HEAD = frozenset({RUN_STARTED, ROUND_STARTED})


def group(events: list[EventView]) -> list[RoundGroup]:
    """Rounds → turns → events, in the order they happened (a page may begin or end inside a round).

    A turn holds every event of one role in the round (concurrent roles' events interleave in the
    log; on the page each role's stay together); the events of no role are the round's head (its
    start) or tail (its end, the run's stop, a checkpoint)."""
    rounds: list[RoundGroup] = []
    for e in events:
        if not rounds or rounds[-1].round != e.round:
            rounds.append(RoundGroup(e.round))
        current = rounds[-1]
        if e.kind == MESSAGE:
            current.turn(e.role or e.data.get("message", {}).get("sent_from") or "user").events.append(e)
        elif e.role:
            current.turn(e.role).events.append(e)
        elif e.kind in _HEAD:
            current.head.append(e)
        else:
            current.tail.append(e)
    return rounds


def source_of(call: dict[str, Any], round: int = 0, fork_at: int | None = None) -> str:
    """Where a logged model call's answer came from: ``live`` (asked of the model), ``reused`` (a
    rerun answered it from its parent's log: ``data["reused"]``) or ``replayed`` (a fork's rounds
    1 … ``fork_at`` are its parent's calls, copied, and answered from the log when the fork runs)."""
    if call.get("reused"):
        return "reused"
    if fork_at is not None and round <= fork_at:
        return "replayed"
    return "live"


#: what a model call made in no action was for (its request's kind), as ``rolecast runs show`` says it
_CALL_PURPOSE = {"choose": "choose the next action", "embed": "embed text", "complete": "a call outside an action"}


#: the action a compaction's summary call is logged under (``roles.fitting.COMPACTED``)
COMPACTION = "rolecast.compaction"


def is_summary(call: dict[str, Any]) -> bool:
    """Whether a logged model call wrote a compaction's summary of a role's earlier messages."""
    return call.get("action") == COMPACTION


def call_title(call: dict[str, Any]) -> str:
    """A logged model call's title: its action, or what a call made in no action was for (a state
    choice: "choose the next action"), never an empty one."""
    if is_summary(call):
        return "summary of earlier messages (compaction)"
    action = call.get("action")
    if action:
        return str(action)
    request = call.get("request")
    kind = request.get("kind") if isinstance(request, dict) else None
    return _CALL_PURPOSE.get(str(kind), "no action")


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def fitted_note(data: dict[str, Any]) -> str:
    """What a ``history_fitted`` event says, in words: which prompt left out how many earlier messages
    (and their tokens of the history's, when logged), how many it kept, and the window it fits."""
    purpose = str(data.get("purpose") or "a prompt")
    which = {"state": "the state prompt", "compaction": "the summary's prompt"}.get(purpose)
    if which is None:
        which = f"{purpose.removeprefix('action ')}'s history" if purpose.startswith("action ") else purpose
    omitted = _int(data.get("omitted")) or 0
    unit = str(data.get("unit") or "message")
    out = f"{which}: {omitted:,} earlier {unit}{'' if omitted == 1 else 's'} left out"
    left, total = _int(data.get("omitted_tokens")), _int(data.get("history_tokens"))
    if left is not None and total:
        out += f" ({left:,} of {total:,} tokens)"
    kept, window = _int(data.get("kept")), _int(data.get("window"))
    if kept is not None:
        out += f", {kept:,} kept"
    if window:
        out += f" to fit the {window:,}-token window"
    return out


# ------------------------------------------------------------------------ graph
@dataclass
class Node:
    name: str
    x: float
    y: float
    sent: int
    received: int
    colour: str
    #: the messages a click on the node lists: those it sent (for "everyone": those sent to all)
    seqs: list[int] = field(default_factory=list)


@dataclass
class Arrow:
    sender: str
    receiver: str
    count: int
    rounds: list[int]
    seqs: list[int]
    path: str  # SVG path data
    label_x: float
    label_y: float
    colour: str
    #: the messages on the arrow, per round (the page's round filter shows one round's)
    by_round: dict[int, list[int]] = field(default_factory=dict)


@dataclass
class Graph:
    width: int
    height: int
    nodes: list[Node]
    arrows: list[Arrow]

    @property
    def rounds(self) -> list[int]:
        """The rounds with messages (the round filter's choices)."""
        return sorted({r for a in self.arrows for r in a.by_round})


def graph(edges: list[MessageEdge], roles: list[str], width: int = 520, height: int = 360) -> Graph:
    """Roles on a circle, the messages to everyone gathered in a hub at its centre, and one curved
    arrow per (sender, receiver) over all rounds."""
    names = [n for n in ["user", *roles] if any(n in (e.sender, e.receiver) for e in edges) or n in roles]
    for e in edges:
        for n in (e.sender, e.receiver):
            if n not in names and n != EVERYONE:
                names.append(n)
    palette = colours(roles)
    palette[EVERYONE] = "role-all"
    cx, cy = width / 2, height / 2
    radius = min(width, height) / 2 - 50
    place: dict[str, tuple[float, float]] = {}
    for i, name in enumerate(names):
        angle = -math.pi / 2 + 2 * math.pi * i / max(1, len(names))
        place[name] = (cx + radius * math.cos(angle), cy + radius * math.sin(angle))
    if any(e.receiver == EVERYONE for e in edges):
        place[EVERYONE] = (cx, cy)
        names.append(EVERYONE)
    merged: dict[tuple[str, str], tuple[list[int], list[int]]] = {}
    per_round: dict[tuple[str, str], dict[int, list[int]]] = {}
    for e in edges:
        rounds, seqs = merged.setdefault((e.sender, e.receiver), ([], []))
        rounds.append(e.round)
        seqs.extend(e.seqs)
        per_round.setdefault((e.sender, e.receiver), {}).setdefault(e.round, []).extend(e.seqs)
    arrows = []
    for (sender, receiver), (rounds, seqs) in merged.items():
        (x1, y1), (x2, y2) = place[sender], place[receiver]
        if sender == receiver:
            path = f"M{x1:.1f},{y1 - 18:.1f} c-40,-50 40,-50 0,0"
            lx, ly = x1, y1 - 52
        else:
            dx, dy = x2 - x1, y2 - y1
            length = math.hypot(dx, dy) or 1.0
            ux, uy = dx / length, dy / length
            sx, sy, ex, ey = x1 + ux * 24, y1 + uy * 24, x2 - ux * 28, y2 - uy * 28  # leave the node circles
            # bend to the left of the direction: the arrows A→B and B→A do not overlap
            bend = 12 if receiver == EVERYONE else 30
            bx, by = (sx + ex) / 2 - uy * bend, (sy + ey) / 2 + ux * bend
            path = f"M{sx:.1f},{sy:.1f} Q{bx:.1f},{by:.1f} {ex:.1f},{ey:.1f}"
            lx, ly = (sx + 2 * bx + ex) / 4, (sy + 2 * by + ey) / 4
        arrows.append(Arrow(sender, receiver, len(set(seqs)), sorted(set(rounds)), sorted(set(seqs)), path,
                            lx, ly, palette.get(sender, "role-user"), per_round[(sender, receiver)]))
    nodes = []
    for n in names:
        sent = sorted({q for a in arrows if a.sender == n for q in a.seqs})
        received = sorted({q for a in arrows if a.receiver == n for q in a.seqs})
        nodes.append(Node(n, *place[n], len(sent), len(received), palette.get(n, "role-user"),
                          received if n == EVERYONE else sent))
    return Graph(width, height, nodes, arrows)


# ---------------------------------------------------------------------- compare
@dataclass
class Row:
    """One line of the comparison: a message of each run (None where one run has none)."""

    kind: str  # "same", "changed", "only-left", "only-right", "skipped"
    left: MessageView | None = None
    right: MessageView | None = None
    skipped: int = 0


@dataclass
class Comparison:
    rows: list[Row]
    #: where the messages part: the first row that is not the same (its index), None when alike
    first_difference: int | None
    #: the first model call that differs: (round, role, action, left seq, right seq) or None
    call_divergence: tuple[int, str, str, int | None, int | None] | None
    same_messages: int
    #: the messages the runs share before they part (all of them when they do not)
    common_prefix: int
    #: the rows of differing messages not shown, past :data:`MAX_ROWS`
    rows_left_out: int = 0


def _key(m: MessageView) -> tuple[str, tuple[str, ...], str]:
    return (m.sender, tuple(m.receivers), m.content)


def compare(left: list[MessageView], right: list[MessageView],
            left_calls: list[tuple[int, int, str, str, str]], right_calls: list[tuple[int, int, str, str, str]],
            context: int = 2, max_rows: int = MAX_ROWS, stop: Stop | None = None) -> Comparison:
    """Line the two runs' messages up (:func:`rolecast.studio.align.opcodes`: near-linear time, whatever
    the runs hold); long stretches of the same messages fold into one ``skipped`` row, keeping
    ``context`` on each side of a difference; rows past ``max_rows`` are counted, not made. ``stop``:
    asked between steps; when true, :class:`~rolecast.studio.align.Abandoned` (the client left)."""
    found = opcodes([_key(m) for m in left], [_key(m) for m in right], stop or (lambda: False))
    rows: list[Row] = []
    same = left_out = 0
    for tag, i1, i2, j1, j2 in found:
        if tag == "equal":
            same += i2 - i1
        if len(rows) >= max_rows:
            left_out += 0 if tag == "equal" else max(i2 - i1, j2 - j1)
            continue
        if tag == "equal":
            pairs = list(zip(left[i1:i2], right[j1:j2], strict=True))
            head = pairs[:context] if rows else []
            tail = pairs[-context:] if i2 < len(left) or j2 < len(right) else []
            if len(pairs) <= len(head) + len(tail) + 1:
                rows += [Row("same", a, b) for a, b in pairs]
            else:
                rows += [Row("same", a, b) for a, b in head]
                rows.append(Row("skipped", skipped=len(pairs) - len(head) - len(tail)))
                rows += [Row("same", a, b) for a, b in tail]
        else:
            a_side, b_side = left[i1:i2], right[j1:j2]
            for k in range(max(len(a_side), len(b_side))):
                if len(rows) >= max_rows:
                    left_out += max(len(a_side), len(b_side)) - k
                    break
                a = a_side[k] if k < len(a_side) else None
                b = b_side[k] if k < len(b_side) else None
                rows.append(Row("changed" if a and b else ("only-left" if a else "only-right"), a, b))
    first = next((i for i, r in enumerate(rows) if r.kind not in ("same", "skipped")), None)
    prefix = found[0][2] if found and found[0][0] == "equal" else 0
    return Comparison(rows, first, _call_divergence(left_calls, right_calls), same, prefix, left_out)


def _call_divergence(left: list[tuple[int, int, str, str, str]], right: list[tuple[int, int, str, str, str]]
                     ) -> tuple[int, str, str, int | None, int | None] | None:
    """The first model call (per role, in order: concurrent roles may interleave differently) whose
    request differs between the runs, or that one run made and the other did not."""
    by_role: dict[str, tuple[list[tuple[int, int, str, str, str]], list[tuple[int, int, str, str, str]]]] = {}
    for call in left:
        by_role.setdefault(call[2], ([], []))[0].append(call)
    for call in right:
        by_role.setdefault(call[2], ([], []))[1].append(call)
    found: list[tuple[int, str, str, int | None, int | None]] = []
    for role, (mine, theirs) in by_role.items():
        for k in range(max(len(mine), len(theirs))):
            a = mine[k] if k < len(mine) else None
            b = theirs[k] if k < len(theirs) else None
            if a is None or b is None or a[4] != b[4]:
                at = a or b
                assert at is not None
                found.append((at[1], role, at[3], a[0] if a else None, b[0] if b else None))
                break
    return min(found, key=lambda f: (f[0], f[3] or f[4] or 0)) if found else None


__all__ = ["COMPACTION", "Comparison", "Graph", "RoundGroup", "Row", "Turn", "call_title", "colours", "compare",
           "fitted_note", "graph", "group", "is_summary", "source_of"]
