"""What the Semantic Kernel planners share: the plan they return and how it runs.

A planner gives a goal and a manual of the available functions to a model and turns
the answer into a :class:`FunctionPlan`: an ordered list of :class:`PlanStep`, each
naming a function (``Plugin.Function``) and its parameters. The plan can be inspected
(``print(plan)``, ``plan.steps``) and then run::

    plan = await SequentialPlanner(kernel).create_plan("Write a poem about John Doe, then translate it")
    result = await plan.invoke(kernel)

Running follows Semantic Kernel's plan semantics: the variable ``INPUT`` starts as the
plan's input (else the goal) and becomes each step's output in turn; ``$NAME`` in a
parameter is replaced by the variable ``NAME``; a function parameter the step does not
set takes ``INPUT`` if it is the ``input`` parameter, else the variable of that name;
``setContextVariable`` / ``appendToResult`` keep a step's output under a name.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar
from xml.sax.saxutils import quoteattr

from loguru import logger
from pydantic import BaseModel

from rolecast.context import Context, current_context, current_scope
from rolecast.core.jsonutil import extract_json
from rolecast.errors import OutputParseError, PlanError, ToolError
from rolecast.llm.base import BaseLLM, LLMSettings

from ...structured import with_json_schema
from ...tools import FunctionRegistry, KernelFunction, Plugin, fit_arguments, lookup
from ..prompt_function import FunctionResult, use_functions
from .prompts import JSON_FIX

if TYPE_CHECKING:
    from ..kernel import Kernel

M = TypeVar("M", bound=BaseModel)

_VAR = re.compile(r"\$([A-Za-z_]\w*)")


@dataclass
class PlanStep:
    """One step: a function, its parameters (``$VAR`` allowed) and where its output goes."""

    function: str
    parameters: dict[str, Any] = field(default_factory=dict)
    outputs: list[str] = field(default_factory=list)
    results: list[str] = field(default_factory=list)
    missing: bool = False

    def to_xml(self) -> str:
        """The step as a sequential-planner element."""
        attrs = [f"{k}={quoteattr(str(v))}" for k, v in self.parameters.items()]
        attrs += [f"setContextVariable={quoteattr(k)}" for k in self.outputs]
        attrs += [f"appendToResult={quoteattr('RESULT__' + k)}" for k in self.results]
        return f"<function.{self.function} {' '.join(attrs)}/>".replace(" />", "/>")

    def __str__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.parameters.items())
        out = "".join(f" -> ${k}" for k in self.outputs) + "".join(f" => RESULT__{k}" for k in self.results)
        flag = "  (missing function)" if self.missing else ""
        return f"{self.function}({args}){out}{flag}"


@dataclass
class FunctionPlan:
    """The plan a planner made: inspect ``steps`` (empty = "no plan"), then :meth:`invoke`."""

    goal: str
    steps: list[PlanStep] = field(default_factory=list)
    input: str | None = None
    rationale: str = ""
    planner: str = ""
    raw: str = ""
    functions: FunctionRegistry | None = field(default=None, repr=False, compare=False)
    context: Context | None = field(default=None, repr=False, compare=False)

    @property
    def is_empty(self) -> bool:
        """True when the model said no plan is possible (``<plan />``, an empty function)."""
        return not self.steps

    def __len__(self) -> int:
        return len(self.steps)

    def __iter__(self) -> Iterator[PlanStep]:
        return iter(self.steps)

    def to_xml(self) -> str:
        """The plan in the sequential planner's XML form."""
        if not self.steps:
            return "<plan />"
        return "<plan>\n" + "".join(f"    {s.to_xml()}\n" for s in self.steps) + "</plan>"

    def __str__(self) -> str:
        head = f"Plan for: {self.goal}"
        if self.rationale:
            head += f"\nRationale: {self.rationale}"
        if not self.steps:
            return head + "\n(no plan: no available function fits the goal)"
        return head + "\n" + "\n".join(f"{i}. {s}" for i, s in enumerate(self.steps, 1))

    async def invoke(
        self,
        target: Kernel | FunctionRegistry | None = None,
        input: str | None = None,
        *,
        arguments: Mapping[str, Any] | None = None,
        context: Context | None = None,
    ) -> FunctionResult:
        """Run the steps in order with a kernel's (or a registry's) functions.

        The result's value is the text appended to the plan's results (``RESULT__*``), or
        the last step's output; ``metadata`` has ``variables``, ``results`` and ``steps``
        (each step's function, arguments and output). An unknown function raises
        :class:`~rolecast.errors.ToolError`, unless the planner kept it as a missing
        step (``allow_missing_functions``), which is skipped with a warning.
        """
        registry, ctx = _resolve_target(target, context or self.context, self.functions)
        if not self.steps:
            raise PlanError(f"there is no plan to run for {self.goal!r}", raw=self.raw)
        bag = dict(arguments or {})
        start = input if input is not None else bag.pop("input", None)
        first = start if start is not None else self.input or self.goal
        variables: dict[str, Any] = {**bag, "INPUT": str(first)}
        results: dict[str, str] = {}
        trace: list[dict[str, Any]] = []
        with _in_context(ctx), use_functions(registry):
            for number, step in enumerate(self.steps, 1):
                function = registry.find(step.function)
                if function is None:
                    if step.missing:
                        logger.warning("plan step {} skipped: no function {!r}", number, step.function)
                        continue
                    known = ", ".join(f.full_name for f in registry.functions()) or "none"
                    raise ToolError(f"plan step {number}: unknown function {step.function!r}; available: {known}")
                args = _step_arguments(function, step, variables)
                logger.debug("plan step {}: {} {}", number, function.full_name, args)
                output = await function.invoke(args, context=ctx)
                text = "" if output is None else str(output)
                variables["INPUT"] = text
                for key in step.outputs:
                    variables[key] = text
                for key in step.results:
                    results[key] = f"{results[key]}\n{text}" if key in results else text
                    variables[f"RESULT__{key}"] = results[key]
                trace.append({"function": function.full_name, "arguments": args, "output": text})
        value = "\n\n".join(results.values()) if results else variables["INPUT"]
        return FunctionResult(
            f"plan:{self.planner or 'plan'}",
            value,
            {"variables": variables, "results": results, "steps": trace, "goal": self.goal},
        )


