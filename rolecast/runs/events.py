"""The events of a run's log: their kinds, and :class:`RunEvent`, one record as a store holds it.

Every reader and writer of the log goes through this module for what an event is.
"""

from __future__ import annotations

import json
import time
from typing import Any

from pydantic_core import to_json

# Event kinds, in the order a run writes them.
RUN_STARTED = "run_started"
ROUND_STARTED = "round_started"
MESSAGE = "message"
LLM_CALL = "llm_call"
TURN_STARTED = "turn_started"
TURN_FINISHED = "turn_finished"
TURN_FAILED = "turn_failed"
ROUND_FINISHED = "round_finished"
RUN_STOPPED = "run_stopped"
CHECKPOINT = "checkpoint"
#: where a run comes from: a fork of another run at a round, or a rerun reusing another's answers
LINEAGE = "lineage"
#: a deferred approval asked (the run pauses there) / answered (by a person, later, in any process)
APPROVAL_REQUESTED = "approval_requested"
APPROVAL_DECIDED = "approval_decided"
# Events the run log writes at once (a model call: before its answer is used). The others
# ride with the next write: they are re-derived by re-executing the run, while a model call
# (paid for) must never be lost once answered.
DURABLE_KINDS = frozenset({
    RUN_STARTED, LLM_CALL, TURN_FAILED, ROUND_FINISHED, RUN_STOPPED, CHECKPOINT, LINEAGE, APPROVAL_REQUESTED,
    APPROVAL_DECIDED,
})
EVENT_KINDS = (
    RUN_STARTED, ROUND_STARTED, MESSAGE, LLM_CALL, TURN_STARTED, TURN_FINISHED, TURN_FAILED,
    ROUND_FINISHED, RUN_STOPPED, CHECKPOINT, LINEAGE, APPROVAL_REQUESTED, APPROVAL_DECIDED,
)


class RunEvent:
    """One record of a run's log.

    ``data`` is the payload; ``text`` its JSON, which is what a store writes. An event made from
    JSON text (``RunEvent(..., text=...)``: a message the writer encoded already, a record the log
    encoded when it was logged) decodes ``data`` only when something reads it, and an event made
    from ``data`` encodes its text once, when a store first asks."""

    __slots__ = ("_data", "_text", "kind", "role", "round", "run_id", "seq", "ts")

    def __init__(
        self, run_id: str, kind: str, data: dict[str, Any] | None = None, round: int = 0, role: str = "",
        seq: int = 0, ts: float | None = None, *, text: str | None = None,
    ):
        self.run_id = run_id
        self.kind = kind
        self._data = data if data is not None or text is not None else {}
        self._text = text
        self.round = round
        self.role = role
        self.seq = seq  # assigned by the store on append
        self.ts = time.time() if ts is None else ts

    @property
    def data(self) -> dict[str, Any]:
        data = self._data
        if data is None:
            data = self._data = json.loads(self._text) if self._text is not None else {}
        return data

    @data.setter
    def data(self, value: dict[str, Any]) -> None:
        self._data, self._text = value, None

    @property
    def text(self) -> str:
        """``data`` as JSON text (:func:`encode_data`): what a store writes."""
        text = self._text
        if text is None:
            text = self._text = encode_data(self._data if self._data is not None else {})
        return text

    def seal(self) -> None:
        """Encode ``data`` now and let the dict go (it is decoded again if read): an event waiting
        to be written then holds one string, not a tree of objects for the collector to walk."""
        if self._text is None:
            self._text = encode_data(self._data if self._data is not None else {})
        self._data = None

    def __repr__(self) -> str:
        return (f"RunEvent(run_id={self.run_id!r}, kind={self.kind!r}, data={self.data!r}, round={self.round!r}, "
                f"role={self.role!r}, seq={self.seq!r}, ts={self.ts!r})")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RunEvent):
            return NotImplemented
        return (self.run_id, self.kind, self.data, self.round, self.role, self.seq, self.ts) == (
            other.run_id, other.kind, other.data, other.round, other.role, other.seq, other.ts)

    __hash__ = None  # type: ignore[assignment]  # (mutable, like the dataclass it was)

    def to_json(self) -> str:
        return json.dumps(
            {"run_id": self.run_id, "seq": self.seq, "ts": self.ts, "kind": self.kind,
             "round": self.round, "role": self.role, "data": self.data},
            ensure_ascii=False,
        )


def encode_data(data: dict[str, Any]) -> str:
    """An event's payload as JSON text (what every store writes); anything JSON has no type for
    is written as its ``str()``. pydantic-core's encoder: four times the standard library's speed."""
    return to_json(data, fallback=str).decode()


__all__ = [
    "APPROVAL_DECIDED",
    "APPROVAL_REQUESTED",
    "CHECKPOINT",
    "DURABLE_KINDS",
    "EVENT_KINDS",
    "LINEAGE",
    "LLM_CALL",
    "MESSAGE",
    "ROUND_FINISHED",
    "ROUND_STARTED",
    "RUN_STARTED",
    "RUN_STOPPED",
    "TURN_FAILED",
    "TURN_FINISHED",
    "TURN_STARTED",
    "RunEvent",
    "encode_data",
]
