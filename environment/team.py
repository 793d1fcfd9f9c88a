"""Team: an environment of hired roles, a budget, and the rounds of a project."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from loguru import logger
from pydantic import ConfigDict, PrivateAttr

from actions import UserRequirement
from memory import MESSAGE_ROUTE_TO_ALL, Memory, Message
from rolecast.accounting.cost import CostManager
from rolecast.context import Context
from rolecast.core.classes import class_path
from rolecast.core.config import Config
from rolecast.core.misuse import checks_keywords, reject_unknown_keywords
from rolecast.core.models import Model
from rolecast.errors import ApprovalPending, BudgetExceeded, DeadlineExceeded, NestedEventLoopError, UsageError
from rolecast.llm.base import BaseLLM
from rolecast.observe.console import RunConsole, open_console
from rolecast.runs.binding import claim_binding
from rolecast.runs.events import RunStoppedData
from rolecast.runs.ids import check_run_id
from rolecast.runs.lineage import Lineage, check_lineage, fork_run
from rolecast.runs.log import Durability, RunLog, check_durability, new_run_id
from rolecast.runs.rerun import claim as claim_rerun
from rolecast.runs.rerun import started_command
from rolecast.runs.store import (
    CHECKPOINT,
    DEFAULT_STORE_PATH,
    RUN_STARTED,
    RUN_STOPPED,
    RunEvent,
    configured_store,
    default_store,
    open_store,
)
from rolecast.tuning.surface import apply_tuning, resolve_tuning
from roles import Role
from roles.action_list import raw_actions
from roles.checks import refuse_roles_that_do_nothing
from roles.fitting import as_compaction, compaction_from_env

from .environment import Environment
from .runtime import Runtime
from .serialize import dump_costs, dump_role, is_plain_dump, load_costs, load_role, read_team, write_team
from .team_parts import ON_ERROR, History, OnError, _check_budget_value, _check_idea, _runtime, default_on_error
from .turns import check_concurrency

#: ``Team(store=DEFAULT)``: ``$ROLECAST_STORE`` or ``./.rolecast/runs.db``
DEFAULT: Any = object()

INIT_KEYWORDS = frozenset(
    {"llm", "llms", "context", "config", "roles", "on_error", "env_desc", "store", "run_id", "runtime", "durability",
     "reuse", "fork", "at", "compaction", "max_concurrent_turns", "tuning"}
)


def _claimed_run(
    team_class: str, store: Any, run_id: str | None, reuse: str | None, fork: str | None
) -> tuple[Any, str | None, str | None, dict[str, str]]:
    """``(store, run_id, reuse, tags)`` of a team given no run of its own: the run a runner bound for
    it (``rolecast eval``'s factory call), else under ``rolecast runs rerun`` (``$ROLECAST_REUSE``) the
    parent's rerun for the first team like the parent's; else as given."""
    tags: dict[str, str] = {}
    if reuse is None and fork is None and run_id in (None, ""):
        bound = claim_binding()
        if bound is not None:
            store, run_id, reuse, tags = bound.store, bound.run_id, bound.reuse, dict(bound.tags)
    if reuse is None and fork is None and run_id in (None, "") and store is not None:
        claimed = claim_rerun(team_class, configured_store() if store is DEFAULT else store)
        if claimed is not None:
            reuse, run_id = claimed
    return store, run_id, reuse, tags


@checks_keywords
class Team(Model):
    """A team of roles working on one idea, round by round::

        team = Team(llm=my_model)           # or Team() for the configured default
        team.hire([SimpleCoder(), SimpleTester()])
        team.invest(3.0)                    # budget in dollars
        team.run_project("write a function that adds two numbers")
        history = await team.run(n_round=5)

    ``runtime``: where the roles run — ``"local"`` (this process, the default), ``"ray"``
    (Ray actors, see :class:`~environment.ray_runtime.RayRuntime`) or a runtime object;
    the script and the history are the same under each.

    ``llm`` is the team's default model and ``llms`` its named services; ``on_error``
    chooses what a failing role does: ``"stop"`` (the default) ends the run with its typed
    error, after saving a checkpoint; ``"continue"`` records it in ``team.env.errors`` while
    the others go on; ``"recover"`` is MetaGPT's flow — the error is logged, the team saved
    (``serialize()``) and :meth:`run` returns the history so far, the failed role's
    ``rc.state`` at its failed action so that the saved team resumes there. Not given, it is
    ``$ROLECAST_ON_ERROR`` or ``"stop"``. An ``env`` given in code
    (``Team(env=Environment(desc=...))``) gets the team's context, model and ``on_error``;
    ``env_desc`` sets its description. Other keywords are a
    :class:`~rolecast.errors.UsageError` naming the closest one.

    Every run is logged, write-ahead, to a run store: ``store`` is a path (SQLite), a
    :class:`~rolecast.runs.store.RunStore`, or None for no log; by default
    ``$ROLECAST_STORE`` or ``./.rolecast/runs.db``. ``run_id`` names the run
    (``team.run_id``; a fresh one by default). Running a script again with the
    ``run_id`` of an earlier run *resumes* it: what the log holds is re-executed with
    every recorded model call answered from the log (nothing is paid twice), and the
    run goes on live from the first call the log does not hold. A model call's answer
    is durable before it is used: with the SQLite store at once, in its journal (after a
    crash, only the calls in flight are asked again), and in the database with the other
    events of that turn of the event loop (``durability="batched"``, the default);
    ``"call"`` commits each call alone in the database (one transaction per call costs
    more, see :mod:`rolecast.runs.log`). While it runs, the team holds its run's lease: another
    process opening the same ``run_id`` gets :class:`~rolecast.errors.RunInUse`.

    ``reuse=PARENT`` (with a new ``run_id``) reruns an edited script paying only for what
    changed: a call whose role, action and request match one of ``PARENT``'s is answered from
    its log, free. ``fork=PARENT, at=ROUND`` starts the run as a copy of ``PARENT``'s rounds
    1 … ROUND (answered from the log), then goes live (see :mod:`rolecast.runs.lineage`).
    ``rolecast runs rerun PARENT`` runs the script again as such a rerun: the first team of
    ``PARENT``'s class built with none of ``run_id``, ``reuse`` and ``fork`` takes
    ``$ROLECAST_REUSE`` and ``$ROLECAST_RUN_ID`` (see :mod:`rolecast.runs.rerun`). A runner that
    builds teams from a user's factory (``rolecast eval``) hands the first team built with none of
    them its run id, store, the run to reuse and tags the same way, in a context variable
    (:func:`rolecast.runs.binding.bind_next_team`).

    ``compaction`` (True, a :class:`~roles.fitting.Compaction` or a dict of its fields): every role's
    older messages are summarised past a share of its window (a role's own setting comes first).

    ``max_concurrent_turns``: how many turns of a round run at once in this process (default 4,096;
    the others start in the roles' order as turns finish), so that a round of a million roles holds
    thousands of turns — and model calls — in flight, not a million tasks.

    ``round_timeout`` and ``run_timeout`` (seconds, optional) are deadlines: a round
    or the whole :meth:`run` that takes longer is cancelled and raises
    :class:`~rolecast.errors.DeadlineExceeded`. Each model call has its own deadline
    too (its provider's ``timeout``).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, defer_build=True)

    _store_spec: Any = PrivateAttr(default=None)
    _durability: Durability = PrivateAttr(default="batched")
    _reuse: str | None = PrivateAttr(default=None)
    _fork: tuple[str, int] | None = PrivateAttr(default=None)
    _run_id: str = PrivateAttr(default="")
    _tags: dict[str, str] = PrivateAttr(default_factory=dict)
    _rounds: int = PrivateAttr(default=0)
    _log_after: int = PrivateAttr(default=0)
    _logged_start: bool = PrivateAttr(default=False)
    _recover: bool = PrivateAttr(default=False)
    _tuning: Any = PrivateAttr(default=None)
    _cancel_why: str = PrivateAttr(default="")

    env: Environment
    investment: float = 10.0
    idea: str = ""
    round_timeout: float | None = None
    run_timeout: float | None = None

    def __init__(
        self,
        llm: BaseLLM | None = None,
        llms: dict[str, BaseLLM] | None = None,
        *,
        context: Context | None = None,
        config: Config | None = None,
        roles: Iterable[Role] | None = None,
        on_error: OnError | None = None,
        env_desc: str | None = None,
        runtime: str | Runtime | None = None,
        store: Any = DEFAULT,
        run_id: str | None = None,
        durability: Durability = "batched",
        reuse: str | None = None,
        fork: str | None = None,
        at: int | None = None,
        compaction: Any = None,
        max_concurrent_turns: int | None = None,
        tuning: Any = None,
        **data: Any,
    ):
        policy = on_error if on_error is not None else default_on_error()
        if policy not in ON_ERROR:
            raise UsageError(f'Team(on_error={policy!r}): choose "stop", "continue" or "recover"')
        self_recovers = policy == "recover"
        # the environment stops at a failure; a recovering team then logs, saves and returns
        env_on_error: Literal["stop", "continue"] = "continue" if policy == "continue" else "stop"
        check_durability(durability, "Team")
        reject_unknown_keywords("Team", data, {*type(self).model_fields, *INIT_KEYWORDS})
        if fork is not None and reuse is not None:
            raise UsageError("Team(fork=..., reuse=...): a run is a fork of one run or reuses one, not both")
        if (fork is None) != (at is None):
            raise UsageError("Team(fork=RUN, at=ROUND): a fork needs both the run and the round")
        store, run_id, reuse, tags = _claimed_run(type(self).__name__, store, run_id, reuse, fork)
        if store is None and (fork is not None or reuse is not None):
            raise UsageError("a fork or a rerun that reuses a run reads that run from a store: give Team(store=...)")
        if "investment" in data:
            data["investment"] = _check_budget_value(data["investment"])
        env = data.get("env")
        if env is None:
            ctx = context or Context(config=config, llm=llm, llms=llms)
            data["env"] = Environment(context=ctx, on_error=env_on_error, runtime=_runtime(runtime))
        elif isinstance(env, Environment):
            if context is not None:
                env.context = context
                for role in env.roles.values():
                    role.set_env(env)
            elif config is not None:
                raise UsageError("Team(env=..., config=...): give the config to the env's Context instead")
            if llm is not None:
                env.context.set_llm(llm)
            for name, service in (llms or {}).items():
                env.context.add_service(name, service)
            env.on_error = env_on_error
            if runtime is not None:
                raise UsageError("Team(env=..., runtime=...): give the runtime to the Environment instead")
        super().__init__(**data)
        self._recover = self_recovers
        if compaction is None:  # $ROLECAST_COMPACTION: a script that does not ask for it, run with it
            compaction = compaction_from_env()
        if compaction is not None:  # every role's, unless the role has its own (see roles.fitting)
            self.env.context.kwargs.set("compaction", as_compaction(compaction))
        if env_desc is not None:
            self.env.desc = env_desc
        if max_concurrent_turns is not None:
            self.env.max_concurrent_turns = check_concurrency(max_concurrent_turns, "Team")
        self.env.context.cost_manager.max_budget = self.investment
        self._store_spec = store
        self._durability = durability
        self._reuse = reuse
        self._fork = None if fork is None or at is None else (fork, at)
        self._run_id = check_run_id(run_id) if run_id not in (None, "") else new_run_id()
        self._tags = tags
        self._rounds = 0
        # a tuning (a path, a Tuning; else the active one or $ROLECAST_TUNING), applied when the team starts
        self._tuning = resolve_tuning(tuning)
        if roles:
            self.hire(roles)

    # ------------------------------------------------------------ the run log
    @property
    def run_id(self) -> str:
        """The id of this team's run in the run store."""
        return self._run_id

    @property
    def run_log(self) -> RunLog:
        """This run's log (opened on first use: the store's file is created then)."""
        log = self.env.run_log
        if log is None:
            spec = self._store_spec
            store = default_store() if spec is DEFAULT else open_store(spec)  # type: ignore[arg-type]
            if self._fork is not None and store is not None:
                parent, at = self._fork
                if not check_lineage(store, self._run_id, Lineage("fork", parent, at)):
                    fork_run(store, parent, at, self._run_id)  # (the parent is only read)
            log = RunLog(store, self._run_id, after_seq=self._log_after, durability=self._durability, lease=True,
                         reuse=self._reuse)
            log.round = self._rounds
            self.env.set_run_log(log)
            self.context.run_log = log
        return log

    # --------------------------------------------------------- save and restore
    def serialize(self, stg_path: str | os.PathLike[str] | None = None) -> Path:
        """Save the team (roles of their own classes, memories, inboxes, states, plans, costs) to a
        folder; MetaGPT's ``Team.serialize``. Returns the file written."""
        folder = Path(stg_path) if stg_path is not None else self._checkpoint_dir()
        log = self.run_log
        mark = log.emit(CHECKPOINT, {"path": str(folder), "rounds": self._rounds}, force=True)
        state = {
            "run_id": self.run_id, "log_seq": mark.seq, "rounds": self._rounds,
            "idea": self.idea, "investment": self.investment, "desc": self.env.desc,
            "on_error": "recover" if self._recover else self.env.on_error,
            "roles": [dump_role(r) for r in self.env.roles.values()],
            "history": [m.model_dump(mode="json") for m in self.env.history.get()],
            "costs": dump_costs(self.cost_manager),
        }
        return write_team(folder, state)

    @classmethod
    def deserialize(
        cls, stg_path: str | os.PathLike[str], context: Context | None = None, **kwargs: Any
    ) -> Team:
        """A team saved by :meth:`serialize`, ready to ``await team.run(n_round)`` on; MetaGPT's
        ``Team.deserialize``. Role and action classes must be loaded (imported) already."""
        state = read_team(stg_path)
        if is_plain_dump(state):  # a plain model_dump() (MetaGPT's team.json): its fields, as Team(**data) takes them
            fields = dict(state)
            env = Environment(**fields.pop("env"), context=context or Context())
            return cls(context=context, env=env, **fields, **kwargs)
        kwargs.setdefault("run_id", state["run_id"])
        team = cls(context=context, on_error=state["on_error"], investment=state["investment"],
                   idea=state["idea"], **kwargs)
        team.env.desc = state["desc"]
        team._rounds = state["rounds"]
        if kwargs["run_id"] == state["run_id"]:
            team._log_after = state["log_seq"]  # the log before the checkpoint is in the restored state
        team.hire(load_role(r) for r in state["roles"])
        team.env.history = Memory(Message.model_validate(m) for m in state["history"])
        load_costs(team.cost_manager, state["costs"])
        return team

    def _checkpoint_dir(self) -> Path:
        store = self.run_log.store
        base = store.home if store is not None and store.home is not None else DEFAULT_STORE_PATH.parent
        return base / "checkpoints" / check_run_id(self.run_id)  # one folder inside the store's: never a path

    @property
    def runtime(self) -> Runtime | None:
        """Where the roles run: None in this process, else the runtime (``runtime="ray"``)."""
        return self.env.runtime

    def close(self) -> None:
        """Release the runtime's workers (a Ray cluster this team started is shut down)."""
        if self.env.runtime is not None:
            self.env.runtime.close()

    @property
    def context(self) -> Context:
        return self.env.context

    @property
    def cost_manager(self) -> CostManager:
        return self.env.context.cost_manager

    def hire(self, roles: Iterable[Role] | Role) -> None:
        """Add roles to the team's environment (one role alone is a list of one)."""
        self.env.add_roles(roles)

    def invest(self, investment: float) -> None:
        """Set the budget in dollars (>= 0; 0 allows only free models); the run stops with BudgetExceeded
        before passing it."""
        investment = _check_budget_value(investment)
        self.investment = investment
        self.cost_manager.max_budget = investment
        logger.info("investment: ${}", investment)

    def run_project(self, idea: str, send_to: str | Iterable[str] = "") -> None:
        """Publish the user's idea as a ``UserRequirement`` message (to everyone, or ``send_to``)."""
        idea = _check_idea(idea, "run_project")
        self.idea = idea
        self._started(idea=idea)
        self.env.publish_message(
            Message(
                content=idea,
                role="Human",  # MetaGPT's; the sender stays "user" (see README: What differs)
                cause_by=UserRequirement,
                sent_from="user",
                send_to=send_to or MESSAGE_ROUTE_TO_ALL,
            )
        )

    def start_project(self, idea: str, send_to: str | Iterable[str] = "") -> None:
        """MetaGPT's older name for :meth:`run_project`."""
        self.run_project(idea, send_to)

    def _check_balance(self) -> None:
        cm = self.cost_manager
        if cm.max_budget is not None and cm.total_cost >= cm.max_budget:
            raise BudgetExceeded(cm.total_cost, cm.max_budget)

    async def run(
        self, n_round: int = 3, idea: str = "", send_to: str = "", *, console: bool | RunConsole | None = None
    ) -> History:
        """Run up to ``n_round`` rounds (at least one), stopping early when every role is idle.

        Returns the environment's history (every message published, in order).
        ``console=True`` shows the run live in the terminal (plain text when stdout is
        not a terminal; see :mod:`rolecast.observe.console`), ``False`` never; by default it is shown
        when stdout is a terminal (a script a person runs, as MetaGPT streams) or ``$ROLECAST_CONSOLE=1``.
        """
        if isinstance(n_round, bool) or not isinstance(n_round, int) or n_round <= 0:
            raise UsageError(f"n_round is the number of rounds to run, a positive whole number; not {n_round!r}")
        view = open_console(console)
        if view is None:
            return await self._run(n_round, idea, send_to)
        if view.costs is None:
            view.costs = self.cost_manager
        log = self.run_log
        log.subscribe(view)
        if self._logged_start:  # run_project() started the log already: tell the late reader how
            view(RunEvent(log.run_id, RUN_STARTED, {**self._describe(n_round, idea or self.idea),
                                                    "resumed": not log.is_new}))
        streaming, log.stream_tokens = log.stream_tokens, view.rich  # a terminal view shows tokens as they come
        try:
            return await self._run(n_round, idea, send_to)
        finally:
            log.stream_tokens = streaming
            view.close()  # the summary, also when the run failed; a closed console ignores later events

    async def _run(self, n_round: int, idea: str, send_to: str) -> History:
        if not self.env.roles:
            self._check_runnable(idea)  # (before the run's lease is taken)
        log = self.run_log
        log.hold_lease()  # (one writer per run: RunInUse if another live process writes it)
        if not idea and not self.idea and not self.env.history.get() and log.recorded_idea:
            idea = log.recorded_idea  # a resumed run (a fork) whose script gives no idea: the one it had
        try:
            self._check_runnable(idea)
        except UsageError:
            log.release_lease()
            raise
        log = self._started(n_round, idea)
        if self._tuning is not None:  # once, on the roles hired by now (a TuningError names a key it lacks)
            tuning, self._tuning = self._tuning, None
            apply_tuning(self, tuning)
        if idea:
            self.run_project(idea=idea, send_to=send_to)
        reason = "n_round"
        loop = asyncio.get_running_loop()
        run_deadline = loop.time() + self.run_timeout if self.run_timeout else None
        try:
            for _ in range(n_round):
                if self.env.is_idle:
                    reason = "idle"
                    logger.debug("all roles are idle after {} round(s)", self._rounds)
                    break
                self._check_balance()
                self._rounds += 1
                log.round = self._rounds
                logger.debug("round {}", self._rounds)
                await self._round(run_deadline)
        except ApprovalPending as exc:  # a deferred approval: the run pauses here (not a failure)
            reason = f"waiting: approval {exc.approval_id}"
            waiting = History(self.env.history.get())
            waiting.status, waiting.pending = "waiting", (exc.approval_id,)
            logger.info("run {} waits for approval {} of {} by {}: rolecast runs approve {} {}", self.run_id,
                        exc.approval_id, exc.name, exc.role, self.run_id, exc.approval_id)
            return waiting
        except DeadlineExceeded:
            reason = "deadline"
            raise
        except BudgetExceeded:
            reason = "budget"
            raise
        except Exception as exc:
            reason = f"error: {type(exc).__name__}"
            if self._recover and not isinstance(exc, UsageError):
                self._recover_from(exc)  # MetaGPT's serialize_decorator: logged, saved, returned
            else:
                self._save_on_failure(exc)
                raise
        except BaseException as exc:  # cancelled, interrupted
            cancelled = isinstance(exc, asyncio.CancelledError) and self._cancel_why
            reason = f"cancelled: {self._cancel_why}" if cancelled else f"error: {type(exc).__name__}"
            raise
        finally:
            cm = self.cost_manager
            try:
                stopped: RunStoppedData = {
                    "reason": reason, "rounds": self._rounds, "n_round": n_round, "cost": cm.total_cost,
                    "calls": cm.total.calls, "live_calls": log.live_calls, "reused_calls": log.reused_calls,
                    "saved_cost": log.saved_cost,
                }
                log.emit(RUN_STOPPED, dict(stopped), force=True)
            finally:
                log.release_lease()
        return History(self.env.history.get())

    def cancel_reason(self, why: str) -> None:
        """Say why this team's run is about to be cancelled (``task.cancel()``): its log's ``run_stopped``
        then reads ``cancelled: WHY`` instead of ``error: CancelledError`` (``rolecast serve``'s cancel)."""
        self._cancel_why = str(why).strip() or "cancelled"

    async def _round(self, run_deadline: float | None) -> None:
        """One round of the environment, within the round's and the run's deadlines (the nearer one
        is the round's limit; when it fires, the error names it)."""
        loop = asyncio.get_running_loop()
        limit, limited_by = self.round_timeout, f"round {self._rounds}"
        if run_deadline is not None:
            left = run_deadline - loop.time()
            if left <= 0:
                raise DeadlineExceeded("the run", float(self.run_timeout or 0))
            if limit is None or left <= limit:
                limit, limited_by = left, "the run"
        if limit is None:
            await self.env.run()
            return
        if not await _finished_within(self.env.run(), limit):
            budget = self.run_timeout if limited_by == "the run" else self.round_timeout
            raise DeadlineExceeded(limited_by, float(budget or 0))

    def _check_runnable(self, idea: Any) -> None:
        """A run with no roles, or with nothing to start from, would "succeed" doing nothing: refuse it."""
        if idea:
            _check_idea(idea, "run")
        if not self.env.roles:
            raise UsageError("the team has no roles: hire some first (team.hire([...]) or Team(roles=[...]))")
        refuse_roles_that_do_nothing(self.env.roles.values())
        if not idea and not self.idea and self.env.is_idle and not self.env.history.get():
            raise UsageError("nothing to start from: give the idea (team.run(idea=...) or team.run_project(idea)) "
                             "or put a message in a role's inbox first")

    def _started(self, n_round: int | None = None, idea: str = "") -> RunLog:
        """The run log, with the run's start written (once)."""
        log = self.run_log
        if not self._logged_start:
            self._logged_start = True
            log.start(self._describe(n_round, idea))
        return log

    def _recover_from(self, exc: Exception) -> None:
        """``on_error="recover"``: log the failure and save the team (its own ``serialize()``)."""
        logger.opt(exception=exc).error("run {} failed: {}; the team is saved and the run returns", self.run_id, exc)
        try:
            self.serialize()
        except Exception as save_error:
            logger.error("could not save the failed run {}: {}", self.run_id, save_error)

    def _save_on_failure(self, exc: Exception) -> None:
        """MetaGPT's ``serialize_decorator``: a failed run is saved first, and its error says where.

        Beside the run store (a run with no store keeps nothing on disk)."""
        store = self.run_log.store
        if store is None or store.home is None:  # (a store with no folder of its own: PostgreSQL, memory)
            return
        try:
            path = self.serialize()
        except Exception as save_error:  # never hide the run's own error behind the save's
            logger.error("could not save the failed run {}: {}", self.run_id, save_error)
            return
        if not isinstance(path, Path):  # a serialize() of the script's own (MetaGPT's tests patch it)
            logger.error("run {} failed: {}; the team was saved by {}", self.run_id, exc, type(self).serialize)
            return
        note = f"the team was saved to {path.parent}; Team.deserialize({str(path.parent)!r}) continues it"
        logger.error("run {} failed: {}; {}", self.run_id, exc, note)
        if hasattr(exc, "add_note"):
            exc.add_note(note)
        exc.checkpoint = path.parent  # type: ignore[attr-defined]

    def _describe(self, n_round: int | None, idea: str) -> dict[str, Any]:
        roles = [
            {"name": r.name, "profile": r.profile, "class": class_path(r),
             "actions": [a.name for a in raw_actions(r.actions)]}  # (raw: a shared action stays shared)
            for r in self.env.roles.values()
        ]
        described = {"team": type(self).__name__, "roles": roles, "idea": idea or self.idea,
                     "investment": self.investment, "n_round": n_round}
        if self._tags:  # (a runner's labels: rolecast eval's eval and case)
            described["tags"] = dict(self._tags)
        lineage = self.run_log.lineage
        if lineage is not None:
            described["lineage"] = lineage
        command = started_command()  # (what `rolecast runs rerun` runs again)
        if command is not None:
            described["command"] = command
        return described

    def run_sync(
        self, n_round: int = 3, idea: str = "", send_to: str = "", *, console: bool | RunConsole | None = None
    ) -> History:
        """:meth:`run` for plain scripts. Refuses to run inside a running event loop."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass  # no loop: ours to start, outside this handler (its errors are not "during handling" of this one)
        else:
            raise NestedEventLoopError("Team.run_sync() was called inside a running event loop; "
                                       "use `await team.run()`")
        return asyncio.run(self.run(n_round=n_round, idea=idea, send_to=send_to, console=console))


async def _finished_within(coro: Any, limit: float) -> bool:
    """Await ``coro`` for at most ``limit`` seconds: True when it finished (whatever it raised — a
    timeout of something inside it among them — propagates as it is), False when this deadline
    fired first (it was then cancelled, and has wound down)."""
    task = asyncio.ensure_future(coro)
    try:
        done, _ = await asyncio.wait((task,), timeout=limit)
    finally:
        if not task.done():  # the deadline fired, or this run was cancelled
            task.cancel()
            await asyncio.wait((task,))
    if not done and task.cancelled():
        return False
    task.result()
    return True


__all__ = ["DEFAULT", "INIT_KEYWORDS", "History", "Team"]
