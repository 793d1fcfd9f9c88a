"""The Ray runtime: a team's roles on Ray actors, many roles per actor, one round a barrier across all.

::

    team = Team(llm=model, runtime="ray")                       # a local Ray cluster
    team = Team(llm=model, runtime=RayRuntime(address="auto", roles_per_actor=500,
                                              rate_limit=RateLimit(requests=500, tokens=200_000)),
                store=PostgresRunStore("postgresql://…"))

The user's script does not change. The actors start at the first hire (one per CPU, their
processes coming up while the driver builds the team); when the first round starts the
roles are placed on :class:`~environment.ray_worker.RoleWorker` actors, ``roles_per_actor``
to an actor, in hiring order or — with ``neighbours`` — by who talks to whom. A role travels
as a description (``describe``: its class and keywords, built on the worker) or pickled
(cloudpickle ships user-defined Role and Action subclasses by value or by module), one
shipment per actor.

The driver is not in the data path. At the start of each round every actor routes what its
roles published in the last one (:mod:`environment.ray_mail`): what reaches its own roles
stays there, the rest goes to the other actors in one batch per actor, actor to actor; each
delivers its mail in the in-process order, then the driver's own (messages published
outside the actors, such as the idea), runs its roles' turns and returns its counts and its
messages. The driver waits for all (the barrier), records the messages in the history and
the run log, and hands every actor the addresses that changed.

``address="auto"`` joins the cluster ``ray start --head`` started on this machine (its
workers import what this process imports, as on a local one) and leaves it running at
:meth:`RayRuntime.close`.

Models are made on the workers: a picklable model (the test doubles) is shipped, any
other is made there from the team's configuration. One meter actor holds the team's
budget and the rate limit (requests and tokens per minute) for every worker.

A worker that dies is restarted by Ray (``max_restarts``); the driver then places its
roles again and has it re-execute their past rounds — with the batches its peers sent it
then, which each keeps — every model call answered from the run log (the store must be
one every worker reaches: PostgreSQL, or SQLite on one machine), before the round goes on.
Importing this module does not import Ray.
"""

from __future__ import annotations

import asyncio
import math
import os
import pickle
import sys
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from loguru import logger

from memory import Message
from rolecast.accounting.ratelimit import CallMeter, RateLimit
from rolecast.errors import UsageError, WorkerLost
from roles import Role

from .ray_mail import Routing
from .ray_worker import Deliveries, RoleItem, RoleWorker, WorkerSpec, detached, detached_pickle, merge_usage
from .runtime import RoundOutcome, Router


def _ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise UsageError('the Ray runtime needs Ray: pip install "rolecast[ray]"') from exc
    return ray


class _Group:
    """One actor and what the driver keeps to bring it back: its roles as shipped and its past rounds."""

    def __init__(self, name: str, index: int, actor: Any):
        self.name = name
        self.index = index
        self.actor = actor
        self.roles: list[str] = []
        self.shipments: list[bytes] = []
        #: each round's mail from the driver (the rest a restarted worker gets from its peers)
        self.past: list[tuple[int, Deliveries]] = []
        self.pending: Deliveries = []
        self.busy: set[str] = set()
        self.outgoing = 0  # deliveries the messages of its last round make (at the next round's start)
        self.spec_ref: Any = None


