"""The worker side of the Ray runtime: a group of roles in one Ray actor.

:class:`RoleWorker` is a plain class; :class:`~environment.ray_runtime.RayRuntime`
turns it into an actor. It holds its roles behind a :class:`WorkerBus` (what a role
sees as its environment), runs a round's turns side by side (at most 4,096 at once) like
the in-process environment, and hands back what its roles published. Every model call
on the worker takes the seam's metered path with the worker's run log: answered from the
log when it holds the call (a restarted worker re-executes its roles' past turns without
calling the model again), else made through :class:`ClusterModel`, which first waits for
the cluster's one rate limit and budget, then logged.

Nothing here imports Ray: the actor handle of the meter is passed in.
"""

from __future__ import annotations

import asyncio
import gc
import os
import pickle
import sqlite3
import time
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from loguru import logger

from memory import Message
from rolecast.accounting.cost import CostManager, UsageTotals, estimate_tokens
from rolecast.accounting.metering import current_meter
from rolecast.context import Context
from rolecast.errors import ActionFailed, BudgetExceeded, RolecastError, StoreError
from rolecast.llm.base import BaseLLM, Completion, LLMSettings, Messages, StructuredRequest, Usage, messages_text
from rolecast.runs.log import Durability, RunLog
from rolecast.runs.store import RunEvent, RunStore, SQLiteRunStore, encode_data
from roles import Role

from .ray_mail import Batch, Mailroom, Routing, in_order
from .runtime import logged_turn
from .turns import DEFAULT_MAX_CONCURRENT_TURNS, run_turns

#: a round's mail for one worker from the driver (messages published outside the workers):
#: who receives, and the message
Deliveries = list[tuple[list[str], Message]]
#: the roles a worker holds, as the driver ships them (one cloudpickled list per shipment): each a
#: role pickled on the driver (``("role", role)``), or built on the worker (``("build", cls, kwargs)``)
RoleItem = tuple[Any, ...]


@dataclass
class WorkerSpec:
    """What a worker needs besides its roles (picklable; sent once, and again on a restart)."""

    name: str
    team_roles: list[str]
    index: int = 0  # this worker's place among the actors
    desc: str = ""
    config: Any = None  # rolecast.core.config.Config, or None: read on the worker
    default_llm: bytes | None = None  # the team's default model, pickled; None: made from config
    services: dict[str, bytes] = field(default_factory=dict)
    store: Any = None  # a picklable RunStore, or ("sqlite", path)
    run_id: str = ""
    durability: Durability = "batched"
    meter: Any = None  # the meter actor's handle, or None when nothing is limited
    rate_limited: bool = False
    metered_free_calls: bool = False  # the rate limit counts free models' calls too


class SharedSQLiteRunStore(SQLiteRunStore):
    """A SQLite run store that several worker processes append to at once (on one machine).

    Each write (one event or a batch) takes the file's write lock first (``BEGIN IMMEDIATE``),
    numbers its events from the file, never from a cache, and commits at once: no worker
    holds the lock while the others wait for it. It keeps no journal (its ``extend`` is its own,
    without the journal's bookkeeping): a worker's model call waits for the commit that holds it.
    """

    def __init__(self, path: str, *, journal: bool = False):
        super().__init__(path, journal=journal)

    def extend(self, events: Sequence[RunEvent]) -> None:
        if not events:
            return
        payloads = [encode_data(e.data) for e in events]
        with self._lock:
            try:
                self._db.commit()
                self._db.execute("BEGIN IMMEDIATE")
                for event, payload in zip(events, payloads, strict=True):
                    row = self._db.execute(
                        "SELECT COALESCE(MAX(seq), 0) + 1 FROM events WHERE run_id = ?", (event.run_id,)
                    ).fetchone()
                    event.seq = int(row[0])
                    self._db.execute(
                        "INSERT INTO events (run_id, seq, ts, kind, round, role, data) VALUES (?, ?, ?, ?, ?, ?, ?)",
                        (event.run_id, event.seq, event.ts, event.kind, event.round, event.role, payload),
                    )
                self._db.commit()
            except sqlite3.Error as exc:
                self._db.rollback()
                raise StoreError(f"could not write to the run store {self.path}: {exc}") from exc


