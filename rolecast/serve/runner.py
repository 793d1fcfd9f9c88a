"""The runs a served team does: one durable rolecast run per task, started, watched, resumed, cancelled.

:class:`TeamRunner` is what the A2A handler (:mod:`.a2a`) and the HTTP API (:mod:`.http`) both drive.
A task's id *is* its run's id (``task-<time>-<random>``), so ``rolecast runs show TASK_ID`` and the
studio find it. Each run is a fresh team from the served factory, bound to the server's store and
to that run id, and runs in a task of the server's event loop (several tasks at once: several runs).

Each run's ``run_started`` event says ``served: {"by": NAME, "context_id", "message_id"}``: a server
(this process, or a later one on the same store) finds its tasks by it, and no other run.

A run that pauses on a deferred approval (:mod:`rolecast.runs.approvals`) is ``waiting``; once its
approvals are answered — through the A2A task, the HTTP API, the studio or ``rolecast runs approve``
in another process (a watcher looks every :data:`WATCH_POLL` seconds) — a fresh team resumes it
under the same run id, every model call before the pause answered from the log.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import json
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from loguru import logger

from ..errors import UsageError
from ..llm.errortext import error_text
from ..runs import RUN_STARTED, RUN_STOPPED, RunEvent, RunStore, new_run_id
from ..runs.approvals import decide, pending_approvals

#: how often a paused run looks for answers given in another process (seconds)
WATCH_POLL = 0.5
#: run ids of served tasks start with this (a task id of a run the server did not start is unknown)
TASK_PREFIX = "task-"
#: the most rounds a client may ask for
MAX_ROUNDS = 100
#: the longest idea (characters) a task may be given (over A2A or HTTP)
MAX_IDEA = 100_000
#: how many settled tasks (finished, failed, cancelled) stay in memory; older ones are read from the
#: store again when asked about (their idea and messages are durable there)
KEEP_SETTLED = 64
#: how many message ids are remembered for meeting a repeated message with its task
KEEP_MESSAGES = 100_000

# a served run's outcome (the A2A task states map from these: see .a2a)
WORKING, WAITING, FINISHED, FAILED, CANCELLED = "working", "waiting", "finished", "failed", "cancelled"
SETTLED = frozenset({WAITING, FINISHED, FAILED, CANCELLED})


@dataclass
class Served:
    """One task: its run, what it was asked, and how it stands in this process."""

    run_id: str
    idea: str
    rounds: int
    context_id: str
    message_id: str = ""
    outcome: str = WORKING
    detail: str = ""
    task: asyncio.Task[Any] | None = None
    watcher: asyncio.Task[Any] | None = None
    team: Any = None
    #: set whenever the run logs something or settles (streams wait on it)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    started: float = field(default_factory=time.time)
    #: when ``outcome`` last changed (the A2A status's timestamp)
    since: float = field(default_factory=time.time)

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "outcome" and getattr(self, "outcome", value) != value:
            object.__setattr__(self, "since", time.time())
        object.__setattr__(self, name, value)

    @property
    def running(self) -> bool:
        return self.task is not None and not self.task.done()


def is_team(value: Any) -> bool:
    """Whether ``value`` is an :class:`environment.Team` (told by its class's lineage: the kernel does
    not import the layers above it; see architecture.md)."""
    return any(f"{c.__module__}.{c.__qualname__}" == "environment.team.Team" for c in type(value).__mro__)


def team_factory(target: Any) -> Callable[[], Any]:
    """A callable making a fresh team per task from what ``rolecast serve MODULE:ATTR`` names: a
    callable returning a :class:`~environment.Team`, or a Team (copied for each task)."""
    if is_team(target):
        if target.env.run_log is not None:
            raise UsageError("serve a Team that has not run yet (or a function that builds one): this one "
                             f"has a run log already ({target.run_id})")
        copy_team(target)  # (one that cannot be copied is refused now, not at the first task)
        return lambda: copy_team(target)
    if callable(target):
        return target  # type: ignore[no-any-return]
    raise UsageError(f"rolecast serve takes a Team or a function that returns one, not {type(target).__name__}")


def copy_team(team: Any) -> Any:
    """A deep copy of ``team`` (roles, memories, models, hooks) with locks of its own; a UsageError when
    something in it cannot be copied (then serve a function that builds the team)."""
    context = team.env.context
    spec = team._store_spec
    memo: dict[int, Any] = {id(spec): spec}  # (the store, or the "default store" marker compared by identity)
    for owner in (context, context.cost_manager):
        lock = getattr(owner, "_lock", None)
        if lock is not None:
            fresh = threading.RLock() if isinstance(lock, type(threading.RLock())) else threading.Lock()
            memo[id(lock)] = fresh  # (a lock is not copied: each copy gets its own)
    try:
        copied = copy.deepcopy(team, memo)
        # a team of its own around the copies (an environment's wiring of its roles is made, not copied)
        on_error = "recover" if team._recover else team.env.on_error
        return type(team)(context=copied.env.context, roles=list(copied.env.roles.values()), on_error=on_error,
                          investment=team.investment, env_desc=team.env.desc, store=None)
    except Exception as exc:
        raise UsageError(f"this Team cannot be copied for each task ({type(exc).__name__}: {exc}): serve a "
                         "function that builds a fresh team instead") from exc


def bind(team: Any, store: RunStore, run_id: str) -> Any:
    """``team`` logging to ``store`` as run ``run_id`` (set before its log is opened)."""
    if not is_team(team):
        raise UsageError(f"the served factory must return a Team, not {type(team).__name__}")
    if team.env.run_log is not None:
        raise UsageError("the served factory returned a team that has run already: build a fresh one per call")
    team._store_spec = store
    team._run_id = run_id
    return team


class TeamRunner:
    """The served team's runs in this process (see the module docstring)."""

    def __init__(self, factory: Callable[[], Any], store: RunStore, *, rounds: int = 5, max_running: int = 256,
                 name: str = "rolecast team"):
        self.factory = factory
        #: the served team's name (the card's): its runs' ``run_started`` say ``served: {"by": name}``
        self.name = name
        self.store = store
        self.rounds = rounds
        self.max_running = max_running
        self.served: dict[str, Served] = {}
        self._by_message: OrderedDict[str, str] = OrderedDict()
        self._settled: OrderedDict[str, None] = OrderedDict()
        sample = bind(factory(), store, new_run_id())  # (the card's roles; a factory that fails, fails here)
        self.team_name = type(sample).__name__
        self.description = sample.env.desc or ""
        self.roles = [(r.name, r.profile, r.goal) for r in sample.env.roles.values()]
        sample.close()

    # ------------------------------------------------------------------ tasks
    def check_rounds(self, rounds: Any) -> int:
        if rounds is None:
            return self.rounds
        if isinstance(rounds, bool) or not isinstance(rounds, int) or not 1 <= rounds <= MAX_ROUNDS:
            raise UsageError(f"rounds is a whole number from 1 to {MAX_ROUNDS}, not {rounds!r:.40}")
        return rounds

    def start(self, idea: str, rounds: Any = None, *, message_id: str = "", context_id: str = "",
              client: str = "") -> Served:
        """A new run of ``idea`` (or, for a message seen before — the same ``message_id`` and idea from the
        same ``client`` — the run it started: a client that sends its message again after a crash meets
        its task, not a second run; another client's message with that id is a task of its own)."""
        if not isinstance(idea, str) or not idea.strip():
            raise UsageError("the idea is text with something in it")
        if len(idea) > MAX_IDEA:
            raise UsageError(f"the idea is {len(idea):,} characters; at most {MAX_IDEA:,}")
        key = _message_key(client, message_id, idea, context_id) if message_id else ""
        if key in self._by_message:
            seen = self.find(self._by_message[key])
            if seen is not None:
                return seen
        n_round = self.check_rounds(rounds)
        if sum(s.running for s in self.served.values()) >= self.max_running:
            raise UsageError(f"this server runs {self.max_running} tasks already: try again later")
        run_id = TASK_PREFIX + new_run_id()
        served = Served(run_id, idea, n_round, context_id or run_id, message_id)
        self.served[run_id] = served
        if key:
            self._by_message[key] = run_id
            while len(self._by_message) > KEEP_MESSAGES:
                self._by_message.popitem(last=False)
        self._launch(served, idea)
        return served

    def _settle(self, served: Served) -> None:
        """``served`` is over: keep it among the last :data:`KEEP_SETTLED`, forget the oldest (its run
        is in the store: :meth:`find` reads it again; streams that hold it keep it until they end)."""
        if served.outcome not in (FINISHED, FAILED, CANCELLED):
            return
        self._settled[served.run_id] = None
        self._settled.move_to_end(served.run_id)
        while len(self._settled) > KEEP_SETTLED:
            old, _ = self._settled.popitem(last=False)
            gone = self.served.get(old)
            if gone is not None and not gone.running and gone.outcome in (FINISHED, FAILED, CANCELLED):
                del self.served[old]

    def find(self, run_id: str) -> Served | None:
        """The task of ``run_id``: one of this process, or a served run of the store (started by an
        earlier process of this server) — None for any other id."""
        found = self.served.get(run_id)
        if found is not None or not isinstance(run_id, str) or not run_id.startswith(TASK_PREFIX):
            return found
        try:
            starts = list(self.store.events(run_id, [RUN_STARTED, RUN_STOPPED]))
        except Exception:  # (an id the store refuses: not ours)
            return None
        first = next((e for e in starts if e.kind == RUN_STARTED), None)
        mark = first.data.get("served") if first is not None else None
        if not isinstance(mark, dict) or mark.get("by") != self.name:  # (a run no server of this team started)
            return None
        assert first is not None
        served = Served(run_id, str(first.data.get("idea", "")), int(first.data.get("n_round") or self.rounds),
                        str(mark.get("context_id") or run_id), str(mark.get("message_id") or ""))
        stops = [e for e in starts if e.kind == RUN_STOPPED]
        served.outcome, served.detail = _outcome(stops[-1].data.get("reason", "") if stops else "error: interrupted")
        served.since = (stops or [first])[-1].ts
        self.served[run_id] = served
        self._settle(served)
        if served.outcome == WAITING:
            served.watcher = asyncio.ensure_future(self._watch(served))
        return served

    def _launch(self, served: Served, idea: str) -> None:
        team = bind(self.factory(), self.store, served.run_id)
        served.team, served.outcome, served.detail = team, WORKING, ""
        served.changed.set()
        log = team.run_log
        log.subscribe(lambda _event: _poke(served))
        start = log.start
        mark = {"by": self.name, "context_id": served.context_id, "message_id": served.message_id}
        log.start = lambda data: start({**data, "served": mark})  # type: ignore[method-assign]
        served.task = asyncio.ensure_future(self._drive(served, team, idea))

    async def _drive(self, served: Served, team: Any, idea: str) -> None:
        try:
            history = await team.run(n_round=served.rounds, idea=idea, console=False)  # (a server's runs)
            if history.status == "waiting":
                served.outcome, served.detail = WAITING, ", ".join(history.pending)
                served.watcher = asyncio.ensure_future(self._watch(served))
            else:
                served.outcome = FINISHED
        except asyncio.CancelledError:
            served.outcome = CANCELLED
        except Exception as exc:
            served.outcome, served.detail = FAILED, f"{type(exc).__name__}: {error_text(exc)}"
            logger.info("served run {} failed: {}", served.run_id, served.detail)
        finally:
            team.close()
            if served.team is team:
                served.team = None  # (a settled task keeps no team: a long-lived server holds many tasks)
            served.changed.set()
            self._settle(served)

    async def _watch(self, served: Served) -> None:
        """A paused run: resume it once nothing is pending (answered here or in another process)."""
        while served.outcome == WAITING:
            if not await asyncio.to_thread(pending_approvals, self.store, served.run_id):
                logger.info("served run {}: its approvals are answered; resuming it", served.run_id)
                self._launch(served, "")
                return
            await asyncio.sleep(WATCH_POLL)

    def answer(self, served: Served, verdict: str, approval_id: str | None = None, *, reason: str = "",
               arguments: dict[str, Any] | None = None, by: str = "rolecast serve") -> dict[str, Any]:
        """Answer a pending approval of a waiting run; the run resumes when none is left pending."""
        if served.outcome != WAITING:
            raise UsageError(f"task {served.run_id} waits for no approval (it is {served.outcome})")
        decision = decide(self.store, served.run_id, approval_id, verdict, arguments=arguments, reason=reason, by=by)
        if not pending_approvals(self.store, served.run_id):
            if served.watcher is not None:
                served.watcher.cancel()
            self._launch(served, "")
        return decision

    async def cancel(self, served: Served, why: str) -> None:
        """Stop the run; its log's last ``run_stopped`` says ``cancelled: WHY``."""
        why = " ".join(str(why).split())[:500] or "cancelled"
        if served.running:
            assert served.task is not None
            served.team.cancel_reason(why)
            served.task.cancel()
            await asyncio.wait([served.task])
        elif served.outcome == WAITING:  # a paused run: its stop is written here
            if served.watcher is not None:
                served.watcher.cancel()
            self.store.append(RunEvent(served.run_id, RUN_STOPPED, {"reason": f"cancelled: {why}"}))
        else:
            raise UsageError(f"task {served.run_id} is {served.outcome} already: nothing to cancel")
        served.outcome, served.detail = CANCELLED, why
        served.changed.set()
        self._settle(served)

    async def settled(self, served: Served) -> None:
        """Wait until the run finishes, fails, is cancelled or pauses for an approval."""
        while served.outcome not in SETTLED or served.running:
            served.changed.clear()
            if served.outcome in SETTLED and not served.running:
                break
            await served.changed.wait()

    async def close(self) -> None:
        """Cancel every running task (the server stops); their logs say so."""
        running = [s for s in self.served.values() if s.running]
        for served in running:
            served.team.cancel_reason("the server stopped")
            assert served.task is not None
            served.task.cancel()
        for served in self.served.values():
            if served.watcher is not None:
                served.watcher.cancel()
        if running:
            await asyncio.wait([s.task for s in running if s.task is not None])


def _poke(served: Served) -> None:
    """Wake the streams of ``served`` after this turn of the event loop (the event is written then)."""
    try:
        asyncio.get_running_loop().call_soon(served.changed.set)
    except RuntimeError:
        served.changed.set()


def _message_key(client: str, message_id: str, idea: str, context_id: str) -> str:
    """What a repeated message is known by: who sent it, its id, and what it asks."""
    return hashlib.sha256(json.dumps([client, message_id, idea, context_id]).encode()).hexdigest()


def _outcome(reason: str) -> tuple[str, str]:
    """A run's outcome from its last stop's reason."""
    if reason in ("n_round", "idle"):
        return FINISHED, ""
    if reason.startswith("waiting"):
        return WAITING, reason.removeprefix("waiting: approval ")
    if reason.startswith("cancelled"):
        return CANCELLED, reason.removeprefix("cancelled: ")
    return FAILED, reason


__all__ = ["CANCELLED", "FAILED", "FINISHED", "KEEP_SETTLED", "MAX_IDEA", "MAX_ROUNDS",
           "TASK_PREFIX", "WAITING", "WATCH_POLL", "WORKING",
           "Served", "TeamRunner", "bind", "copy_team", "is_team", "team_factory"]