def expand_variables(value: Any, variables: Mapping[str, Any]) -> Any:
    """Replace each ``$NAME`` in a text by the variable ``NAME`` (unknown names stay)."""
    if not isinstance(value, str):
        return value

    def sub(match: re.Match[str]) -> str:
        found = lookup(variables, match.group(1))
        return match.group(0) if found is None else str(found)

    return _VAR.sub(sub, value)


def _step_arguments(function: KernelFunction, step: PlanStep, variables: Mapping[str, Any]) -> dict[str, Any]:
    """A step's attributes (``$VARIABLES`` expanded), the function's other parameters filled from
    the plan's variables (``input`` from ``$INPUT``), fitted to what the function takes."""
    args = {k: expand_variables(v, variables) for k, v in step.parameters.items()}
    for param in function.parameters:
        if param.name not in args:
            found = variables["INPUT"] if param.name.casefold() == "input" else lookup(variables, param.name)
            if found is not None:
                args[param.name] = found
    taken = fit_arguments(function, args, bag=True)
    if len(taken) < len(args):
        # models invent parameters now and then; SK's argument bag ignores them too
        logger.debug("{} ignores arguments {}", function.full_name, sorted(set(args) - set(taken)))
    return taken


def _resolve_target(
    target: Any, context: Context | None, fallback: FunctionRegistry | None
) -> tuple[FunctionRegistry, Context]:
    if isinstance(target, FunctionRegistry):
        return target, context or current_context()
    if target is not None and hasattr(target, "functions") and hasattr(target, "context"):
        return target.functions, context or target.context  # a Kernel
    if target is not None:
        return FunctionRegistry.of(target), context or current_context()
    if fallback is None:
        raise PlanError("plan.invoke() needs a kernel or a function registry")
    return fallback, context or current_context()


@contextmanager
def _in_context(context: Context) -> Iterator[None]:
    # charge model calls to ``context`` unless the running scope already does (keeps the role)
    if current_scope().context is context:
        yield
    else:
        with context.scope():
            yield


MAX_VALUE = 200  # characters of one argument value a grammar-constrained model may write
MAX_RATIONALE = 300


def arguments_schema(function: KernelFunction, *, skip: Sequence[str] = ()) -> dict[str, Any]:
    """An object of optional, bounded string arguments: the function's own parameters only."""
    return {
        "type": "object",
        "properties": {
            p.name: {"type": "string", "maxLength": MAX_VALUE} for p in function.parameters if p.name not in skip
        },
        "additionalProperties": False,
    }


