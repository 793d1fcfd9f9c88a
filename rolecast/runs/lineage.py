"""Where a run comes from: a fork of another run at a round, or a rerun that reuses another's answers.

A run's lineage is its first event, of kind :data:`~rolecast.runs.events.LINEAGE`:

* **fork** (``{"relation": "fork", "parent": P, "at": R}``): :func:`fork_run` copies the parent's
  events of rounds 1 … R (and its start) into the new run, after the lineage event. Running the
  script under the new run id then *resumes* it: rounds 1 … R are re-executed with every model call
  answered from the copied log (none reaches the model; a script changed since is served the
  parent's answers in each role's order, so the past stays the parent's), and the run goes live
  from round R + 1. The parent is only read, never written.
* **reuse** (``{"relation": "reuse", "parent": P}``): nothing is copied. The run log answers a model
  call from the parent's log when the parent made the same call (same role, action and request
  fingerprint; a role asking the same thing twice gets the parent's answers in order); every other
  call goes live. See :class:`~rolecast.runs.log.RunLog` (``reuse=``).

LangGraph's counterparts are "replay from a checkpoint" and "fork with edited state"
(``graph.invoke(None, config_of_a_past_checkpoint)``); here the state is re-derived from the log.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import UsageError
from .base import RunStore
from .events import (
    CHECKPOINT,
    LINEAGE,
    ROUND_FINISHED,
    RUN_STARTED,
    RUN_STOPPED,
    RunEvent,
)
from .lease import Lease
from .log import new_run_id

#: the parent's events a fork does not copy: its stops and checkpoints (the fork's own come), and a
#: lineage of its own (the fork has one: its parent's parent is found through the parent)
_NOT_COPIED = frozenset({RUN_STOPPED, CHECKPOINT, LINEAGE})


@dataclass(frozen=True)
class Lineage:
    """A run's origin: ``relation`` ``"fork"`` (of ``parent`` at round ``at``) or ``"reuse"`` (of ``parent``)."""

    relation: str
    parent: str
    at: int | None = None

    def describe(self) -> str:
        return f"fork of {self.parent} at round {self.at}" if self.relation == "fork" else f"reuses {self.parent}"

    def data(self) -> dict[str, Any]:
        data: dict[str, Any] = {"relation": self.relation, "parent": self.parent}
        if self.at is not None:
            data["at"] = self.at
        return data


def lineage_of(store: RunStore, run_id: str) -> Lineage | None:
    """The lineage a run was made with (None: a run of its own)."""
    event = next(store.events(run_id, [LINEAGE]), None)
    if event is None:
        return None
    return Lineage(event.data.get("relation", ""), event.data.get("parent", ""), event.data.get("at"))


def finished_rounds(events: list[RunEvent]) -> set[int]:
    return {e.round for e in events if e.kind == ROUND_FINISHED}


def fork_run(store: RunStore, parent: str, at: int, run_id: str | None = None) -> str:
    """Make run ``run_id`` (a fresh id by default) a fork of ``parent`` at round ``at``; its id.

    The fork holds the parent's start and every event of its rounds 1 … ``at`` (``at`` = 0: only
    the start and the idea), written in one transaction after its lineage event. ``at`` must be a
    round the parent finished; the fork's id must be new in the store."""
    if isinstance(at, bool) or not isinstance(at, int) or at < 0:
        raise UsageError(f"fork at a round: a whole number >= 0, not {at!r}")
    events = list(store.events(parent))
    if not events:
        known = ", ".join(r.run_id for r in store.runs()[:5]) or "none"
        raise UsageError(f"no run {parent!r} to fork in the store (recent runs: {known})")
    done = finished_rounds(events)
    if at and at not in done:
        last = max(done, default=0)
        raise UsageError(f"run {parent!r} did not finish round {at} (its last finished round is {last}); "
                         f"fork at a round from 0 to {last}")
    run_id = run_id or new_run_id()
    if run_id == parent:
        raise UsageError("a fork needs a run id of its own (the parent is never written)")
    if store.has_run(run_id):
        raise UsageError(f"run {run_id!r} exists already in the store: give the fork a new run id")
    lease = Lease(store, run_id).acquire()  # (nobody else writes the new run meanwhile)
    try:
        copied = [RunEvent(run_id, LINEAGE, Lineage("fork", parent, at).data())]
        started = False
        for event in events:
            if event.round > at or event.kind in _NOT_COPIED:
                continue
            if event.kind == RUN_STARTED:
                if started:
                    continue  # the parent's later starts were resumes: the fork has one start
                started = True
            copied.append(RunEvent(run_id, event.kind, None, event.round, event.role, 0, event.ts, text=event.text))
        # the fork waits to go on (rolecast runs continue, or the script with its run id): its log says so, so
        # that once it has gone on and stopped, its starts and stops pair up (a reader sees it finished)
        copied.append(RunEvent(run_id, RUN_STOPPED, {"reason": f"waiting: fork of {parent} at round {at}",
                                                     "rounds": at}, at))
        store.extend(copied)
    finally:
        lease.release()
    return run_id


def check_lineage(store: RunStore, run_id: str, wanted: Lineage) -> bool:
    """Whether ``run_id`` exists already; a :class:`UsageError` when it exists with another lineage."""
    if not store.has_run(run_id):
        return False
    found = lineage_of(store, run_id)
    if found != wanted:
        had = found.describe() if found is not None else "a run of its own"
        raise UsageError(f"run {run_id!r} exists already as {had}, not as a {wanted.describe()}: "
                         "give the new run another id")
    return True


__all__ = ["Lineage", "check_lineage", "finished_rounds", "fork_run", "lineage_of"]
