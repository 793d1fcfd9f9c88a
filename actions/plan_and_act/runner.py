"""The ``plan_and_act`` engine: write a plan over the role's actions, run it, review, re-plan.

:class:`PlanRunner` (a role's ``planner``, MetaGPT's name for it) asks
:class:`~actions.plan_and_act.write.WritePlan` for a task graph, then runs the tasks
whose dependencies are done — one at a time by default, or up to ``concurrency``
independent tasks together. After each task a *reviewer* accepts the
result or rejects it with feedback. A failed task or a rejected result makes the
planner re-plan the remaining work (finished tasks are kept and never redone), at most
``max_replans`` times; then :class:`~rolecast.errors.PlanError`.

The plan is a pydantic model: with ``checkpoint="plan.json"`` it is saved after every
step, and a later run with the same goal resumes from it; ``resume_from(plan)`` resumes
from a plan you loaded yourself.

Options come from the planner or, when not given there, from the role's
``planner_concurrency`` / ``planner_reviewer`` attributes::

    analyst = DataAnalyst(react_mode="plan_and_act", planner_concurrency=2)
    analyst.planner = PlanRunner(max_replans=2, reviewer=ask_a_human, checkpoint="plan.json")

The runner depends on :class:`PlanOwner`, a small protocol a :class:`~roles.Role`
satisfies, not on the role's internals; each task runs through the one action path,
:func:`~actions.perform.perform`.
"""

from __future__ import annotations

import asyncio
import inspect
import os
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, Literal, Protocol, Union

from loguru import logger

from memory import Message
from rolecast.context import Context
from rolecast.errors import ActionFailed, OutputParseError, PlanError, ToolError, UsageError
from rolecast.llm.base import BaseLLM
from rolecast.llm.human import HumanProvider
from rolecast.llm.types import to_messages
from rolecast.llm.window import ACTION_SHARE, answer_room, fit_to_window, omitted_note

from ..action import Action
from ..perform import Performer
from .plan import Plan, Review, Task
from .write import ReviewTask, WritePlan

ReviewOutcome = Union[Review, bool, None]
Reviewer = Callable[[Task, str], Union[ReviewOutcome, Awaitable[ReviewOutcome]]]

# failures a different plan may get around; anything else (budget, cancellation,
# a dead model server) ends the run as it is
REPLANNABLE = (ActionFailed, ToolError, OutputParseError)


class PlanOwner(Performer, Protocol):
    """What :class:`PlanRunner` needs of the role whose plan it runs."""

    actions: list[Action]
    planner_concurrency: int
    planner_reviewer: Any

    @property
    def context(self) -> Context: ...

    @property
    def history(self) -> list[Message]:
        """Everything the owner remembers, oldest first."""

    @property
    def acts_concurrently(self) -> bool:
        """False when the owner's way of acting works on shared state (one task at a time)."""

    def prepare_action(self, action: Action) -> None:
        """Give a helper action (plan writer, reviewer) the owner's model, context and prefix."""

    async def perform_task(self, action: Action, note: Message) -> Message:
        """Remember ``note`` (the task's instruction), run ``action`` on the history, return its result."""


def accept_nonempty(task: Task, result: str) -> Review:
    """The default reviewer, a rule: any non-empty result is accepted."""
    if result.strip():
        return Review(ok=True)
    return Review(ok=False, feedback=f"task {task.task_id} produced an empty result")


ACCEPT_WORDS = frozenset({"", "y", "yes", "ok", "lgtm", "confirm"})


def ask_a_person(llm: BaseLLM | None = None) -> Reviewer:
    """A reviewer that asks a person (MetaGPT's ``auto_run=False``): enter or "yes" accepts a task's
    result; anything else is the feedback the task is redone with. ``llm`` is the person
    (a :class:`~rolecast.llm.human.HumanProvider`; standard input by default)."""
    person = llm or HumanProvider()

    async def review(task: Task, result: str) -> Review:
        answer = await person.ask(
            f"Task {task.task_id}: {task.instruction}\nResult:\n{result}\n\n"
            "Accept it? Press enter or type yes to accept; anything else is sent back as feedback."
        )
        ok = answer.strip().lower() in ACCEPT_WORDS
        return Review(ok=ok, feedback="" if ok else answer.strip())

    return review