class RayRuntime:
    """Roles on Ray actors (see the module docstring).

    ``address``: a running cluster (``"auto"``, ``"ray://host:10001"``), or None to start a
    local one (``num_cpus`` of this machine's CPUs, loopback only). ``roles_per_actor``:
    how many roles share one actor (None: spread evenly over the cluster's CPUs).
    ``cpus_per_actor``: what each actor reserves (0: many actors share a CPU, as for
    roles that wait on a remote model). ``max_restarts``: how often a dead worker is
    brought back. ``rate_limit``: one limit for the model calls of every worker.

    ``neighbours``: the names a role talks to (``lambda role: role.followers``); roles are then
    placed by that graph (breadth first from the first hired), so those that talk share an
    actor and their messages never leave it. Default: the hiring order.
    ``describe``: the keywords that make a role (``lambda role: {"name": role.name, …}``), or
    None for a role to pickle; a role that has not run yet and has no model of its own is then
    built on its worker, ``type(role)(**keywords)``, instead of pickled on the driver — for roles
    whose constructor makes all they are.
    """

    def __init__(
        self,
        address: str | None = None,
        *,
        roles_per_actor: int | None = None,
        cpus_per_actor: float = 0.0,
        num_cpus: int | None = None,
        max_restarts: int = 3,
        rate_limit: RateLimit | None = None,
        count_free_calls: bool = True,
        init_kwargs: dict[str, Any] | None = None,
        neighbours: Callable[[Role], Iterable[str]] | None = None,
        describe: Callable[[Role], Mapping[str, Any] | None] | None = None,
        prestart: bool = True,
    ):
        if roles_per_actor is not None and roles_per_actor < 1:
            raise UsageError("roles_per_actor must be at least 1")
        self.address = address
        self.roles_per_actor = roles_per_actor
        self.cpus_per_actor = cpus_per_actor
        self.num_cpus = num_cpus
        self.max_restarts = max_restarts
        self.rate_limit = rate_limit
        self.count_free_calls = count_free_calls
        self.init_kwargs = dict(init_kwargs or {})
        self.neighbours = neighbours
        self.describe = describe
        self.prestart = prestart
        self.router = Router()
        self.round = 0
        self._roles: dict[str, Role] = {}  # hired, not placed yet
        self._groups: list[_Group] = []
        self._group_of: dict[str, _Group] = {}
        self._unplaced_mail: Deliveries = []
        self._meter: Any = None
        self._budget: float | None = None
        self._started_ray = False
        self._spec: dict[str, Any] | None = None
        self._joined: dict[str, int] = {}  # roles hired during the run: the rounds finished before
        self._warm: list[Any] = []  # actors started at the first hire, while the driver builds the others
        self._prestarted = False
        self._topology: tuple[list[Any], Routing] | None = None
        self._topology_sent = False
        #: the last round's messages (by ``id``): the workers deliver them, the driver only records them
        self._from_workers: dict[int, Message] = {}
        #: per worker, the deliveries its last round's messages make: (inside it, to other workers)
        self.last_round_mail: dict[str, tuple[int, int]] = {}
        #: seconds spent joining or starting the cluster (``cluster``) and shipping roles to actors (``place``)
        self.startup_seconds: dict[str, float] = {}
        #: each worker's time on its last round (delivering its mail, its roles' turns; the rest is transport)
        self.last_round_seconds: dict[str, float] = {}

    # ---------------------------------------------------------------- Runtime
    def add_role(self, role: Role) -> None:
        self.router.add(role.name, role.addresses)
        self._roles[role.name] = role
        if self.round:
            self._joined[role.name] = self.round
        self._topology = None
        if not self._prestarted:
            self._prestarted = True
            if self.prestart and self.roles_per_actor is None:
                self._start_actors()

    def _start_actors(self) -> None:
        """Join (or start) the cluster and start one actor per CPU now: their processes come up and
        import the framework while the driver builds the rest of the team."""
        t0 = time.perf_counter()
        self._connect()
        self.startup_seconds["cluster"] = self.startup_seconds.get("cluster", 0.0) + time.perf_counter() - t0
        worker_cls = self._worker_cls()
        self._warm = [worker_cls.remote() for _ in range(_cluster_cpus(_ray()))]

    def deliver(self, message: Message) -> None:
        """Queue ``message`` for the workers of its receivers, in one batch per worker and round.

        A message a worker's role published is delivered by the workers themselves (see
        :mod:`environment.ray_mail`): the driver only records it.
        """
        if self._from_workers.get(id(message)) is message:
            return
        by_group: dict[int, list[str]] = {}
        for name in self.router.targets(message):
            group = self._group_of.get(name)
            if group is None:
                self._unplaced_mail.append(([name], message))
            else:
                by_group.setdefault(id(group), []).append(name)
        for group in self._groups:
            names = by_group.get(id(group))
            if names:
                group.pending.append((names, message))

    @property
    def is_idle(self) -> bool:
        placed_idle = all(not g.pending and not g.busy and not g.outgoing for g in self._groups)
        unplaced_idle = all(role.is_idle for role in self._roles.values()) and not self._unplaced_mail
        return placed_idle and unplaced_idle

    async def run_round(self, env: Any) -> RoundOutcome:
        t0 = time.perf_counter()
        if self._spec is None:
            self._start(env)
            self.startup_seconds["cluster"] = self.startup_seconds.get("cluster", 0.0) + time.perf_counter() - t0
        if self._roles:
            t1 = time.perf_counter()
            await self._place()
            self.startup_seconds["place"] = self.startup_seconds.get("place", 0.0) + time.perf_counter() - t1
        self._sync_budget(env)
        log = env.run_log
        self.round = log.round if log is not None and log.round > self.round else self.round + 1
        if log is not None:
            log.flush()  # the driver's pending events are written: its store's lock is free for the workers
        cm = env.context.cost_manager
        budget = (cm.max_budget, cm.total_cost)
        topology = None if self._topology_sent else self._current_topology()
        self._topology_sent = True
        # every worker, every round: each hands its peers their mail (an empty batch says "none")
        results = await asyncio.gather(*(self._run_group(g, budget, topology) for g in self._groups))
        outcome = RoundOutcome()
        self._from_workers = {}
        for group, result in zip(self._groups, results, strict=True):
            self.last_round_seconds[group.name] = result["seconds"]
            self.last_round_mail[group.name] = result["mail"]
            group.outgoing = sum(result["mail"])
            outcome.active += result["active"]
            outcome.messages += result["messages"]
            outcome.failures.update(result["failures"])
            for name, addresses in result["addresses"].items():
                if set(addresses) != self.router.addresses().get(name):
                    self.router.set_addresses(name, addresses)
                    self._topology = None  # every worker routes by the new addresses next round
            merge_usage(cm, result["usage"])
        self._from_workers = {id(m): m for m in outcome.messages}
        if self._topology is None:
            self._topology_sent = False
        return outcome

    def close(self) -> None:
        ray = _ray()
        for actor in [*(g.actor for g in self._groups), *self._warm]:
            try:
                ray.kill(actor)
            except Exception as exc:  # already gone
                logger.debug("killing {}: {}", actor, exc)
        if self._meter is not None:
            try:
                ray.kill(self._meter)
            except Exception as exc:
                logger.debug("killing the meter: {}", exc)
        self._groups, self._warm, self._meter = [], [], None
        if self._started_ray and ray.is_initialized():
            ray.shutdown()
        self._started_ray = False

    # -------------------------------------------------------------- the round
    def _current_topology(self) -> tuple[list[Any], Routing]:
        if self._topology is None:
            actor_of = {name: group.index for name, group in self._group_of.items()}
            routing = Routing(self.router.names, self.router.addresses(), actor_of, self._joined)
            self._topology = ([g.actor for g in self._groups], routing)
        return self._topology

    async def _run_group(
        self, group: _Group, budget: tuple[float | None, float], topology: tuple[list[Any], Routing] | None,
    ) -> dict[str, Any]:
        deliveries, group.pending = group.pending, []
        group.past.append((self.round, deliveries))
        ray = _ray()
        for attempt in range(self.max_restarts + 1):
            try:
                result: dict[str, Any] = await group.actor.run_round.remote(self.round, deliveries, budget, topology)
                break
            except ray.exceptions.RayActorError as exc:
                if attempt == self.max_restarts:
                    raise WorkerLost(group.name, group.roles, exc) from exc
                logger.warning("{} died in round {} ({}); restarting it", group.name, self.round, exc)
                await self._restore(group, ray)
                topology = None  # the restored worker has it
        group.busy = set(result["busy"])
        return result

    async def _restore(self, group: _Group, ray: Any) -> None:
        """Wait for Ray to bring the actor back, then replay the rounds before this one on it."""
        for _ in range(120):
            try:
                await group.actor.restore.remote(group.spec_ref, group.shipments, group.past[:-1],
                                                 self._current_topology())
                return
            except ray.exceptions.RayActorError:
                await asyncio.sleep(0.5)  # still restarting
        raise WorkerLost(group.name, group.roles)

    # ----------------------------------------------------------- placement
    def _connect(self) -> None:
        ray = _ray()
        if not ray.is_initialized():
            if self.address is None:
                # "local": a new cluster, even where `ray start` left a cluster (or its address file) behind
                kwargs = {"address": "local", "num_cpus": self.num_cpus, "include_dashboard": False,
                          "log_to_driver": False,
                          "_node_ip_address": "127.0.0.1", "runtime_env": local_runtime_env(),
                          **self.init_kwargs}
                ray.init(**kwargs)
            else:
                ray.init(address=self.address, **self.init_kwargs)
                if _on_this_machine(self.address) and "runtime_env" not in self.init_kwargs \
                        and not _imports_like_this_process(ray):
                    # on this machine its workers import what this process imports: given as a runtime
                    # environment where the cluster's own workers do not (their processes start slower)
                    ray.shutdown()
                    ray.init(address=self.address, runtime_env=local_runtime_env(), **self.init_kwargs)
            self._started_ray = True

    def _worker_cls(self) -> Any:
        return _ray().remote(num_cpus=self.cpus_per_actor, max_restarts=self.max_restarts)(RoleWorker)

    def _start(self, env: Any) -> None:
        if self._spec is not None:
            return
        self._connect()
        ray = _ray()
        context = env.context
        cm = context.cost_manager
        self._budget = cm.max_budget
        if self.rate_limit is not None or cm.max_budget is not None:
            meter_cls = ray.remote(num_cpus=0)(CallMeter)
            self._meter = meter_cls.remote(self.rate_limit, cm.max_budget)
            if cm.total_cost:
                self._meter.settle.remote(0, 0, cm.total_cost)
        log = env.run_log
        self._spec = {
            "desc": env.desc,
            "config": context.given_config,
            "default_llm": _try_pickle(context.given_llm, "the team's default model"),
            "services": {k: b for k, v in context.services.items() if (b := _try_pickle(v, k)) is not None},
            "store": _shared_store(log.store if log is not None else None),
            "run_id": log.run_id if log is not None else "",
            "durability": log.durability if log is not None else "batched",
            "meter": self._meter,
            "rate_limited": self.rate_limit is not None and not self.rate_limit.unlimited,
            "metered_free_calls": self.count_free_calls,
        }

    def _sync_budget(self, env: Any) -> None:
        budget = env.context.cost_manager.max_budget
        if self._meter is not None and budget != self._budget:
            self._meter.set_budget.remote(budget)
            self._budget = budget

    async def _place(self) -> None:
        """Ship the roles hired since the last round: fill the last actor, then start new ones."""
        if not self._roles:
            return
        ray = _ray()
        assert self._spec is not None
        per = self.roles_per_actor or max(1, math.ceil(len(self.router.names) / _cluster_cpus(ray)))
        worker_cls = self._worker_cls()
        room = per - len(self._groups[-1].roles) if self._groups else 0
        names = self._placement_order(max(room, 0), per)
        first = len(self._groups) - (1 if room > 0 else 0)  # the first group to take roles
        for _ in range(math.ceil(max(0, len(names) - max(room, 0)) / per)):
            # every actor starts now (its process comes up while the driver describes the roles)
            index = len(self._groups)
            gname = f"worker-{index}"
            # kept referenced by the driver: a restarted actor is set up from it again
            spec = ray.put(WorkerSpec(name=gname, team_roles=self.router.names, index=index, **self._spec))
            group = _Group(gname, index, self._warm.pop(0) if self._warm else worker_cls.remote())
            group.spec_ref = spec
            self._groups.append(group)
        calls, taken = [], 0
        for group in self._groups[first:]:
            items: list[RoleItem] = []
            for name in names[taken:taken + per - len(group.roles)]:
                role = self._roles.pop(name)
                items.append(self._item(role))
                group.roles.append(name)
                self._group_of[name] = group
                if not role.is_idle:
                    group.busy.add(name)
                    # what the role already had in its inbox travels with it; it is read at its first turn
            taken += len(items)
            shipment = _ship(items)
            group.shipments.append(shipment)
            # sent now: the worker unpacks while the driver goes on
            calls.append(group.actor.place.remote(group.spec_ref, shipment))
        await asyncio.gather(*calls)
        self._topology, self._topology_sent = None, False
        mail, self._unplaced_mail = self._unplaced_mail, []
        for names_, message in mail:
            for name in names_:
                pending = self._group_of[name].pending
                if pending and pending[-1][1] is message:  # one entry for all a message reaches there
                    pending[-1][0].append(name)
                else:
                    pending.append(([name], message))

    def _item(self, role: Role) -> RoleItem:
        """How ``role`` travels: its class and keywords (built on the worker) or pickled."""
        if self.describe is not None and role._llm is None and role.is_idle and not len(role.rc.memory):
            keywords = self.describe(role)
            if keywords is not None:
                return ("build", type(role), dict(keywords))
        return ("role", role)

    def _placement_order(self, first: int, per: int) -> list[str]:
        """The roles to place, in the order they fill the actors (``first`` to the first, then ``per``
        to each): by hiring order, or — with ``neighbours`` — each actor's share grown breadth first
        over who talks to whom from the first role not placed yet, so that each actor holds a
        neighbourhood (on a ring: a contiguous range)."""
        names = list(self._roles)
        if self.neighbours is None:
            return names
        talks: dict[str, list[str]] = {name: [] for name in names}
        for name in names:
            for other in self.neighbours(self._roles[name]):
                if other in talks and other != name:
                    talks[name].append(other)
                    talks[other].append(name)
        seen: set[str] = set()
        order: list[str] = []
        placed: set[str] = set()
        start = 0  # the roles before it are placed
        size = first if first > 0 else per
        while len(order) < len(names):
            queue: deque[str] = deque()
            share: list[str] = []
            while len(share) < size and len(order) + len(share) < len(names):
                if not queue:  # a new seed: the first role (in hiring order) not placed yet
                    while names[start] in placed:
                        start += 1
                    seed = next(n for n in names[start:] if n not in seen)
                    seen.add(seed)
                    queue.append(seed)
                name = queue.popleft()
                share.append(name)
                placed.add(name)
                for other in talks[name]:
                    if other not in seen:
                        seen.add(other)
                        queue.append(other)
            for name in queue:  # reached but not taken: free for the next actor's share
                seen.discard(name)
            order += share
            size = per
        return order

    def pull_roles(self) -> dict[str, Role]:
        """The roles as they are now on the workers (their memories, states), as local copies."""
        ray = _ray()
        out: dict[str, Role] = {}
        for blobs in ray.get([g.actor.roles_state.remote() for g in self._groups]):
            for blob in blobs:
                role: Role = pickle.loads(blob)
                out[role.name] = role
        return out

    def worker_pids(self) -> dict[str, int]:
        """The process id of each worker (to watch, or to kill in a test)."""
        ray = _ray()
        return dict(zip([g.name for g in self._groups], ray.get([g.actor.pid.remote() for g in self._groups]),
                        strict=True))

    def actor_of(self, role: str) -> Any:
        """The actor handle holding ``role``."""
        return self._group_of[role].actor