class Planner:
    """Base of the planners: where the functions and the model come from, and the ask loop.

    ``target`` is a :class:`~actions.kernel.Kernel` (SK's ``SequentialPlanner(kernel)``),
    a :class:`~actions.tools.FunctionRegistry`, or plugins / tools. The model is
    ``llm`` if given, else the kernel's (or the running context's) ``service_id``
    model. ``excluded_plugins`` / ``excluded_functions`` hide functions from the model.
    """

    name = "planner"
    # greedy and short: a plan of a few steps is a few hundred tokens, and small models ramble
    default_settings = LLMSettings(temperature=0.0, max_tokens=512)

    def __init__(
        self,
        target: Any = None,
        *,
        llm: BaseLLM | None = None,
        service_id: str | None = None,
        settings: LLMSettings | Mapping[str, Any] | None = None,
        max_tries: int = 3,
        excluded_plugins: Iterable[str] = (),
        excluded_functions: Iterable[str] = (),
        context: Context | None = None,
    ):
        if isinstance(target, FunctionRegistry):
            self.functions = target
            self.context = context
        elif target is not None and hasattr(target, "functions") and hasattr(target, "context"):
            self.functions = target.functions
            self.context = context or target.context
        else:
            self.functions = FunctionRegistry.of(*([target] if target is not None else []))
            self.context = context
        self._llm = llm
        self.service_id = service_id
        self.settings = self.default_settings.merged(
            settings if settings is None or isinstance(settings, LLMSettings) else dict(settings)
        )
        self.max_tries = max(1, max_tries)
        self.excluded_plugins = set(excluded_plugins)
        self.excluded_functions = set(excluded_functions)

    @property
    def llm(self) -> BaseLLM:
        """The model that writes the plans."""
        if self._llm is not None:
            return self._llm
        return (self.context or current_context()).llm(self.service_id)

    def available_functions(self) -> list[KernelFunction]:
        """The functions shown to the model (the registry minus the excluded ones)."""
        return [
            f
            for f in self.functions.functions()
            if f.plugin_name not in self.excluded_plugins
            and f.full_name not in self.excluded_functions
            and f.name not in self.excluded_functions
        ]

    def available_registry(self) -> FunctionRegistry:
        """The available functions as a registry (what a plan may name)."""
        registry = FunctionRegistry()
        for f in self.available_functions():
            if f.plugin_name:
                registry.plugins.setdefault(f.plugin_name, Plugin(f.plugin_name)).functions[f.name] = f
            else:
                registry.loose[f.name] = f
        return registry

    def _plan(self, goal: str, **fields: Any) -> FunctionPlan:
        return FunctionPlan(goal, planner=self.name, functions=self.functions, context=self.context, **fields)

    @contextmanager
    def _scope(self) -> Iterator[None]:
        if self.context is None:
            yield
        else:
            with _in_context(self.context):
                yield

    async def _ask_json(
        self,
        prompt: str,
        output_type: type[M],
        *,
        constrained_type: type[M] | None = None,
        grammar_schema: dict[str, Any] | None = None,
        validate: Callable[[M], None],
        stop: Sequence[str] | None = None,
    ) -> tuple[M, str]:
        """Ask for a JSON plan: structured (schema-constrained) when the model can, else re-ask.

        ``constrained_type`` is asked of providers that take a JSON schema;
        ``grammar_schema`` (tighter: bounded strings, one shape per function) replaces its
        schema on models that decode under a grammar. Returns the validated value and the
        raw text. Parse and validation errors go back to the model (the seam's one re-ask
        loop); after ``max_tries`` answers, :class:`PlanError` carries the last one.
        """
        llm = self.llm
        with self._scope():
            try:
                if llm.supports_json_schema:
                    asked = constrained_type or output_type
                    if grammar_schema is not None and llm.grammar_constrained:
                        asked = with_json_schema(output_type, grammar_schema)
                    value = await llm.structured(
                        prompt, asked, retries=self.max_tries - 1, validate=validate, settings=self.settings
                    )
                    return value, value.model_dump_json()

                def parse(raw: str) -> tuple[M, str]:
                    value = output_type.model_validate(extract_json(raw, expect=dict))
                    validate(value)
                    return value, raw

                return await llm.ask_valid(
                    prompt, parse, tries=self.max_tries, fix=JSON_FIX, stop=stop, settings=self.settings
                )
            except OutputParseError as exc:
                raise PlanError(f"{self.name}: no valid plan: {exc}", raw=exc.raw, errors=exc.errors) from exc


__all__ = ["MAX_RATIONALE", "MAX_VALUE", "FunctionPlan", "PlanStep", "Planner", "arguments_schema", "expand_variables"]