def open_worker_store(spec_store: Any) -> RunStore | None:
    if spec_store is None:
        return None
    if isinstance(spec_store, tuple) and spec_store[0] == "sqlite":
        return SharedSQLiteRunStore(spec_store[1])
    store: RunStore = spec_store
    return store


class ClusterModel(BaseLLM):
    """A model on a worker: each live call first waits for the cluster's rate limit and budget.

    Everything else is the seam's one metered path (:meth:`BaseLLM._metered`): a call the
    run log holds is answered from it and never reaches this model, so it is neither
    rate limited nor paid again.
    """

    def __init__(self, inner: BaseLLM, worker: RoleWorker):
        super().__init__(inner.model, inner.settings)
        self.inner = inner
        self.reaches_a_model = inner.reaches_a_model  # its calls are the inner model's
        self.worker = worker
        self.free = inner.free
        self.supports_json_schema = inner.supports_json_schema
        self.supports_tools = inner.supports_tools
        self.grammar_constrained = inner.grammar_constrained

    def __repr__(self) -> str:
        return f"ClusterModel({self.inner!r})"

    # the window and the token counts are the inner model's (its tokenizer, its n_ctx): prompts are
    # fitted on a worker as they are in process
    def _default_context_window(self) -> int:
        return self.inner.context_window

    @property
    def context_window_known(self) -> bool:
        return self.inner.context_window_known

    async def count_texts(self, texts: Sequence[str]) -> list[int]:
        return await self.inner.count_texts(texts)

    async def count_tokens(self, messages: Messages) -> int:
        return await self.inner.count_tokens(messages)

    async def _complete(
        self, messages: Messages, *, stop: list[str] | None, settings: LLMSettings,
        structured: StructuredRequest | None = None, tools: list[dict[str, Any]] | None = None,
    ) -> Completion:
        ticket = await self.worker.admit(self, messages)
        completion = await self.inner._complete(
            messages, stop=stop, settings=settings, structured=structured, tools=tools
        )
        await self.worker.settle(self, ticket, completion.usage)
        return completion

    async def _choose_text(self, messages: Messages, n_options: int, settings: LLMSettings) -> Completion:
        ticket = await self.worker.admit(self, messages)
        completion = await self.inner._choose_text(messages, n_options, settings)
        await self.worker.settle(self, ticket, completion.usage)
        return completion

    async def _stream(
        self, messages: Messages, *, stop: list[str] | None, settings: LLMSettings
    ) -> AsyncIterator[str | Usage]:
        ticket = await self.worker.admit(self, messages)
        usage = Usage()
        async for chunk in self.inner._stream(messages, stop=stop, settings=settings):
            if isinstance(chunk, Usage):
                usage = chunk
            yield chunk
        await self.worker.settle(self, ticket, usage)


class WorkerContext(Context):
    """A worker's context: every model it hands out is wrapped in a :class:`ClusterModel`."""

    def __init__(self, worker: RoleWorker, **kwargs: Any):
        super().__init__(**kwargs)
        self._worker = worker

    def llm(self, name: str | None = None) -> BaseLLM:
        return self._worker.wrap(super().llm(name))


class WorkerBus:
    """What a role on a worker sees as its environment: publishing goes to the round's outbox."""

    def __init__(self, worker: RoleWorker, spec: WorkerSpec):
        self.worker = worker
        self.desc = spec.desc
        self._names = list(spec.team_roles)
        self.context: Context = worker.context
        self.roles: dict[str, Role] = {}
        self.outbox: list[Message] = []
        self.address_changes: dict[str, list[str]] = {}
        self.replaying = False

    @property
    def run_log(self) -> RunLog | None:
        return self.worker.log

    def role_names(self) -> list[str]:
        return list(self._names)

    def get_role(self, name: str) -> Role | None:
        return self.roles.get(name)

    def set_addresses(self, role: Role, addresses: Iterable[str]) -> None:
        self.address_changes[role.name] = sorted(addresses)

    def publish_message(self, message: Message) -> bool:
        """Log it (as the in-process environment does), then keep it for the driver at the barrier."""
        log = self.worker.log
        if log is not None:
            known = log.recorded_message(message.sent_from, message.content, message.cause_by)
            if known is not None:
                message.id = known
            elif not self.replaying:
                log.message(message)
        # (a restarted worker re-executing past rounds keeps them too: the next round's in-actor
        # deliveries name them; what it hands back from a replayed round goes nowhere)
        self.outbox.append(message)
        return True