def local_runtime_env() -> dict[str, Any]:
    """Workers of a local cluster import what this process imports: the same ``sys.path``."""
    paths = [p for p in sys.path if p and os.path.isdir(p)]
    return {"env_vars": {"PYTHONPATH": os.pathsep.join(paths)}}


def _imports_like_this_process(ray: Any) -> bool:
    """Whether the cluster's workers find every module this process finds (the head was started with
    this ``PYTHONPATH``): the actors can then start in the workers it keeps waiting."""
    wanted = set(local_runtime_env()["env_vars"]["PYTHONPATH"].split(os.pathsep))

    def worker_path() -> list[str]:  # (defined here: shipped by value, it needs nothing imported)
        import sys

        return list(sys.path)

    try:
        found = ray.get(ray.remote(num_cpus=0)(worker_path).remote(), timeout=120)
    except Exception as exc:
        logger.debug("could not ask the cluster's workers for their path: {}", exc)
        return False
    return wanted <= set(found)


def _on_this_machine(address: str) -> bool:
    """``"auto"`` (the cluster ``ray start --head`` started here) or a loopback address."""
    host = address.removeprefix("ray://").rsplit(":", 1)[0]
    return address == "auto" or host in ("127.0.0.1", "localhost")


def _cluster_cpus(ray: Any) -> int:
    return max(1, int(ray.cluster_resources().get("CPU", 1)))