def by_order_plan(goal: str, actions: Sequence[Action]) -> Plan:
    """A plan that runs each action once, in order, each after the one before."""
    return Plan(
        goal=goal,
        tasks=[
            Task(
                task_id=str(i),
                dependent_task_ids=[str(i - 1)] if i > 1 else [],
                instruction=(a.desc.strip() or a.name).splitlines()[0],
                action=a.name,
            )
            for i, a in enumerate(actions, 1)
        ],
    )


class PlanRunner:
    """Plans with :class:`~actions.plan.WritePlan` and runs the tasks of the plan.

    ``concurrency`` — how many independent tasks may run at once (default 1);
    ``reviewer`` — ``"auto"`` (a rule: non-empty results pass; the default), ``"llm"``
    (the model judges each result), ``"none"``, or a callable / async callable
    ``reviewer(task, result) -> Review | bool``; ``checkpoint`` — a JSON file the plan
    is saved to after each step and resumed from; ``fallback="by_order"`` — when the
    model writes no valid plan, run the role's actions once each, in order (logged),
    instead of raising :class:`~rolecast.errors.PlanError`.

    Each task's instruction, with the results of the tasks it depends on (and earlier
    review feedback), is put into the role's memory and the task's action runs on the
    role's history. A role that overrides ``_act`` has its tasks run through ``_act``,
    one at a time.
    """

    def __init__(
        self,
        max_replans: int = 1,
        max_tasks: int = 8,
        *,
        concurrency: int | None = None,
        reviewer: Reviewer | str | None = None,
        checkpoint: str | os.PathLike[str] | None = None,
        fallback: Literal["raise", "by_order"] = "raise",
    ):
        if concurrency is not None and concurrency < 1:
            raise UsageError("concurrency must be at least 1")
        self.max_replans = max_replans
        self.max_tasks = max_tasks
        self.concurrency = concurrency
        self.reviewer = reviewer
        self.checkpoint = Path(checkpoint) if checkpoint is not None else None
        self.fallback = fallback
        self.plan: Plan | None = None
        self._pending: Plan | None = None

    # ---------------------------------------------------------------- options
    def _concurrency(self, role: PlanOwner) -> int:
        if not role.acts_concurrently:
            return 1
        return max(1, int(self.concurrency or role.planner_concurrency or 1))

    def _reviewer(self, role: PlanOwner) -> Reviewer | str:
        chosen = self.reviewer if self.reviewer is not None else role.planner_reviewer
        return chosen if chosen is not None else "auto"

    def _writer(self, role: PlanOwner) -> WritePlan:
        writer = WritePlan(max_tasks=self.max_tasks)
        role.prepare_action(writer)
        return writer

    # ----------------------------------------------------------------- resume
    def resume_from(self, plan: Plan) -> None:
        """Run ``plan`` (e.g. loaded from JSON) at the role's next plan_and_act, skipping its finished tasks.

        The plan is checked like a written one (ids, dependencies, cycles; its actions
        when it runs): an invalid plan raises :class:`~rolecast.errors.PlanError`.
        """
        if not isinstance(plan, Plan):
            raise UsageError(f"resume_from() takes a Plan, not {type(plan).__name__}")
        problems = plan.errors()
        if problems:
            raise PlanError("the plan to resume from is invalid: " + "; ".join(problems), errors=problems)
        self._pending = plan

    def _resumable(self, goal: str) -> Plan | None:
        if self._pending is not None:
            plan, self._pending = self._pending, None
            return plan
        if self.plan is not None and not self.plan.is_done and self.plan.goal == goal:
            return self.plan
        if self.checkpoint is not None and self.checkpoint.exists():
            saved = Plan.load(self.checkpoint)
            if not saved.is_done and saved.goal == goal:
                return saved
        return None

    def _save(self) -> None:
        if self.checkpoint is not None and self.plan is not None:
            self.plan.save(self.checkpoint)

    # -------------------------------------------------------------------- run
    async def plan_and_act(self, role: PlanOwner, goal: str) -> Message | None:
        """Plan for ``goal`` (or resume a plan), run it to the end; returns the last task's message."""
        plan = self._resumable(goal)
        hooks = role.context.hooks
        if plan is not None:
            # however a plan enters (resume_from, a checkpoint file), it is checked before it runs
            problems = plan.errors([a.name for a in role.actions])
            if problems:
                raise PlanError("the resumed plan is invalid: " + "; ".join(problems), errors=problems)
        if plan is None:
            plan = await self._first_plan(role, goal)
            logger.info("{}: plan with {} task(s):\n{}", role, len(plan.tasks), plan.describe())
            await hooks.emit("plan.created", role=role.name, plan=plan)
        else:
            logger.info(
                "{}: resuming a plan, {} of {} task(s) done", role, len(plan.finished), len(plan.tasks)
            )
            await hooks.emit("plan.resumed", role=role.name, plan=plan)
        self.plan = plan
        self._save()
        return await self._run(role)

    async def _first_plan(self, role: PlanOwner, goal: str) -> Plan:
        try:  # the newest history that fits the window
            return await self._writer(role).run(goal, role.actions, role.history)
        except PlanError as exc:
            if self.fallback != "by_order":
                raise
            # a model too small to write a valid graph still gets the work done, in order
            logger.warning("{}: {}; falling back to the actions in order", role, exc)
            await role.context.hooks.emit("plan.fallback", role=role.name, error=exc)
            return by_order_plan(goal, role.actions)

    async def _run(self, role: PlanOwner) -> Message | None:
        assert self.plan is not None
        concurrency = self._concurrency(role)
        messages: dict[str, Message] = {}
        while True:
            plan = self.plan
            ready = plan.ready()
            if not ready:
                if plan.remaining:  # cannot happen with a checked plan; never loop forever
                    raise PlanError(f"no task of the plan can run: {plan.describe()}")
                break
            batch = ready[:concurrency]
            outcomes = await asyncio.gather(*(self._attempt(role, t) for t in batch), return_exceptions=True)
            problems: list[str] = []
            fatal: BaseException | None = None
            cause: BaseException | None = None
            for task, outcome in zip(batch, outcomes, strict=True):
                if isinstance(outcome, BaseException):
                    if not isinstance(outcome, REPLANNABLE):
                        fatal = fatal or outcome
                        continue
                    cause = outcome
                    reason = outcome.cause if isinstance(outcome, ActionFailed) else outcome
                    problems.append(
                        f"task {task.task_id} ({task.instruction}) failed: {type(reason).__name__}: {reason}"
                    )
                    continue
                msg, review = outcome
                if review.ok:
                    task.is_finished = task.is_success = True
                    messages[task.task_id] = msg
                    await role.context.hooks.emit("plan.task_finished", role=role.name, task=task)
                else:
                    problems.append(
                        f"the reviewer rejected task {task.task_id} ({task.instruction}): {review.feedback}"
                    )
            self._save()
            if fatal is not None:
                raise fatal
            if problems:
                await self._replan(role, problems, cause)
        return self._final_message(role, messages)

    async def _attempt(self, role: PlanOwner, task: Task) -> tuple[Message, Review]:
        """Run one task's action, then review its result."""
        plan = self.plan
        assert plan is not None
        # a task that names no action (MetaGPT's plans) runs the role's first, default action
        index = next((i for i, a in enumerate(role.actions) if a.name == task.action), None) if task.action else (
            0 if role.actions else None
        )
        if index is None:
            raise ToolError(f"task {task.task_id} names unknown action {task.action!r}")
        task.attempts += 1
        content = task.instruction
        if task.feedback:
            content += f"\n\nFeedback on an earlier attempt: {task.feedback}"
        deps = [plan.task(d) for d in task.dependent_task_ids]
        if deps:
            content += "\n\nResults of the tasks this one depends on:\n" + await self._results(
                role.actions[index], content, [f"[{d.task_id}] {d.result}" for d in deps])
        note = Message(
            content=content,
            role="planner",
            cause_by=WritePlan,
            sent_from=role.name,
            send_to={role.name},
            metadata={"task_id": task.task_id},
        )
        logger.info("{}: task {} with {}: {}", role, task.task_id, task.action, task.instruction)
        await role.context.hooks.emit("plan.task_started", role=role.name, task=task)
        msg = await role.perform_task(role.actions[index], note)
        msg.metadata.setdefault("task_id", task.task_id)
        task.result = msg.content
        review = await self._review(role, plan, task, msg.content)
        task.feedback = "" if review.ok else review.feedback
        await role.context.hooks.emit("plan.review", role=role.name, task=task, review=review)
        return msg, review

    @staticmethod
    async def _results(action: Action, instruction: str, results: list[str]) -> str:
        """The results a task is given: the newest that fit its action's window beside its instruction,
        the action's own words (an eighth of the window) and its answer's room."""
        llm = action.llm
        fixed = to_messages(instruction, [action.prefix] if action.prefix else None)
        omitted = await fit_to_window(llm, results, fixed, answer_room(llm, action.settings), what="task result",
                                      purpose=f"task results for {action.name}",
                                      reserve=int(llm.context_window * ACTION_SHARE))
        return "\n".join([omitted_note(omitted, "task result"), *results[omitted:]] if omitted else results)

    async def _review(self, role: PlanOwner, plan: Plan, task: Task, result: str) -> Review:
        reviewer = self._reviewer(role)
        if reviewer == "none":
            return Review(ok=True)
        if reviewer == "auto":
            return accept_nonempty(task, result)
        if reviewer == "llm":
            judge = ReviewTask()
            role.prepare_action(judge)
            return await judge.run(plan.goal, task, result)
        if isinstance(reviewer, str):
            raise UsageError(f"reviewer must be 'auto', 'llm', 'none' or a callable, not {reviewer!r}")
        outcome = reviewer(task, result)
        if inspect.isawaitable(outcome):
            outcome = await outcome
        if outcome is None:
            return Review(ok=True)
        if isinstance(outcome, bool):
            return Review(ok=outcome, feedback="" if outcome else "rejected by the reviewer")
        return outcome

    async def _replan(self, role: PlanOwner, problems: list[str], cause: BaseException | None) -> None:
        plan = self.plan
        assert plan is not None
        if plan.replans >= self.max_replans:
            raise PlanError(
                f"{role}: {problems[-1]}; the {self.max_replans} allowed re-plan(s) are used up",
                errors=problems,
            ) from cause
        plan.replans += 1
        logger.warning(
            "{}: {}; re-planning ({}/{})", role, "; ".join(problems), plan.replans, self.max_replans
        )
        # the newest finished tasks and history that fit the window, and what went wrong
        fresh = await self._writer(role).run(plan.goal, role.actions, role.history, done=plan.finished,
                                             problems=problems)
        self.plan = plan.merge_replan(fresh, f"r{plan.replans}-")
        self._save()
        logger.info("{}: new plan:\n{}", role, self.plan.describe())
        await role.context.hooks.emit("plan.replanned", role=role.name, plan=self.plan, problems=problems)

    def _final_message(self, role: PlanOwner, messages: dict[str, Message]) -> Message | None:
        assert self.plan is not None
        ordered = self.plan.ordered()
        for task in reversed(ordered):
            if task.task_id in messages:
                return messages[task.task_id]
        if not ordered:
            return None
        last = ordered[-1]  # everything was done before (a resumed, finished plan)
        action = next((a for a in role.actions if a.name == last.action), None)
        return Message(content=last.result, role=role.profile, cause_by=action or WritePlan, sent_from=role.name)


__all__ = ["REPLANNABLE", "PlanOwner", "PlanRunner", "Reviewer", "accept_nonempty", "ask_a_person", "by_order_plan"]