class RoleWorker:
    """A group of roles in one process (the body of a Ray actor)."""

    def __init__(self, spec: WorkerSpec | None = None):
        """``spec`` None: a worker started ahead of its roles (its process up, its imports done) and
        set up later (:meth:`setup`)."""
        if spec is not None:
            self.setup(spec)

    def setup(self, spec: WorkerSpec) -> None:
        """Open the run log, make the context and the models: what the worker needs besides its roles."""
        self.spec = spec
        store = open_worker_store(spec.store)
        self.log: RunLog | None = (
            RunLog(store, spec.run_id, durability=spec.durability) if store is not None else None
        )
        default = pickle.loads(spec.default_llm) if spec.default_llm else None
        services = {name: pickle.loads(blob) for name, blob in spec.services.items()}
        self.context = WorkerContext(self, config=spec.config, llm=default, llms=services)
        self.context.run_log = self.log  # the seam answers from it and logs every live call
        self._wrapped: dict[int, ClusterModel] = {}
        self.bus = WorkerBus(self, spec)
        self.budget: float | None = None  # the team's budget and spend as of the round's start
        self.spent = 0.0
        #: the mail between this worker and its peers (see :mod:`environment.ray_mail`)
        self.mail = Mailroom(spec.index)

    # ------------------------------------------------------------------ models
    def wrap(self, llm: BaseLLM) -> BaseLLM:
        if isinstance(llm, ClusterModel):
            return llm
        wrapped = self._wrapped.get(id(llm))
        if wrapped is None:
            wrapped = self._wrapped[id(llm)] = ClusterModel(llm, self)
        return wrapped

    async def admit(self, model: ClusterModel, messages: Messages) -> int:
        """Wait for the cluster's rate limit and check its budget; returns the ticket to settle (0: none)."""
        limiter = self.spec.meter
        if limiter is None and self.budget is None:
            return 0  # nothing limits or prices the call: no need to count its tokens
        meter = current_meter()
        tokens = estimate_tokens(messages_text(messages))
        projected = meter.cost_manager.cost_of(model.model, tokens, 0, free=model.free)
        limited = self.spec.rate_limited and (not model.free or self.spec.metered_free_calls)
        if limiter is None or (projected == 0 and not limited):
            # a call that costs nothing and is not rate limited needs no round trip: the spend
            # known at the start of the round decides (the driver checks it between rounds too)
            if self.budget is not None and self.spent >= self.budget:
                raise BudgetExceeded(self.spent, self.budget, role=meter.role, model=model.model)
            return 0
        grant = await limiter.acquire.remote(tokens, projected)
        if grant.over_budget:
            raise BudgetExceeded(grant.spent, grant.limit, role=meter.role, model=model.model)
        if grant.wait > 0:
            await asyncio.sleep(grant.wait)
        return int(grant.ticket)

    async def settle(self, model: ClusterModel, ticket: int, usage: Usage) -> None:
        """Tell the meter what a metered call cost (its answer's tokens count against the limit)."""
        if ticket:
            cost = current_meter().cost_manager.cost_of(
                model.model, usage.prompt_tokens, usage.completion_tokens, free=model.free
            )
            await self.spec.meter.settle.remote(ticket, usage.completion_tokens, cost)

    # ------------------------------------------------------------------- roles
    def place(self, spec: WorkerSpec, shipment: bytes) -> list[str]:
        """Make the shipped roles (unpickled, or built here from their class and keywords) and attach
        them to this worker (set up by ``spec`` first, if it was started ahead); returns their names."""
        if getattr(self, "spec", None) is None:
            self.setup(spec)
        collecting = gc.isenabled()
        gc.disable()  # thousands of long-lived objects made at once: no collection finds garbage among them
        try:
            names = self._place(pickle.loads(shipment))
        finally:
            if collecting:
                gc.enable()
        # the roles live as long as the worker: the collector need not walk them again and again
        gc.freeze()
        return names

    def _place(self, items: list[RoleItem]) -> list[str]:
        names = []
        for item in items:
            role: Role = item[1] if item[0] == "role" else item[1](**item[2])
            self.bus.roles[role.name] = role
            role.set_env(self.bus)
            if role._llm is not None:
                role.llm = self.wrap(role._llm)
            for action in role.actions:
                if action._llm is not None:
                    action._llm = self.wrap(action._llm)
            names.append(role.name)
        return names

    def connect(self, peers: list[Any], routing: Routing) -> None:
        """Every actor's handle (by index) and the team's addressing and placement."""
        self.mail.connect(peers, routing)

    async def _turn(self, role: Role) -> Message | None:
        log = self.log
        if log is None:
            return await role.run()
        return await logged_turn(role, log)

    def _deliver(self, mail: Iterable[tuple[list[str], Message]]) -> None:
        roles = self.bus.roles
        for names, message in mail:
            for name in names:
                roles[name].put_message(message)

    async def _turns(self, round_no: int) -> dict[str, Any]:
        roles = self.bus.roles
        if self.log is not None:
            self.log.round = round_no
        active = [role for role in roles.values() if not role.is_idle]
        self.bus.outbox = []
        results = await run_turns(self._turn, active, DEFAULT_MAX_CONCURRENT_TURNS)  # (as in process, bounded)
        failures: dict[str, BaseException] = {}
        for role, result in zip(active, results, strict=True):
            if isinstance(result, BaseException):
                failures[role.name] = _portable_error(role, result)
        return {"active": [r.name for r in active], "messages": self.bus.outbox, "failures": failures}

    async def run_round(
        self, round_no: int, deliveries: Deliveries, budget: tuple[float | None, float],
        topology: tuple[list[Any], Routing] | None = None,
    ) -> dict[str, Any]:
        """Deliver the last round's messages (this worker's own and its peers'), then the driver's, run
        the turns of every role with news, and report (the driver's barrier)."""
        self.budget, self.spent = budget
        start = time.perf_counter()
        if topology is not None:
            self.connect(*topology)
        local, out = self.mail.post(round_no)
        peers = self.mail.peers
        sends = [peers[i].receive.remote(round_no, self.mail.index, batch) for i, batch in out.items()]
        self._deliver(in_order(local, await self.mail.collect(round_no)))
        self._deliver(deliveries)
        outcome = await self._turns(round_no)
        outcome["mail"] = self.mail.set_outbox(outcome["messages"], round_no)
        for sent in await asyncio.gather(*sends, return_exceptions=True):
            if isinstance(sent, BaseException):  # a peer that died asks for its mail when it is back
                logger.info("worker {}: a batch for round {} was not taken: {}", self.spec.name, round_no, sent)
        outcome["seconds"] = time.perf_counter() - start  # the worker's share of the round (for benchmarks)
        outcome["busy"] = [name for name, role in self.bus.roles.items() if not role.is_idle]
        outcome["addresses"], self.bus.address_changes = self.bus.address_changes, {}
        outcome["usage"] = self._take_usage()
        return outcome

    async def receive(self, round_no: int, sender: int, batch: Batch) -> None:
        """A peer's messages for this worker's roles, for ``round_no``."""
        self.mail.receive(round_no, sender, batch)

    async def sent_to(self, index: int) -> dict[int, Batch]:
        """What this worker sent worker ``index`` in every round so far (for a restarted one)."""
        return self.mail.sent_to(index)

    async def restore(
        self, spec: WorkerSpec, shipments: list[bytes], past: list[tuple[int, Deliveries]],
        topology: tuple[list[Any], Routing],
    ) -> int:
        """After a restart: place the roles again and re-execute their past rounds (answers from the log),
        with the mail its peers sent it then (each keeps what it sent)."""
        if getattr(self, "spec", None) is None:
            self.setup(spec)
        if self.bus.roles:
            return 0  # this instance never died: nothing to restore
        for shipment in shipments:
            self.place(spec, shipment)
        self.connect(*topology)
        peers, me = topology[0], self.mail.index
        logs = await asyncio.gather(*(p.sent_to.remote(me) for i, p in enumerate(peers) if i != me),
                                    return_exceptions=True)
        sent: list[dict[int, Batch]] = [log for log in logs if isinstance(log, dict)]
        self.bus.replaying = True
        try:
            for round_no, deliveries in past:
                local, _ = self.mail.post(round_no)
                self._deliver(in_order(local, *(log.get(round_no, []) for log in sent)))
                self._deliver(deliveries)
                outcome = await self._turns(round_no)
                self.mail.set_outbox(outcome["messages"], round_no)
        finally:
            self.bus.replaying = False
            self.bus.address_changes = {}
            self._take_usage()  # answers from the log cost nothing; live re-asks were paid once already
        last = past[-1][0] if past else 0
        for sender, log in zip([i for i in range(len(peers)) if i != me], logs, strict=True):
            for round_no, batch in (log.items() if isinstance(log, dict) else ()):
                if round_no > last:  # sent for the round being retried, before this worker was back
                    self.mail.receive(round_no, sender, batch)
        logger.info("worker {} restored {} role(s) through round {}", self.spec.name, len(self.bus.roles), last)
        return len(past)

    def _take_usage(self) -> dict[str, dict[str, tuple[int, int, float, int]]]:
        cm = self.context.cost_manager
        usage = {
            "role": {k: (t.prompt_tokens, t.completion_tokens, t.cost, t.calls) for k, t in cm.by_role.items()},
            "model": {k: (t.prompt_tokens, t.completion_tokens, t.cost, t.calls) for k, t in cm.by_model.items()},
        }
        self.context.cost_manager = CostManager(prices=cm.prices)
        return usage

    def roles_state(self) -> list[bytes]:
        """The live roles, pickled without their worker (to bring them back to the driver)."""
        out = []
        for role in self.bus.roles.values():
            out.append(detached_pickle(role))
        return out

    def pid(self) -> int:
        return os.getpid()