def _cloudpickle() -> Any:
    from ray import cloudpickle

    return cloudpickle


def _try_pickle(llm: Any, what: str) -> bytes | None:
    if llm is None:
        return None
    from ray import cloudpickle

    try:
        blob: bytes = cloudpickle.dumps(llm)
        return blob
    except Exception as exc:  # a live client, a loaded model: made on the worker from configuration
        logger.info("{} ({!r}) cannot be shipped ({}); each worker makes it from the configuration", what, llm, exc)
        return None


def _ship(items: list[RoleItem]) -> bytes:
    """One shipment for a worker: its roles pickled together (what they share, such as their
    classes, pickled once), or described."""
    roles = [item[1] for item in items if item[0] == "role"]
    try:
        with detached(roles):
            blob: bytes = _cloudpickle().dumps(items)
        return blob
    except Exception as exc:
        culprit = next((r for r in roles if not _picklable(r)), None)
        name = culprit.name if culprit is not None else "?"
        raise UsageError(
            f"role {name!r} cannot be shipped to a Ray worker: {type(exc).__name__}: {exc}. "
            "A role's own model must be picklable (or leave it unset and give the team a configured model)"
        ) from exc


def _picklable(role: Role) -> bool:
    try:
        detached_pickle(role)
        return True
    except Exception:
        return False


def _shared_store(store: Any) -> Any:
    """The store as every worker can open it."""
    if store is None:
        return None
    shared = store.shared()  # (a UsageError for a store no other process can open: memory)
    try:
        pickle.dumps(shared)
    except Exception as exc:
        raise UsageError(f"the run store {store!r} cannot be shared with Ray workers: {exc}") from exc
    return shared


__all__ = ["RateLimit", "RayRuntime"]
