"""The model's part of ``plan_and_act``: write a plan, review a task's result.

:class:`WritePlan` asks the model for a plan as structured output. The output model is
built for the role at hand — its ``action`` field admits only the role's action names —
so a model with constrained decoding cannot name an unknown action; on a
grammar-constrained model the schema admits only acyclic task graphs
(:func:`dag_schema`), so the plan is valid on the first try. Errors go back to the
model through the seam's one re-ask loop; after the allowed re-asks a
:class:`~rolecast.errors.PlanError` carries them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field, create_model

from rolecast.errors import OutputParseError, PlanError
from rolecast.llm.base import LLMSettings
from rolecast.llm.types import to_messages
from rolecast.llm.window import answer_room, fit_to_window, omitted_note, schema_tokens

from ..action import Action
from ..structured import with_json_schema
from .plan import Plan, Review, Task

WRITE_PLAN_PROMPT = """# Goal
{goal}

# Context
{context}

# Available actions
{actions}

# Task
Write a plan to achieve the goal: one to {max_tasks} tasks. Each task has a unique "task_id",
the ids of the tasks it depends on in "dependent_task_ids" (results of those tasks are given to it),
a short "instruction", and the name of the available action that performs it in "action".
A task may only depend on tasks of this plan, and dependencies must not form a cycle.
For example, a plan that uses each action once, in order:
{example}
{extra}"""

REPLAN_NOTE = """
# Progress so far
These tasks are finished; do not repeat them. New tasks may depend on them by id:
{done}

# What went wrong
{problem}

Plan only the remaining work (one to {max_tasks} tasks)."""


# Bounds that a grammar-constrained model cannot step over: without them a small model
# may fill its whole token budget with one instruction and leave the JSON unfinished.
MAX_TASK_ID = 12
MAX_INSTRUCTION = 160
#: bytes of UTF-8 per character at most: a token is at least one byte, so a token budget of the
#: longest answer's bytes can never cut a grammar-bounded plan short
UTF8_MAX = 4
#: without a grammar the plan's length is the model's choice
WRITE_PLAN_SETTINGS = LLMSettings(max_tokens=1024)
#: tokens kept beside the planning prompt for what a structured call adds to it (the schema, the
#: chat template's markers), when the plan's budget is cut to the window
PLAN_PROMPT_MARGIN = 512
#: characters of a finished task's result shown when re-planning
RESULT_PREVIEW = 400


def plan_token_bound(action_names: Sequence[str], max_tasks: int, done_ids: Sequence[str] = ()) -> int:
    """Tokens enough for the longest plan :func:`dag_schema` admits, written as compact JSON.

    The longest plan has ``max_tasks`` tasks, each depending on every task before it, with
    an instruction of ``MAX_INSTRUCTION`` four-byte characters and the longest action name.
    (An instruction written with ``\\uXXXX`` escapes could be longer; no model here writes them.)
    """
    longest_action = max((len(n.encode()) for n in action_names), default=MAX_TASK_ID * UTF8_MAX)
    schema = dag_schema(["x" * longest_action], max_tasks, done_ids)["$defs"]
    tasks = []
    for k in range(1, max_tasks + 1):
        shape = schema[f"Task{k}"]["properties"]
        tasks.append({
            "task_id": shape["task_id"]["const"],
            "dependent_task_ids": shape["dependent_task_ids"].get("items", {}).get("enum", []),
            "instruction": "x" * (MAX_INSTRUCTION * UTF8_MAX),
            "action": "x" * longest_action,
        })
    return len(json.dumps({"tasks": tasks}).encode())


def _plan_output_model(
    action_names: Sequence[str], max_tasks: int = 8, dag: bool = False, done_ids: Sequence[str] = ()
) -> type[BaseModel]:
    """The structured-output model for a plan whose actions must be among ``action_names``.

    With ``dag`` its JSON schema is :func:`dag_schema` (the validation stays the same).
    """
    action_type: Any = Literal[tuple(action_names)] if action_names else str  # type: ignore[valid-type]
    task_model = create_model(
        "PlanTask",
        task_id=(str, Field(min_length=1, max_length=MAX_TASK_ID)),
        dependent_task_ids=(list[str], Field(default_factory=list, max_length=max_tasks)),
        instruction=(str, Field(min_length=1, max_length=MAX_INSTRUCTION)),
        action=(action_type, ...),
    )
    tasks: Any = (list[task_model], Field(min_length=1, max_length=max_tasks))  # type: ignore[valid-type]
    output = create_model("PlanOutput", tasks=tasks)
    return with_json_schema(output, dag_schema(action_names, max_tasks, done_ids)) if dag else output


def dag_schema(action_names: Sequence[str], max_tasks: int, done_ids: Sequence[str] = ()) -> dict[str, Any]:
    """A JSON schema whose every instance is a valid task graph over ``action_names``.

    Task *k* (``"1"``, ``"2"`` …, in order) may depend only on tasks before it, so ids are
    unique, every dependency exists and no cycle can form. A model that decodes under
    a grammar made from this schema (the embedded llama.cpp model) writes a valid plan
    on the first try, however small it is. In a re-plan, ``done_ids`` (finished tasks)
    may be depended on too, and the new ids get a prefix that none of them has.
    """
    action: dict[str, Any] = {"enum": list(action_names)} if action_names else {"type": "string"}
    prefix = ""
    if done_ids:
        n = 1
        while any(d.startswith(f"r{n}-") for d in done_ids):
            n += 1
        prefix = f"r{n}-"
    defs: dict[str, Any] = {}
    for k in range(1, max_tasks + 1):
        earlier = [*done_ids, *(f"{prefix}{i}" for i in range(1, k))]
        deps: dict[str, Any] = {"type": "array", "items": {"type": "string"}, "maxItems": 0}
        if earlier:
            deps = {"type": "array", "items": {"enum": earlier}, "maxItems": len(earlier)}
        defs[f"Task{k}"] = {
            "type": "object",
            "properties": {
                "task_id": {"const": f"{prefix}{k}"},
                "dependent_task_ids": deps,
                "instruction": {"type": "string", "minLength": 1, "maxLength": MAX_INSTRUCTION},
                "action": action,
            },
            "required": ["task_id", "dependent_task_ids", "instruction", "action"],
            "additionalProperties": False,
        }
    lengths = [
        {
            "type": "array",
            "prefixItems": [{"$ref": f"#/$defs/Task{i}"} for i in range(1, n + 1)],
            "items": False,
            "minItems": n,
            "maxItems": n,
        }
        for n in range(1, max_tasks + 1)
    ]
    return {
        "$defs": defs,
        "type": "object",
        "properties": {"tasks": {"anyOf": lengths}},
        "required": ["tasks"],
        "additionalProperties": False,
    }


def _example(actions: Sequence[Action], max_tasks: int) -> str:
    """A format example over the role's own actions (small models copy its shape)."""
    tasks = [
        {
            "task_id": str(i),
            "dependent_task_ids": [str(i - 1)] if i > 1 else [],
            "instruction": (a.desc or a.name).splitlines()[0][:MAX_INSTRUCTION],
            "action": a.name,
        }
        for i, a in enumerate(actions[:max_tasks], 1)
    ]
    return json.dumps({"tasks": tasks}, ensure_ascii=False)


