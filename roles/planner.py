"""The ``plan_and_act`` engine: write a plan over the role's actions, run it, re-plan on failure."""

from __future__ import annotations

from typing import TYPE_CHECKING

from loguru import logger

from actions.plan import Plan, Task, WritePlan
from memory import Message
from rolecast.errors import ActionFailed, PlanError

if TYPE_CHECKING:
    from .role import Role


class RolePlanner:
    """Plans with :class:`~actions.plan.WritePlan`, runs tasks in topological order.

    Each task runs the role's named action through the role's own ``_act`` (so
    overrides work): the task's instruction, with the results of the tasks it depends
    on, is put into the role's memory first. Each result becomes a Message in memory.
    A failing task triggers a re-plan of the remaining work, at most ``max_replans``
    times; then :class:`~rolecast.errors.PlanError`.
    """

    def __init__(self, max_replans: int = 1, max_tasks: int = 8):
        self.max_replans = max_replans
        self.max_tasks = max_tasks
        self.plan: Plan | None = None

    def _writer(self, role: Role) -> WritePlan:
        writer = WritePlan(max_tasks=self.max_tasks)
        role._init_action(writer)
        return writer

    async def plan_and_act(self, role: Role, goal: str) -> Message | None:
        writer = self._writer(role)
        history = "\n".join(str(m) for m in role.rc.history)
        plan = await writer.run(goal, role.actions, history)
        self.plan = plan
        logger.info("{}: plan with {} task(s)", role._setting, len(plan.tasks))
        replans = 0
        last: Message | None = None
        while True:
            task: Task | None = None
            try:
                for task in plan.remaining:
                    last = await self._run_task(role, plan, task)
                return last
            except ActionFailed as exc:
                if replans >= self.max_replans:
                    raise PlanError(
                        f"task {task.task_id if task else '?'} failed and {replans} re-plan(s) are used up",
                        errors=[str(exc)],
                    ) from exc
                replans += 1
                logger.warning("{}: {}; re-planning ({}/{})", role._setting, exc, replans, self.max_replans)
                plan = await self._replan(role, writer, plan, task, exc, replans)
                self.plan = plan

    async def _replan(
        self, role: Role, writer: WritePlan, plan: Plan, failed: Task | None, error: ActionFailed, n: int
    ) -> Plan:
        done = "\n".join(f"- [{t.task_id}] {t.instruction}: {t.result}" for t in plan.finished) or "(none)"
        extra = (
            f"\nA previous plan failed at task {failed.task_id if failed else '?'} "
            f"({failed.instruction if failed else ''}): {error.cause}.\n"
            f"These tasks are already done (do not repeat them):\n{done}\n"
            "Plan only the remaining work."
        )
        history = "\n".join(str(m) for m in role.rc.history)
        fresh = await writer.run(plan.goal, role.actions, history, extra)
        # new ids are prefixed so they never collide with finished tasks' ids
        prefix = f"r{n}-"
        tasks = [
            t.model_copy(
                update={
                    "task_id": prefix + t.task_id,
                    "dependent_task_ids": [prefix + d for d in t.dependent_task_ids],
                }
            )
            for t in fresh.tasks
        ]
        return Plan(goal=plan.goal, tasks=[*plan.finished, *tasks])

    async def _run_task(self, role: Role, plan: Plan, task: Task) -> Message:
        index = next(i for i, a in enumerate(role.actions) if a.name == task.action)
        deps = [plan.task(d) for d in task.dependent_task_ids]
        content = task.instruction
        if deps:
            content += "\n\nResults of the tasks this one depends on:\n" + "\n".join(
                f"[{d.task_id}] {d.result}" for d in deps
            )
        role.rc.memory.add(
            Message(
                content=content,
                role="planner",
                cause_by=WritePlan,
                sent_from=role.name,
                send_to={role.name},
                metadata={"task_id": task.task_id},
            )
        )
        role._set_state(index)
        msg = await role._act_checked()
        msg.metadata.setdefault("task_id", task.task_id)
        task.result = msg.content
        task.is_finished = True
        task.is_success = True
        return msg