@contextmanager
def detached(roles: Iterable[Role]) -> Iterator[None]:
    """``roles`` without their environment, context or wrapped models while the block runs (to pickle
    them); put back afterwards."""
    saved = []
    try:
        for role in roles:
            llm = role._llm
            inner = llm.inner if isinstance(llm, ClusterModel) else llm
            saved.append((role, role.rc.env, role._context, llm,
                          [(a, a._context, a._llm, a._role_llm) for a in role.actions]))
            role.rc.env = None
            role.set_context(None)
            role._llm = inner
            for action in role.actions:
                own = action._llm
                action._llm = own.inner if isinstance(own, ClusterModel) else own
                action._role_llm = inner
        yield
    finally:
        for role, env, context, llm, actions in saved:
            role.rc.env = env
            role.set_context(context)
            role._llm = llm
            for action, ctx, own, role_llm in actions:
                action._context, action._llm, action._role_llm = ctx, own, role_llm


def detached_pickle(role: Role) -> bytes:
    """``role`` pickled without its environment, context or wrapped models (see :func:`detached`)."""
    from ray import cloudpickle  # the extra is installed wherever a role is shipped

    with detached([role]):
        blob: bytes = cloudpickle.dumps(role)
    return blob


def merge_usage(cm: CostManager, usage: dict[str, dict[str, tuple[int, int, float, int]]]) -> None:
    """Add a worker's round of usage to the driver's cost manager."""
    for key, table in (("role", cm.by_role), ("model", cm.by_model)):
        for name, (prompt, completion, cost, calls) in usage.get(key, {}).items():
            totals = table.setdefault(name, UsageTotals())
            totals.prompt_tokens += prompt
            totals.completion_tokens += completion
            totals.cost += cost
            totals.calls += calls
            if key == "role":
                cm.total.prompt_tokens += prompt
                cm.total.completion_tokens += completion
                cm.total.cost += cost
                cm.total.calls += calls


def _portable_error(role: Role, failure: BaseException) -> BaseException:
    """A role's failure as an error that survives the trip to the driver."""
    from ray import cloudpickle

    error: BaseException = failure
    if not isinstance(failure, RolecastError) and isinstance(failure, Exception):
        error = ActionFailed(role.name, "run", failure)
    try:
        pickle.loads(cloudpickle.dumps(error))
        return error
    except Exception:  # an exception type that does not pickle: keep its text
        return ActionFailed(role.name, "run", RuntimeError(f"{type(failure).__name__}: {failure}"))


__all__ = [
    "ClusterModel", "Deliveries", "RoleItem", "RoleWorker", "WorkerBus", "WorkerSpec", "detached",
    "detached_pickle",
    "merge_usage",
]
