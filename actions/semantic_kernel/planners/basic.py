"""The basic planner: a JSON list of subtasks, each one's output the next one's input.

The model answers (Semantic Kernel's ``BasicPlanner`` prompt)::

    {"input": "cars",
     "subtasks": [{"function": "FunPlugin.Joke"},
                  {"function": "WriterPlugin.Translate", "args": {"language": "Spanish"}}]}

On a model that can constrain decoding to a JSON schema the answer is asked for with
``llm.structured`` (function names limited to the available ones), so it parses on the
first try; other models get their parse or validation error back and answer again.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, create_model, field_validator

from rolecast.errors import PlanError

from ...tools import KernelFunction
from ..prompt_function import PromptTemplate
from .base import MAX_VALUE, FunctionPlan, Planner, PlanStep, arguments_schema
from .prompts import BASIC_PLANNER_PROMPT, render_basic_manual


class Subtask(BaseModel):
    """One subtask: a function name and optional arguments."""

    function: str
    args: dict[str, Any] = Field(default_factory=dict)


class BasicPlanModel(BaseModel):
    """The basic planner's JSON answer."""

    input: str = ""
    subtasks: list[Subtask] = Field(default_factory=list)

    @field_validator("input", mode="before")
    @classmethod
    def _text(cls, value: Any) -> str:
        return "" if value is None else str(value)


def constrained_basic_model(names: list[str]) -> type[BasicPlanModel]:
    """``BasicPlanModel`` whose schema lists the function names (for grammar-constrained models)."""
    enum: dict[str, Any] = {"enum": list(names)}
    fn_field: Any = (str, Field(json_schema_extra=enum))
    sub = create_model("Subtask", __base__=Subtask, function=fn_field)
    subtasks: Any = (list[sub], Field(default_factory=list))  # type: ignore[valid-type]
    return create_model("BasicPlan", __base__=BasicPlanModel, subtasks=subtasks)


def basic_grammar_schema(functions: list[KernelFunction], max_steps: int = 8) -> dict[str, Any]:
    """The basic plan's schema for grammar-constrained models: one subtask shape per function.

    ``input`` flows from step to step, so it is not among a subtask's ``args``.
    """
    subtask = {
        "anyOf": [
            {
                "type": "object",
                "properties": {"function": {"const": f.full_name}, "args": arguments_schema(f, skip=("input",))},
                "required": ["function", "args"],
                "additionalProperties": False,
            }
            for f in functions
        ]
    }
    return {
        "type": "object",
        "properties": {
            "input": {"type": "string", "maxLength": MAX_VALUE},
            "subtasks": {"type": "array", "items": subtask, "minItems": 1, "maxItems": max_steps},
        },
        "required": ["input", "subtasks"],
        "additionalProperties": False,
    }


class BasicPlanner(Planner):
    """Semantic Kernel's basic planner: ``plan = await BasicPlanner(kernel).create_plan(goal)``."""

    name = "basic"

    def __init__(self, target: Any = None, *, prompt: str = BASIC_PLANNER_PROMPT, **kwargs: Any):
        super().__init__(target, **kwargs)
        self.prompt = prompt

    async def create_plan(self, goal: str) -> FunctionPlan:
        """Ask the model for a JSON plan for ``goal``; unknown functions are sent back to it."""
        functions = self.available_functions()
        if not functions:
            raise PlanError("the basic planner has no functions to plan with")
        registry = self.available_registry()
        prompt = await PromptTemplate(self.prompt).render(
            {"available_functions": render_basic_manual(functions), "goal": goal}
        )

        def validate(plan: BasicPlanModel) -> None:
            unknown = [s.function for s in plan.subtasks if registry.find(s.function) is None]
            if unknown:
                known = ", ".join(f.full_name for f in functions)
                raise ValueError(f"unknown function(s) {unknown}; use only these: {known}")

        value, raw = await self._ask_json(
            prompt,
            BasicPlanModel,
            constrained_type=constrained_basic_model([f.full_name for f in functions]),
            grammar_schema=basic_grammar_schema(functions),
            validate=validate,
        )
        steps = []
        for subtask in value.subtasks:
            function = registry.get(subtask.function)
            steps.append(PlanStep(function.full_name, dict(subtask.args)))
        return self._plan(goal, steps=steps, input=value.input or None, raw=raw)


__all__ = ["BasicPlanModel", "BasicPlanner", "Subtask", "basic_grammar_schema", "constrained_basic_model"]
