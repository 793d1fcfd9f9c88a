"""One run's log while it runs: write-ahead events, and recorded answers on resume or replay.

A :class:`RunLog` belongs to a team run. The bus, the role turns and the LLM seam
call it where things happen (:meth:`RunLog.emit`, :meth:`RunLog.record_call`); it
appends to the :class:`~rolecast.store.RunStore` *before* the effect, and passes each
event on to subscribers (a console, traces, your own code).

Resume and replay are the same mechanism. Opening a log for a ``run_id`` the store
already holds loads its recorded model calls and messages; re-running the same script
then meets every recorded call again — :meth:`RunLog.lookup` answers it from the log
(no request reaches the model, no cost is charged twice) — until the first call the
log does not hold, which goes live (``mode="resume"``) or raises
:class:`~rolecast.errors.ReplayMissing` (``mode="replay"``). A call the log holds
something *else* for (the script changed) raises :class:`~rolecast.errors.ReplayMismatch`
naming the role, the action and the first differing request.

Calls are matched per role by a fingerprint of the request (messages, stop sequences,
schema, tools and settings), so concurrent roles may interleave differently than in
the recorded run.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
import uuid
from collections import defaultdict, deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar, Token
from dataclasses import dataclass
from typing import Any, Literal

from loguru import logger

from .errors import ReplayMismatch, ReplayMissing
from .store import (
    LLM_CALL,
    MESSAGE,
    ROUND_FINISHED,
    RUN_STARTED,
    RunEvent,
    RunStore,
)

Mode = Literal["record", "resume", "replay"]
Subscriber = Callable[[RunEvent], None]


_ACTION: ContextVar[str] = ContextVar("rolecast_action", default="")


def enter_action(name: str) -> Token[str]:
    """The fast form of :func:`acting` (the hot path of every action run); undo with :func:`exit_action`."""
    return _ACTION.set(name)


def exit_action(token: Token[str]) -> None:
    _ACTION.reset(token)


def current_action() -> str:
    """The name of the action running in this task ("" outside any action)."""
    return _ACTION.get()


@contextmanager
def acting(name: str) -> Iterator[None]:
    """Mark the running task as inside action ``name`` (model calls are logged with it)."""
    token = _ACTION.set(name)
    try:
        yield
    finally:
        _ACTION.reset(token)


def new_run_id() -> str:
    """A fresh, sortable run id: UTC time plus a random suffix."""
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + uuid.uuid4().hex[:8]


def fingerprint(request: dict[str, Any]) -> str:
    """A stable hash of what a model call asked (the same request → the same fingerprint)."""
    text = json.dumps(request, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


@dataclass
class RecordedCall:
    """A model call of the log: who asked, the request's fingerprint and text, and the answer."""

    role: str
    action: str
    fingerprint: str
    request: dict[str, Any]
    response: dict[str, Any]
    seq: int


