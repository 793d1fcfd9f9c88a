"""Loading a run log: what a store holds of its run, met again when the run re-executes (resume,
replay), and the answers of the run it reuses (``reuse=``). Part of :class:`~rolecast.runs.log.RunLog`,
whose fields these functions fill (``self`` is the log)."""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

from loguru import logger

from ..errors import UsageError
from .calls import RecordedCall, full_fields
from .events import (
    APPROVAL_DECIDED,
    APPROVAL_REQUESTED,
    LINEAGE,
    LLM_CALL,
    MESSAGE,
    ROUND_FINISHED,
    RUN_STARTED,
    llm_call,
)

if TYPE_CHECKING:
    from .base import RunStore
    from .log import RunLog


def load_run(self: RunLog, store: RunStore, after_seq: int) -> None:
    """What ``store`` holds of the log's run: its origin, approvals, and (after ``after_seq``) the calls
    and messages a re-execution meets again, the idea, the rounds finished."""
    for event in store.events(self.run_id):
        if event.kind == LINEAGE:  # (where the run comes from: not something to re-execute)
            self.lineage = event.data
            if event.data.get("relation") == "fork":
                self.pinned_rounds = int(event.data.get("at") or 0)
            continue
        if event.kind == APPROVAL_REQUESTED:
            self.approvals_asked[event.data["id"]] = event.data
        elif event.kind == APPROVAL_DECIDED:  # (the first answer holds, as every reader shows it)
            self.approvals_decided.setdefault(event.data["id"], event.data)
        if event.seq <= after_seq:
            continue  # before a checkpoint the team was restored from
        self.recorded_events += 1
        if event.kind == LLM_CALL and not event.data.get("error"):
            data = llm_call(event)
            self._calls[event.role].append(RecordedCall(
                event.role, data.get("action", ""), data["fingerprint"], data.get("request", {}),
                dict(data["response"]), event.seq, data.get("cost", 0.0), data.get("model", ""),
                reused="reused" in data, full=full_fields(data),
            ))
        elif event.kind == MESSAGE:
            message = event.data.get("message") or {}
            self._messages[message.get("sent_from", "")].append(message)
        elif event.kind == RUN_STARTED and not self.recorded_idea:
            self.recorded_idea = str(event.data.get("idea") or "")
        elif event.kind == ROUND_FINISHED:
            self.finished_rounds = max(self.finished_rounds, event.round)
    if self.recorded_events:
        logger.info(
            "run {}: {} recorded event(s), {} finished round(s); replaying them before going on",
            self.run_id, self.recorded_events, self.finished_rounds,
        )

def load_reuse(self: RunLog, store: RunStore, parent: str) -> None:
    """The parent's answered calls, less those this run used already (a rerun resumed), by key."""
    if parent == self.run_id:
        raise UsageError("a run cannot reuse itself: run it again with the same run_id to resume it")
    if self.lineage is not None and (self.lineage.get("relation"), self.lineage.get("parent")) != (
            "reuse", parent):
        raise UsageError(f"run {self.run_id!r} exists already with another origin ({self.lineage}); "
                         f"give the rerun that reuses {parent!r} a new run id")
    if self.recorded_events and self.lineage is None:
        raise UsageError(f"run {self.run_id!r} exists already as a run of its own: give the rerun that "
                         f"reuses {parent!r} a new run id")
    used = {
        e.data["reused"]["seq"] for e in store.events(self.run_id, [LLM_CALL]) if "reused" in e.data
    }
    found = 0
    for event in store.events(parent, [LLM_CALL]):
        data = llm_call(event)
        if data.get("error") or event.seq in used:
            continue
        found += 1
        call = RecordedCall(event.role, data.get("action", ""), data["fingerprint"], data.get("request", {}),
                            dict(data["response"]), event.seq, data.get("cost", 0.0), data.get("model", ""),
                            full=full_fields(data))
        self._reuse.setdefault((event.role, call.action, call.fingerprint), deque()).append(call)
    if not found and not used and not store.has_run(parent):
        raise UsageError(f"no run {parent!r} in the store to reuse")
    if self.lineage is None:
        self.lineage = {"relation": "reuse", "parent": parent}
        self.emit(LINEAGE, self.lineage, force=True)
    logger.info("run {}: {} answered call(s) of run {} to reuse", self.run_id, found, parent)


__all__ = ["load_reuse", "load_run"]
