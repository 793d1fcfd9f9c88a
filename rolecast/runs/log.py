"""One run's log while it runs: write-ahead events, and recorded answers on resume or replay.

A :class:`RunLog` belongs to a team run. The bus, the role turns and the LLM seam
call it where things happen (:meth:`RunLog.emit`, :meth:`RunLog.record_call`); it
appends to the :class:`~rolecast.runs.store.RunStore` *before* the effect, and passes each
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

Writing is batched: events wait in the log until the end of the event loop's current
turn and are then written to the store together, in one transaction — or, once
:data:`BATCH_EVENTS` wait (a round of many roles, all answered in the same turn), at once: the
log holds at most one batch, and the store writes big batches (a 100,000-role round in 25). A
store that writes a batch behind (the SQLite store with its journal and
``rolecast.runs.sqlite.WRITE_BEHIND``: in a thread of its own, while the round goes on;
:mod:`rolecast.runs.behind`) gets batches of :data:`BEHIND_EVENTS`; its next write, and the
round's end, come after it. In an in-process
round (:meth:`RunLog.hold`) the events that can be re-derived — the round's start, its
messages — wait for the next write instead: a model call's, or the round's end, which is
written before any of the round's messages is delivered. The events that cannot be
re-derived (:data:`~rolecast.runs.store.DURABLE_KINDS`: a failure, a round's end, the run's start
and stop, a checkpoint) are written at once. Outside an event loop every event is written
at once.

A model call's answer is never used before it is durable (:meth:`RunLog.log_call`). The
SQLite store makes it durable at once, with one copy into its journal
(:mod:`rolecast.runs.journal`), and the database gets it with the turn's other events; a crash
(``kill -9``) then re-issues only the calls in flight. With a store that keeps no journal
(PostgreSQL, memory), the calls answered in one turn of the event loop share one
transaction (a group commit) that each waits for; a crash also re-issues those answered in
the turn it struck, since none of them was used. ``durability="call"`` commits every call
alone, at once, in the database itself (about twice the log's cost on a 100-role
broadcast run; see ``bench/bench_store.py``).
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections import defaultdict, deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Literal

from loguru import logger
from pydantic import BaseModel
from pydantic_core import PydanticSerializationError

from ..errors import ReplayMismatch, ReplayMissing, UsageError
from .base import RunStore
from .calls import (
    FullRequest,
    RecordedCall,
    acting,
    canonical_json,
    current_action,
    enter_action,
    exit_action,
    fingerprint,
    new_run_id,
    quote_json,
)
from .events import (
    APPROVAL_DECIDED,
    APPROVAL_REQUESTED,
    DURABLE_KINDS,
    FORMAT_VERSION,
    LLM_CALL,
    MESSAGE,
    RUN_STARTED,
    RunEvent,
    encode_data,
)
from .ids import check_run_id
from .lease import Lease
from .loading import load_reuse, load_run
from .requests import SentTexts, encode_request

Mode = Literal["record", "resume", "replay"]
#: when a model call is committed: with the other calls answered in the same turn of the event
#: loop (``"batched"``, one transaction for them all) or alone, at once (``"call"``)
Durability = Literal["batched", "call"]
DURABILITIES: tuple[Durability, ...] = ("batched", "call")


def check_durability(durability: Any, where: str = "") -> Durability:
    """``durability`` if it is one of :data:`DURABILITIES`, else a UsageError (``where``: who was
    given it, e.g. ``"Team"``, named in the message)."""
    if durability not in DURABILITIES:
        given = f"{where}(durability={durability!r})" if where else f"durability={durability!r}"
        raise UsageError(f'{given}: choose "batched" or "call"')
    return durability  # type: ignore[no-any-return]
#: a model call durable in the store's journal reaches its database with the next write, or after
#: this many seconds (see RunLog._flush_lazily)
LAZY_WRITE_S = 0.05
#: once this many events wait, they are written at once (in the turn that queued the last one): what
#: the log holds, and the store's journal, stay bounded in a round of any size, and the store writes
#: them in batches big enough to be cheap per event (the texts' index is updated page by page)
BATCH_EVENTS = 8192
#: the batches of a store that writes them behind (:attr:`RunStore.writes_behind
#: <rolecast.runs.base.RunStore.writes_behind>`: the SQLite store, in its thread) are this small: the
#: round goes on while one is written, and an event written sooner is freed sooner (a fifth fewer
#: young collections at 100,000 agents)
BEHIND_EVENTS = 1024
#: whether a log records each model call's full request (every message, by reference to the store's
#: texts, and the settings) when its ``record_requests`` is not given: on. Off, a call keeps only its
#: summary, as before payload format 3 (bench/bench_store.py measures both)
RECORD_REQUESTS = True
Subscriber = Callable[[RunEvent], None]


class RunLog:
    """The write-ahead log of one run (see the module docstring)."""

    def __init__(
        self, store: RunStore | None, run_id: str | None = None, *, mode: Mode = "resume", after_seq: int = 0,
        durability: Durability = "batched", lease: bool = False, reuse: str | None = None,
        record_requests: bool | None = None,
    ):
        check_durability(durability)
        self.store = store
        self.durability: Durability = durability
        self.run_id = check_run_id(run_id) if run_id not in (None, "") else new_run_id()
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
        #: model calls answered from the parent's log (``reuse=``), what they cost the parent, and the
        #: calls that went to a model in this process
        self.reused_calls = 0
        self.saved_cost = 0.0
        self.live_calls = 0
        #: a fork's rounds 1 … ``pinned_rounds`` are its parent's: served in each role's order even
        #: when the script asks something else now (see rolecast.runs.lineage)
        self.pinned_rounds = 0
        self.lineage: dict[str, Any] | None = None
        #: the idea the run was started with (a fork's or a resumed run's script may leave it out)
        self.recorded_idea = ""
        #: the run whose answers this one reuses, and those answers not used yet, by (role, action, fingerprint)
        self.reuse = reuse
        self._reuse: dict[tuple[str, str, str], deque[RecordedCall]] = {}
        #: deferred approvals: asked (id -> the request's data) and answered (id -> the decision's data)
        self.approvals_asked: dict[str, dict[str, Any]] = {}
        self.approvals_decided: dict[str, dict[str, Any]] = {}
        self._approval_counts: dict[str, int] = {}
        #: log each model call's full request (every message, the settings; see rolecast.runs.requests)
        self.record_requests = RECORD_REQUESTS if record_requests is None else record_requests
        #: the keys of the texts this log sent to the store (each goes once, with the first call using it)
        self._sent_texts = SentTexts()
        self._pending: list[RunEvent] = []  # logged, not written to the store yet
        #: a full batch: this many pending events are written at once (BATCH_EVENTS, BEHIND_EVENTS)
        self._batch = min(BATCH_EVENTS, BEHIND_EVENTS) if store is not None and store.writes_behind else BATCH_EVENTS
        self._flush_on: asyncio.AbstractEventLoop | None = None  # the loop a write is scheduled on
        self._later: asyncio.TimerHandle | None = None  # a lazy write of staged calls (see _flush_lazily)
        self._waiters: list[asyncio.Future[None]] = []  # callers waiting for the pending events to be written
        self._held = False  # in a round that ends with a write: the other events wait for a write (see hold())
        #: the store's ``stage`` (durable at once, written to the database with the next write), if it has one
        self._stage: Callable[[Sequence[RunEvent]], bool] | None = store.stage if store is not None else None
        #: this process's hold on the run (one writer per run), with ``lease=True`` (a team's log)
        self.lease: Lease | None = None
        if store is not None and lease and mode != "replay":
            self.lease = Lease(store, self.run_id).acquire()  # (RunInUse: another live process writes it)
            weakref.finalize(self, self.lease.release)  # a log dropped without its team's run ending
        if store is not None:
            load_run(self, store, after_seq)
            if reuse is not None:
                load_reuse(self, store, reuse)

    def hold_lease(self) -> None:
        """Take the run's lease again after :meth:`release_lease` (nothing when held, or without one)."""
        if self.lease is not None:
            self.lease.acquire()

    def release_lease(self) -> None:
        """Give the run's lease back (the team's run ended): another process may now write the run."""
        if self.lease is not None:
            self.lease.release()

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
        """Log an event (unless it re-executes a recorded round), then tell the subscribers.

        A :data:`~rolecast.runs.store.DURABLE_KINDS` event is in the store when this returns (and its
        ``seq`` set); the others are written at the end of the event loop's turn."""
        event = RunEvent(self.run_id, kind, data or {}, self.round, role)
        if self.store is not None and (force or not self.resuming):
            self._write(event)
        if self._subscribers:
            self._tell(event)
        return event

    def _write(self, event: RunEvent) -> None:
        """Queue ``event`` for the store: written at once if durable, else at the end of this turn."""
        if not self._subscribers:  # nobody reads the dict: it waits as its JSON text
            event.seal()
        with self._lock:  # (a thread's event must not slip past a write taking the list)
            self._pending.append(event)
        if event.kind in DURABLE_KINDS:
            self.flush()
        elif len(self._pending) >= self._batch:
            self.flush(behind=True)
        elif not self._held:
            self._flush_soon()

    @contextmanager
    def hold(self) -> Iterator[None]:
        """A round whose end is written at once (``round_finished``) and comes before anything it did
        takes effect (the in-process round: its messages are delivered at its end): meanwhile the
        events that may be re-derived (the round's start, messages) ride with the next write — a
        model call's commit, or the round's end — instead of a write of their own. Pending events
        left when the block exits are written at the end of that turn of the event loop."""
        self._held = True
        try:
            yield
        finally:
            self._held = False
            if self._pending:
                self._flush_soon()

    def _tell(self, event: RunEvent) -> None:
        for fn in self._subscribers:
            try:
                fn(event)
            except Exception as exc:  # a reader must never break the run
                logger.warning("run event subscriber {!r} failed: {}", fn, exc)

    def _flush_soon(self, wait: bool = False) -> asyncio.Future[None] | None:
        """Write the pending events at the end of this turn of the event loop (at once outside one):
        the events of one burst — every role answered in the same turn — share one transaction.
        With ``wait``, returns a future that is done once they are written (None: written already)."""
        scheduled = self._flush_on
        if not wait and scheduled is not None and not scheduled.is_closed():
            return None  # a write is scheduled already (asking for the running loop is a system call on 3.11)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.flush()
            return None
        if scheduled is not loop or loop.is_closed():  # none scheduled (or one on a loop that has closed since)
            self._flush_on = loop
            loop.call_soon(self._scheduled_flush)
        if not wait:
            return None
        waiter = loop.create_future()  # one per caller: a caller cancelled cancels only its own wait
        self._waiters.append(waiter)
        return waiter

    def _scheduled_flush(self) -> None:
        self._flush_on = None
        try:
            self.flush()
        except Exception as exc:  # the callers waiting for these events get the error; nobody else would
            logger.error("could not write to the run store {}: {}", self.store, exc)

    def _flush_lazily(self) -> None:
        """Staged calls (durable already, in the store's journal) go to the database with the next
        write anyway, or within :data:`LAZY_WRITE_S`, or at once when :data:`BATCH_EVENTS` wait: in a
        sequential chain (each call waits for the one before, so every turn of the event loop holds
        one call) that is one transaction per many calls instead of one per call."""
        if len(self._pending) >= self._batch:
            self.flush(behind=True)
            return
        if self._flush_on is not None and not self._flush_on.is_closed():
            return  # a write this turn takes them along
        if self._later is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.flush()
            return
        self._later = loop.call_later(LAZY_WRITE_S, self._lazy_flush)

    def _lazy_flush(self) -> None:
        self._later = None
        self._scheduled_flush()

    def flush(self, *, behind: bool = False) -> None:
        """Write every pending event to the store now: durable when this returns.

        When the write fails, the events stay pending (the next write tries them again) and the
        error is raised here and to the callers waiting for them (:meth:`commit_call`).

        ``behind=True`` (a full batch, :data:`BATCH_EVENTS`): the store may finish writing them after
        this returns (:meth:`RunStore.extend_behind <rolecast.runs.base.RunStore.extend_behind>`: the
        SQLite store, in a thread), when nobody waits for them — every event of such a batch is staged
        already (a model call) or may be re-derived; the next write, and every read, comes after it."""
        later, self._later = self._later, None
        if later is not None:
            later.cancel()
        with self._lock:
            pending, waiters = self._pending, self._waiters
            if waiters:
                self._waiters = []
            if pending:
                self._pending = []
        if pending:
            try:
                assert self.store is not None
                if behind and not waiters:
                    self.store.extend_behind(pending)
                else:
                    self.store.extend(pending)
            except BaseException as exc:
                with self._lock:
                    self._pending = pending + self._pending
                for waiter in waiters:
                    if not waiter.done() and not waiter.get_loop().is_closed():
                        waiter.set_exception(exc)
                raise
        for waiter in waiters:
            if not waiter.done() and not waiter.get_loop().is_closed():
                waiter.set_result(None)

    def notify(self, kind: str, data: dict[str, Any] | None = None, *, role: str = "") -> RunEvent | None:
        """Tell the subscribers without logging (passing moments: a token streamed, a role thinking);
        the event told, or None when nobody listens (then none is made)."""
        if not self._subscribers:
            return None
        event = RunEvent(self.run_id, kind, data or {}, self.round, role)
        self._tell(event)
        return event

    def start(self, data: dict[str, Any]) -> None:
        kind_data = {**data, "resumed": not self.is_new, "format": FORMAT_VERSION}
        self.emit(RUN_STARTED, kind_data, force=True)

    # ----------------------------------------------------------------- messages
    def recorded_message(self, sender: str, content: str, cause_by: str) -> str | None:
        """The id the log gave this message, if it is the sender's next recorded one (no new event)."""
        if not self._messages:  # a new run: nothing recorded to meet again
            return None
        with self._lock:
            queue = self._messages.get(sender)
            if not queue:
                return None
            head = queue[0]
            if head.get("content") == content and head.get("cause_by") == cause_by:
                queue.popleft()
                return str(head["id"])
            return None

    def message(self, message: dict[str, Any] | BaseModel) -> None:
        """Log a published message (write-ahead: before it is delivered): its JSON (a dict), or the
        message itself, then encoded once, straight to the text the store writes."""
        if isinstance(message, dict):
            self.emit(MESSAGE, {"message": message}, role=message.get("sent_from", ""), force=True)
            return
        sender = str(getattr(message, "sent_from", "") or "")
        if self._subscribers:  # they read the event's dict
            self.emit(MESSAGE, {"message": message.model_dump(mode="json")}, role=sender, force=True)
        elif self.store is not None:  # (model_dump_json's own encoder, called without its keywords' cost)
            try:
                text = (b'{"message":' + type(message).__pydantic_serializer__.to_json(message) + b"}").decode()
            except PydanticSerializationError:  # a lone surrogate: kept as JSON's escape (encode_data)
                text = encode_data({"message": message.model_dump(mode="json")})
            self._write(RunEvent(self.run_id, MESSAGE, None, self.round, sender, text=text))

    # -------------------------------------------------------------- model calls
    def lookup(self, role: str, action: str, fp: str, request: dict[str, Any]) -> dict[str, Any] | None:
        """The recorded answer to this call, or None when the log holds no more calls for ``role``
        (see :meth:`answer`)."""
        found = self.answer(role, action, fp, request)
        return None if found is None else found[0]

    def answer(self, role: str, action: str, fp: str, request: dict[str, Any]) -> tuple[dict[str, Any], bool] | None:
        """The logged answer to this call and whether this run pays for it; None: ask the model.

        In this order: the run's own next recorded call of ``role`` with this request (a resume; paid
        for, once, in this run's totals — unless it was itself reused); in a fork's pinned rounds, the
        role's next recorded call whatever it asked (the past is the parent's); the parent's answer to
        the same role, action and request (``reuse=``; not paid for: counted in ``reused_calls`` and
        ``saved_cost``, and logged in this run with ``"reused"``). Else :class:`ReplayMismatch` when the
        log holds calls for ``role`` but none with this request, :class:`ReplayMissing` in replay mode
        when it holds none at all, and None (a live call) otherwise.
        """
        key = role or ""
        if not self._calls and not self._reuse and self.mode != "replay":  # nothing recorded to meet again
            return None
        reused: RecordedCall | None = None
        with self._lock:
            pending = self._calls.get(key)
            if pending:
                for i, call in enumerate(pending):
                    if call.fingerprint == fp:
                        del pending[i]
                        self.served_calls += 1
                        return call.response, not call.reused
                if self.pinned_rounds and self.round <= self.pinned_rounds:
                    call = pending.pop(0)
                    self.served_calls += 1
                    logger.info("run {}: round {} is its parent's; {} in {} is served the parent's answer to "
                                "another request", self.run_id, self.round, key, action)
                    return call.response, not call.reused
            queue = self._reuse.get((key, action, fp))
            if queue:
                reused = queue.popleft()
                self.reused_calls += 1
                self.saved_cost += reused.cost
            elif pending:
                first = pending[0]
                raise ReplayMismatch(
                    role=key, action=action, recorded=first.request, asked=request,
                    recorded_action=first.action, run_id=self.run_id,
                )
        if reused is not None:
            self._log_reused(key, reused)
            return reused.response, False
        if self.mode == "replay":
            raise ReplayMissing(role=key, action=action, asked=request, run_id=self.run_id)
        return None

    def _log_reused(self, role: str, call: RecordedCall) -> None:
        """A call answered from the parent's log, in this run's log (so that the run reads whole and a
        resume of it finds it), with what it cost the parent; it waits for the next write (it can be
        re-derived: a crash before then reuses it again)."""
        data = {
            "action": call.action, "model": call.model, "fingerprint": call.fingerprint, "request": call.request,
            **(call.full or {}),  # (the texts are the parent's, in the same store)
            "response": call.response, "cost": 0.0, "latency": 0.0,
            "reused": {"run": self.reuse, "seq": call.seq, "cost": call.cost},
        }
        event = RunEvent(self.run_id, LLM_CALL, data, self.round, role)
        if self.store is not None:
            if not self._subscribers:
                event.seal()
            with self._lock:
                self._pending.append(event)
            if not self._held:
                self._flush_soon()
        if self._subscribers:
            self._tell(event)

    def _with_request(self, event: RunEvent, full: FullRequest | None) -> RunEvent:
        """``event`` (a model call) with its full request's fields (see :mod:`rolecast.runs.requests`),
        and the texts among them this log has not sent to the store yet, which travel with it."""
        if full is None or self.store is None or not self.record_requests:
            return event
        fields, new = encode_request(*full, self._sent_texts)
        event.data.update(fields)
        if new:
            event.texts = new
        return event

    def record_call(self, role: str, data: dict[str, Any], full: FullRequest | None = None) -> None:
        """Log one model call (answered, or failed with ``data["error"]``): in the store on return.
        ``full``: its request (messages, the seam's parameters, max_tokens), logged whole."""
        event = self._with_request(RunEvent(self.run_id, LLM_CALL, data, self.round, role), full)
        if self.store is not None:
            self._write(event)
        if self._subscribers:
            self._tell(event)

    def log_call(
        self, role: str, data: dict[str, Any], full: FullRequest | None = None,
    ) -> asyncio.Future[None] | None:
        """Log one answered model call, durably; a future to await before the answer is used, or None
        when it is durable already. A store with a journal
        (:meth:`SQLiteRunStore.stage <rolecast.runs.store.SQLiteRunStore.stage>`) makes it durable at once,
        with one copy, and its database gets it with the other events at the end of this turn of the
        event loop; with another store, the calls answered in the same turn share one write, which each
        waits for (the future). ``durability="call"`` commits it alone, at once."""
        self.live_calls += 1
        if self.durability == "call":
            self.record_call(role, data, full)
            return None
        event = self._with_request(RunEvent(self.run_id, LLM_CALL, data, self.round, role), full)
        written = None
        if self.store is not None:
            if not self._subscribers:
                event.seal()
            with self._lock:  # (the journal's order is the log's)
                staged = self._stage is not None and self._stage((event,))
                self._pending.append(event)
            if staged:
                self._flush_lazily()
            else:
                written = self._flush_soon(wait=True)
        if self._subscribers:
            self._tell(event)
        return written

    async def commit_call(self, role: str, data: dict[str, Any]) -> None:
        """Log one answered model call and return once it is durable (write-ahead: before the answer
        is used); see :meth:`log_call`."""
        written = self.log_call(role, data)
        if written is not None:
            await written

    # -------------------------------------------------------------- approvals
    def approval_id(self, role: str) -> str:
        """The id of ``role``'s next deferred approval in this process: ``"<role>-<n>"``. A rerun asks its
        roles' approvals again in the same order, so each meets the id (and the answer) it had."""
        with self._lock:
            n = self._approval_counts[role] = self._approval_counts.get(role, 0) + 1
        return f"{role or 'run'}-{n}"

    def decision(self, approval_id: str) -> dict[str, Any] | None:
        """The answer to a deferred approval: from the log as loaded, else read again from the store
        (another process may have answered since); None while it waits."""
        found = self.approvals_decided.get(approval_id)
        if found is None and self.store is not None:
            for event in self.store.events(self.run_id, [APPROVAL_DECIDED]):
                self.approvals_decided.setdefault(event.data["id"], event.data)
            found = self.approvals_decided.get(approval_id)
        return found

    def request_approval(self, approval_id: str, data: dict[str, Any], *, role: str = "") -> None:
        """Log a deferred approval's question (once: a rerun that meets it again writes nothing)."""
        if approval_id in self.approvals_asked:
            return
        asked = {**data, "id": approval_id, "role": role, "round": self.round}
        self.approvals_asked[approval_id] = asked
        self.emit(APPROVAL_REQUESTED, asked, role=role, force=True)

    def pending_calls(self) -> int:
        """Recorded calls not met again yet."""
        return sum(len(v) for v in self._calls.values())


__all__ = [
    "DURABILITIES", "RECORD_REQUESTS", "Durability", "FullRequest", "Mode", "RecordedCall", "RunLog", "acting",
    "canonical_json", "check_durability", "current_action", "enter_action", "exit_action", "fingerprint",
    "new_run_id", "quote_json",
]