class RunLog:
    """The write-ahead log of one run (see the module docstring)."""

    def __init__(
        self, store: RunStore | None, run_id: str | None = None, *, mode: Mode = "resume", after_seq: int = 0
    ):
        self.store = store
        self.run_id = run_id or new_run_id()
        self.mode: Mode = mode
        self.round = 0
        self._subscribers: list[Subscriber] = []
        #: a subscriber (the live console on a terminal) wants the model's tokens as they come:
        #: the LLM seam then streams plain-text calls and passes each chunk as an ``llm_token`` event
        self.stream_tokens = False
        self._lock = threading.Lock()
        self._calls: dict[str, list[RecordedCall]] = defaultdict(list)  # by role, unconsumed, in order
        self._messages: dict[str, deque[dict[str, Any]]] = defaultdict(deque)  # by sender
        self.finished_rounds = 0
        self.recorded_events = 0
        self.served_calls = 0
        if store is not None:
            self._load(store, after_seq)

    # ------------------------------------------------------------------ loading
    def _load(self, store: RunStore, after_seq: int) -> None:
        for event in store.events(self.run_id):
            if event.seq <= after_seq:
                continue  # before a checkpoint the team was restored from
            self.recorded_events += 1
            if event.kind == LLM_CALL and not event.data.get("error"):
                data = event.data
                self._calls[event.role].append(RecordedCall(
                    event.role, data.get("action", ""), data["fingerprint"], data.get("request", {}),
                    data["response"], event.seq,
                ))
            elif event.kind == MESSAGE:
                message = event.data["message"]
                self._messages[message.get("sent_from", "")].append(message)
            elif event.kind == ROUND_FINISHED:
                self.finished_rounds = max(self.finished_rounds, event.round)
        if self.recorded_events:
            logger.info(
                "run {}: {} recorded event(s), {} finished round(s); replaying them before going on",
                self.run_id, self.recorded_events, self.finished_rounds,
            )

    @property
    def idle(self) -> bool:
        """Nothing reads this log: no store, no subscriber, nothing recorded to answer from. Its
        writers may then skip the work of describing an event (a message's JSON, a call's fingerprint)."""
        return self.store is None and not self._subscribers and not self.recorded_events and self.mode != "replay"

    @property
    def resuming(self) -> bool:
        """True while the run re-executes what the log already holds (events are not written again)."""
        return self.round <= self.finished_rounds and self.recorded_events > 0

    @property
    def is_new(self) -> bool:
        return self.recorded_events == 0

    # ------------------------------------------------------------------- events
    def subscribe(self, fn: Subscriber) -> Subscriber:
        """Call ``fn(event)`` for every event from now on (a console, a tracer …)."""
        self._subscribers.append(fn)
        return fn

    def emit(self, kind: str, data: dict[str, Any] | None = None, *, role: str = "", force: bool = False) -> RunEvent:
        """Log an event (unless it re-executes a recorded round), then tell the subscribers."""
        event = RunEvent(self.run_id, kind, data or {}, self.round, role)
        if self.store is not None and (force or not self.resuming):
            self.store.append(event)
        for fn in self._subscribers:
            try:
                fn(event)
            except Exception as exc:  # a reader must never break the run
                logger.warning("run event subscriber {!r} failed: {}", fn, exc)
        return event

    def notify(self, kind: str, data: dict[str, Any] | None = None, *, role: str = "") -> RunEvent:
        """Tell the subscribers without logging (passing moments: a token streamed, a role thinking)."""
        event = RunEvent(self.run_id, kind, data or {}, self.round, role)
        for fn in self._subscribers:
            try:
                fn(event)
            except Exception as exc:
                logger.warning("run event subscriber {!r} failed: {}", fn, exc)
        return event

    def start(self, data: dict[str, Any]) -> None:
        kind_data = {**data, "resumed": not self.is_new}
        self.emit(RUN_STARTED, kind_data, force=True)

    # ----------------------------------------------------------------- messages
    def recorded_message(self, sender: str, content: str, cause_by: str) -> str | None:
        """The id the log gave this message, if it is the sender's next recorded one (no new event)."""
        with self._lock:
            queue = self._messages.get(sender)
            if not queue:
                return None
            head = queue[0]
            if head.get("content") == content and head.get("cause_by") == cause_by:
                queue.popleft()
                return str(head["id"])
            return None

    def message(self, message_json: dict[str, Any]) -> None:
        """Log a published message (write-ahead: before it is delivered)."""
        self.emit(MESSAGE, {"message": message_json}, role=message_json.get("sent_from", ""), force=True)

    # -------------------------------------------------------------- model calls
    def lookup(self, role: str, action: str, fp: str, request: dict[str, Any]) -> dict[str, Any] | None:
        """The recorded answer to this call, or None when the log holds no more calls for ``role``.

        Raises :class:`ReplayMismatch` when the log holds calls for ``role`` but none with
        this request, and :class:`ReplayMissing` in replay mode when it holds none at all.
        """
        key = role or ""
        with self._lock:
            pending = self._calls.get(key)
            if pending:
                for i, call in enumerate(pending):
                    if call.fingerprint == fp:
                        del pending[i]
                        self.served_calls += 1
                        return call.response
                first = pending[0]
                raise ReplayMismatch(
                    role=key, action=action, recorded=first.request, asked=request,
                    recorded_action=first.action, run_id=self.run_id,
                )
        if self.mode == "replay":
            raise ReplayMissing(role=key, action=action, asked=request, run_id=self.run_id)
        return None

    def record_call(self, role: str, data: dict[str, Any]) -> None:
        """Log one model call (answered, or failed with ``data["error"]``)."""
        self.emit(LLM_CALL, data, role=role, force=True)

    def pending_calls(self) -> int:
        """Recorded calls not met again yet."""
        return sum(len(v) for v in self._calls.values())


__all__ = [
    "Mode", "RecordedCall", "RunLog", "acting", "current_action", "enter_action", "exit_action", "fingerprint",
    "new_run_id",
]