def done_line(task: Task) -> str:
    """A finished task as a re-plan lists it: its id, instruction and the start of its result."""
    result = " ".join(task.result.split())
    if len(result) > RESULT_PREVIEW:
        result = result[: RESULT_PREVIEW - 1] + "…"
    return f"- [{task.task_id}] {task.instruction}: {result}"


def _to_plan(goal: str, value: BaseModel) -> Plan:
    return Plan(goal=goal, tasks=[Task(**t.model_dump()) for t in value.tasks])  # type: ignore[attr-defined]


class WritePlan(Action):
    """Ask the model for a valid :class:`Plan` over the given actions.

    ``done`` are tasks finished before (a re-plan): the new tasks may depend on them.
    """

    name: str = "WritePlan"
    max_tasks: int = 8
    retries: int = 3
    dag_schema: bool | None = Field(
        default=None,
        description="constrain the output schema to acyclic plans (None: on grammar-constrained models)",
    )

    async def run(  # type: ignore[override]
        self,
        goal: str,
        actions: Sequence[Action],
        context: str | Sequence[Any] = "",
        extra: str = "",
        done: Sequence[Task] = (),
        problems: Sequence[str] = (),
    ) -> Plan:
        """A plan for ``goal`` over ``actions``. ``context``: a text, or a history (messages, oldest
        first) of which the newest that fit the model's window are shown. A re-plan gives the finished
        tasks (``done``) and what went wrong (``problems``): the prompt lists the newest finished tasks
        that fit (:data:`REPLAN_NOTE`). ``extra`` is added to the prompt as it is."""
        names = [a.name for a in actions]
        llm = self.llm
        dag = self.dag_schema if self.dag_schema is not None else llm.grammar_constrained
        done_ids = [t.task_id for t in done]
        output_model = _plan_output_model(names, self.max_tasks, dag, done_ids)
        # the plan's room: 1,024 tokens, or half of a smaller window
        floor = LLMSettings(max_tokens=min(WRITE_PLAN_SETTINGS.max_tokens or 0, llm.context_window // 2))
        schema = await schema_tokens(llm, output_model)  # what structured() adds: the schema in the prompt
        prompt = await self._fitted_prompt(goal, actions, context, extra, done, problems, schema,
                                           floor.merged(self.settings))
        # under the DAG grammar the longest plan is known, and the budget holds it whole
        budget = floor
        if dag:
            # the longest admissible plan, within what the model's window leaves beside the prompt (and
            # its schema and template, PLAN_PROMPT_MARGIN): a plan is far shorter than the longest one
            bound = plan_token_bound(names, self.max_tasks, done_ids)
            prompt_tokens = await llm.count_tokens([{"role": "user", "content": prompt}])
            room = llm.context_window - prompt_tokens - schema - PLAN_PROMPT_MARGIN
            budget = LLMSettings(max_tokens=max(floor.max_tokens or 0, min(bound, room)))

        def check(value: BaseModel) -> None:
            plan = _to_plan(goal, value)
            problems = plan.errors(names, done_ids)
            if len(plan.tasks) > self.max_tasks:
                problems.append(f"the plan has {len(plan.tasks)} tasks; at most {self.max_tasks} are allowed")
            if problems:
                raise ValueError("; ".join(problems))

        try:
            value = await llm.structured(
                prompt,
                output_model,
                [self.prefix] if self.prefix else None,
                retries=self.retries,
                validate=check,
                settings=budget.merged(self.settings),
            )
        except OutputParseError as exc:
            raise PlanError(f"no valid plan for {goal!r}: {exc}", raw=exc.raw, errors=exc.errors or [str(exc)]) from exc
        return _to_plan(goal, value)

    async def _fitted_prompt(
        self, goal: str, actions: Sequence[Action], context: str | Sequence[Any], extra: str, done: Sequence[Task],
        problems: Sequence[str], reserve: int, settings: LLMSettings,
    ) -> str:
        """The planning prompt with the newest finished tasks, then the newest history, that fit the
        window beside the goal, the actions, the format, ``reserve`` tokens (the schema) and the plan's
        room (never cut)."""
        described = "\n".join(f"- {a.name}: {a.desc or type(a).__doc__ or a.name}".strip() for a in actions)
        llm = self.llm

        def prompt(history: str, finished: str) -> str:
            replan = REPLAN_NOTE.format(done=finished, problem="\n".join(problems), max_tasks=self.max_tasks)
            return WRITE_PLAN_PROMPT.format(
                goal=goal, context=history or "(none)", actions=described, max_tasks=self.max_tasks,
                example=_example(actions, self.max_tasks), extra=(replan if problems else "") + extra,
            )

        async def fit(texts: list[str], fixed: str, what: str) -> str:
            asked = to_messages(fixed, [self.prefix] if self.prefix else None)
            omitted = await fit_to_window(llm, texts, asked, answer, purpose=f"{self.name} {what}s", what=what,
                                          reserve=reserve)
            return "\n".join([omitted_note(omitted, what), *texts[omitted:]] if omitted else texts)

        answer = answer_room(llm, settings)
        finished = await fit([done_line(t) for t in done], prompt("", ""), "finished task") if problems else ""
        finished = finished or "(none)"
        if isinstance(context, str):
            return prompt(context, finished)
        history = await fit([str(m) for m in context], prompt("", finished), "message")
        return prompt(history, finished)


class ReviewVerdict(BaseModel):
    """What the model answers when it reviews a task's result."""

    ok: bool = Field(description="true if the result completes the task")
    feedback: str = Field(default="", description="what is missing or wrong, if anything")


REVIEW_PROMPT = """# Goal
{goal}

# Task
{instruction}

# Result
{result}

# Review
Does the result complete the task well enough to go on with the plan? Answer with "ok"
(true or false) and, if it does not, short "feedback" saying what is missing or wrong."""


class ReviewTask(Action):
    """Ask the model whether a task's result completes the task (the automatic LLM reviewer)."""

    name: str = "ReviewTask"

    async def run(self, goal: str, task: Task, result: str) -> Review:  # type: ignore[override]
        prompt = REVIEW_PROMPT.format(goal=goal, instruction=task.instruction, result=await self._fitted(
            goal, task, result or "(empty)"))
        try:
            verdict = await self.llm.structured(
                prompt, ReviewVerdict, [self.prefix] if self.prefix else None, settings=self.settings
            )
        except OutputParseError:
            # an unreadable review must not sink a finished task: accept, and say so
            return Review(ok=True, feedback="(the review could not be read; accepted)")
        return Review(ok=verdict.ok, feedback=verdict.feedback)

    async def _fitted(self, goal: str, task: Task, result: str) -> str:
        """The result as the review prompt carries it: its last lines that fit the window beside the goal,
        the task, the question and the verdict's room (a result's conclusion is at its end)."""
        lines = result.splitlines()
        llm = self.llm
        fixed = to_messages(REVIEW_PROMPT.format(goal=goal, instruction=task.instruction, result=""),
                            [self.prefix] if self.prefix else None)
        omitted = await fit_to_window(llm, lines, fixed, answer_room(llm, self.settings), what="result line",
                                      purpose=f"{self.name} result", reserve=await schema_tokens(llm, ReviewVerdict))
        return "\n".join([omitted_note(omitted, "result line"), *lines[omitted:]]) if omitted \
            else result


__all__ = [
    "REPLAN_NOTE",
    "REVIEW_PROMPT",
    "WRITE_PLAN_PROMPT",
    "ReviewTask",
    "ReviewVerdict",
    "WritePlan",
    "dag_schema",
]
