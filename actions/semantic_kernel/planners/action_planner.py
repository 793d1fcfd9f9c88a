"""The action planner: one function chosen for the goal, with its rationale, or none.

The model answers (Semantic Kernel's ``ActionPlanner`` prompt and examples)::

    {"plan": {"rationale": "the list contains a function that gets the current time (now)",
              "function": "TimePlugin.Time", "parameters": {}}}

An empty ``function`` means that no available function fits: the plan is empty
(``plan.is_empty``) and its ``rationale`` says why.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, create_model

from ...tools import KernelFunction
from ..prompt_function import PromptTemplate
from .base import MAX_RATIONALE, FunctionPlan, Planner, PlanStep, arguments_schema
from .prompts import (
    ACTION_EDGE_CASE_EXAMPLES,
    ACTION_GOOD_EXAMPLES,
    ACTION_PLANNER_PROMPT,
    ACTION_STOP,
    render_action_manual,
)


class ActionChoice(BaseModel):
    """The chosen function (``""`` for none), why, and its parameters."""

    rationale: str = ""
    function: str = ""
    parameters: dict[str, Any] = Field(default_factory=dict)


class ActionPlanModel(BaseModel):
    """The action planner's JSON answer: ``{"plan": {...}}``."""

    plan: ActionChoice


def constrained_action_model(names: list[str]) -> type[ActionPlanModel]:
    """``ActionPlanModel`` whose schema lists the function names plus ``""`` (none)."""
    enum: dict[str, Any] = {"enum": ["", *names]}
    fn_field: Any = (str, Field(default="", json_schema_extra=enum))
    choice = create_model("ActionChoice", __base__=ActionChoice, function=fn_field)
    return create_model("ActionPlan", __base__=ActionPlanModel, plan=(choice, ...))


def action_grammar_schema(functions: list[KernelFunction]) -> dict[str, Any]:
    """The action plan's schema for grammar-constrained models: none, or one function's shape."""
    rationale = {"type": "string", "maxLength": MAX_RATIONALE}
    none = {"type": "object", "properties": {}, "additionalProperties": False}
    choices = [("", none), *((f.full_name, arguments_schema(f)) for f in functions)]
    return {
        "type": "object",
        "properties": {
            "plan": {
                "anyOf": [
                    {
                        "type": "object",
                        "properties": {"rationale": rationale, "function": {"const": name}, "parameters": params},
                        "required": ["rationale", "function", "parameters"],
                        "additionalProperties": False,
                    }
                    for name, params in choices
                ]
            }
        },
        "required": ["plan"],
        "additionalProperties": False,
    }


class ActionPlanner(Planner):
    """Semantic Kernel's action planner: ``await ActionPlanner(kernel).create_plan(goal)``."""

    name = "action"

    def __init__(self, target: Any = None, *, prompt: str = ACTION_PLANNER_PROMPT, **kwargs: Any):
        super().__init__(target, **kwargs)
        self.prompt = prompt

    async def render_prompt(self, goal: str) -> str:
        """The prompt: the examples, the list of functions, the goal."""
        return await PromptTemplate(self.prompt).render(
            {
                "good_examples": ACTION_GOOD_EXAMPLES,
                "edge_case_examples": ACTION_EDGE_CASE_EXAMPLES,
                "list_of_functions": render_action_manual(self.available_functions()),
                "goal": goal,
            }
        )

    async def create_plan(self, goal: str) -> FunctionPlan:
        """Ask which one function serves ``goal``; an unknown name is sent back to the model."""
        functions = self.available_functions()
        registry = self.available_registry()

        def validate(answer: ActionPlanModel) -> None:
            name = answer.plan.function.strip()
            if name and registry.find(name) is None:
                known = ", ".join(f.full_name for f in functions) or "none"
                raise ValueError(f'unknown function {name!r}; choose one of: {known}, or "" for none')

        value, raw = await self._ask_json(
            await self.render_prompt(goal),
            ActionPlanModel,
            constrained_type=constrained_action_model([f.full_name for f in functions]),
            grammar_schema=action_grammar_schema(functions),
            validate=validate,
            stop=[ACTION_STOP],
        )
        choice = value.plan
        steps = []
        if choice.function.strip():
            function = registry.get(choice.function)
            steps.append(PlanStep(function.full_name, dict(choice.parameters)))
        return self._plan(goal, steps=steps, rationale=choice.rationale, raw=raw)


__all__ = ["ActionChoice", "ActionPlanModel", "ActionPlanner", "action_grammar_schema", "constrained_action_model"]
