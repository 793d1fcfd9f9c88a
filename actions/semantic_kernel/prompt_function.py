"""Prompt functions: Semantic Kernel's "function from a prompt".

A :class:`PromptFunction` is a template with declared input variables. Invoking it
renders the template and asks a model; the reply comes back as a
:class:`FunctionResult` (``str(result)`` is the text)::

    poem = PromptFunction(
        "Generate a short funny poem or limerick to explain the given event.\\nEvent:{{$input}}",
        function_name="ShortPoem",
        plugin_name="WriterPlugin",
        description="Turn a scenario into a short and entertaining poem.",
        input_variables=[InputVariable(name="input", description="The scenario to turn into a poem.")],
        settings=LLMSettings(max_tokens=200, temperature=0.9),
        service_id="creative",
    )

The template language is Semantic Kernel's:

* ``{{$name}}`` — the value of the argument ``name``;
* ``{{Plugin.function}}`` — the output of another function, called while rendering;
* ``{{Plugin.function $name 'literal' key="value"}}`` — with arguments: positional
  ones map to the function's parameters in order, ``$name`` resolves from the
  arguments, quoted text is a string literal, ``key=...`` names the parameter;
* ``{{'{{'}}`` — a literal (a way to write braces).

Prompt functions and tools are both :class:`~actions.tools.KernelFunction`: they share
one :class:`~actions.tools.FunctionRegistry` and one invocation path, so the context's
invocation hooks (kind ``"prompt"``) see every call.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, create_model

from rolecast.context import Context
from rolecast.errors import TemplateError, ToolError
from rolecast.llm.base import BaseLLM, LLMSettings, Usage

from ..tools import FunctionRegistry, KernelFunction, ToolParameter, fit_arguments


class InputVariable(BaseModel):
    """A declared input of a prompt function (Semantic Kernel's ``InputVariable``).

    A missing argument takes ``default``; a missing *required* one is an error. An
    optional variable with no default renders as the empty string.
    """

    model_config = ConfigDict(populate_by_name=True)

    name: str
    description: str = ""
    default: Any = None
    is_required: bool = Field(default=False, validation_alias=AliasChoices("is_required", "required"))


@dataclass
class FunctionResult:
    """What invoking a function gives: the ``value`` plus ``metadata``.

    For a prompt function the value is the model's reply, and ``metadata`` holds the
    ``rendered_prompt``, the ``messages`` sent, ``usage`` (a
    :class:`~rolecast.llm.base.Usage`), the ``model`` and the ``arguments``.
    ``str(result)`` is the text of the value, as in Semantic Kernel.
    """

    function: str
    value: Any = None
    metadata: dict[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        return "" if self.value is None else str(self.value)

    @property
    def usage(self) -> Usage | None:
        """The model's token usage, when the function called a model."""
        usage = self.metadata.get("usage")
        return usage if isinstance(usage, Usage) else None

    @property
    def rendered_prompt(self) -> str | None:
        """The prompt after rendering (prompt functions only)."""
        return self.metadata.get("rendered_prompt")


# ------------------------------------------------------------ function lookup
# Functions a template may call while rendering: the function's own registry if it was
# added to a kernel, else the one the running kernel / plan made current.
_CURRENT_FUNCTIONS: ContextVar[FunctionRegistry | None] = ContextVar("rolecast_functions", default=None)


@contextmanager
def use_functions(registry: FunctionRegistry | None) -> Iterator[None]:
    """Make ``registry`` the functions that templates rendered inside may call."""
    token = _CURRENT_FUNCTIONS.set(registry)
    try:
        yield
    finally:
        _CURRENT_FUNCTIONS.reset(token)


# -------------------------------------------------------------------- template
_BLOCK = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)
_TOKEN = re.compile(
    r"""\s*(?:(?P<key>[A-Za-z_]\w*)\s*=\s*)?
        (?:(?P<var>\$[A-Za-z_]\w*)
          |'(?P<sq>(?:[^'\\]|\\.)*)'
          |"(?P<dq>(?:[^"\\]|\\.)*)"
          |(?P<word>[A-Za-z_][\w.\-]*))\s*""",
    re.VERBOSE,
)
_UNESCAPE = re.compile(r"\\(.)")


@dataclass
class _Token:
    kind: str  # "var" | "text" | "word"
    value: str
    key: str | None = None


def _tokens(block: str) -> list[_Token]:
    tokens: list[_Token] = []
    pos = 0
    while pos < len(block):
        if block[pos:].strip() == "":
            break
        match = _TOKEN.match(block, pos)
        if match is None or match.end() == pos:
            raise TemplateError(f"cannot read {{{{{block}}}}} at {block[pos:]!r}")
        if match.group("var"):
            tokens.append(_Token("var", match.group("var")[1:], match.group("key")))
        elif match.group("sq") is not None or match.group("dq") is not None:
            raw = match.group("sq") if match.group("sq") is not None else match.group("dq")
            tokens.append(_Token("text", _UNESCAPE.sub(r"\1", raw), match.group("key")))
        else:
            tokens.append(_Token("word", match.group("word"), match.group("key")))
        pos = match.end()
    return tokens


def template_variables(template: str) -> list[str]:
    """The ``$variables`` a template uses, in order of first appearance."""
    names: list[str] = []
    for block in _BLOCK.findall(template):
        try:
            tokens = _tokens(block)
        except TemplateError:
            continue
        for token in tokens:
            if token.kind == "var" and token.value not in names:
                names.append(token.value)
    return names


class PromptTemplate:
    """A Semantic Kernel template: ``{{$var}}``, ``{{Plugin.fn $arg 'literal'}}``, ``{{'text'}}``."""

    def __init__(self, template: str):
        self.template = template

    @property
    def variables(self) -> list[str]:
        return template_variables(self.template)

    async def render(
        self,
        arguments: Mapping[str, Any],
        *,
        functions: FunctionRegistry | None = None,
        context: Context | None = None,
    ) -> str:
        """Render with ``arguments``; function blocks are invoked through the hooks."""
        parts: list[str] = []
        pos = 0
        for match in _BLOCK.finditer(self.template):
            parts.append(self.template[pos : match.start()])
            parts.append(await self._block(match.group(1), arguments, functions, context))
            pos = match.end()
        parts.append(self.template[pos:])
        return "".join(parts)

    async def _block(
        self,
        block: str,
        arguments: Mapping[str, Any],
        functions: FunctionRegistry | None,
        context: Context | None,
    ) -> str:
        tokens = _tokens(block)
        if not tokens:
            return ""
        head, args = tokens[0], tokens[1:]
        if head.key is not None:
            raise TemplateError(f"{{{{{block}}}}}: a block cannot start with a named argument")
        if head.kind in ("var", "text"):
            if args:
                raise TemplateError(f"{{{{{block}}}}}: only a function call may take arguments")
            return _text(arguments.get(head.value)) if head.kind == "var" else head.value
        return await self._call(head.value, args, arguments, functions, context)

    async def _call(
        self,
        name: str,
        args: list[_Token],
        arguments: Mapping[str, Any],
        functions: FunctionRegistry | None,
        context: Context | None,
    ) -> str:
        registry = functions or _CURRENT_FUNCTIONS.get()
        function = registry.find(name) if registry is not None else None
        if registry is None or function is None:
            known = ", ".join(f.full_name for f in registry.functions()) if registry else "none"
            raise TemplateError(f"the template calls unknown function {name!r}; available: {known}")
        call_args = fit_arguments(function, arguments, bag=True)
        params = [p.name for p in function.parameters]
        positional = 0
        for token in args:
            if token.kind == "word":
                raise TemplateError(
                    f"argument {token.value!r} of {name}: quote a literal ('text') or use $variable"
                )
            value = arguments.get(token.value) if token.kind == "var" else token.value
            if token.key is not None:
                call_args[token.key] = value
                continue
            if positional >= len(params):
                raise TemplateError(
                    f"{function.full_name} takes {len(params)} argument(s) {params}; the template passes more"
                )
            call_args[params[positional]] = value
            positional += 1
        result = await function.invoke(call_args, context=context)
        return _text(result)


def _text(value: Any) -> str:
    return "" if value is None else str(value)


# -------------------------------------------------------------------- function
class PromptFunction(KernelFunction):
    """A function whose body is a prompt template sent to a model.

    ``settings`` are this function's execution settings (``max_tokens``,
    ``temperature`` …) and ``service_id`` names the model it wants from the context
    (``context.llm(service_id)``; a missing name falls back to the default with a
    warning). ``llm`` pins a model outright. ``stop`` are stop sequences; a
    ``system_prompt`` is sent first. Variables the template uses but
    ``input_variables`` does not declare are optional and default to ``""``.
    """

    kind = "prompt"

    def __init__(
        self,
        template: str,
        *,
        function_name: str | None = None,
        plugin_name: str | None = None,
        description: str = "",
        input_variables: Sequence[InputVariable | Mapping[str, Any] | str] | None = None,
        settings: LLMSettings | Mapping[str, Any] | None = None,
        service_id: str | None = None,
        stop: Sequence[str] | None = None,
        system_prompt: str | None = None,
        llm: BaseLLM | None = None,
        functions: FunctionRegistry | None = None,
        name: str | None = None,
    ):
        self.template = PromptTemplate(template)
        self.input_variables = _declare(input_variables, self.template.variables)
        self.settings = (
            settings if isinstance(settings, LLMSettings) or settings is None else LLMSettings(**settings)
        )
        self.service_id = service_id
        self.stop = list(stop) if stop else None
        self.system_prompt = system_prompt
        self.llm = llm
        self.functions = functions
        parameters = [
            ToolParameter(
                v.name,
                v.description,
                Any,
                None if v.is_required else v.default,
                v.is_required,
            )
            for v in self.input_variables
        ]
        # SK names an anonymous prompt function "func" + a random id
        fn_name = function_name or name or f"func{uuid.uuid4().hex[:8]}"
        super().__init__(fn_name, description, parameters, plugin_name=plugin_name)
        # required variables are checked by parse_arguments, with a message naming them
        fields: dict[str, Any] = {v.name: (Any, None) for v in self.input_variables}
        self._args_model = create_model(f"{fn_name}_args", __config__=ConfigDict(extra="ignore"), **fields)

    # ---------------------------------------------------------------- calling
    def accepts_extra(self) -> bool:
        # every argument is visible to the template and to functions it calls
        return True

    def parse_arguments(self, arguments: Any) -> dict[str, Any]:
        """Fill defaults and check required variables (a clear :class:`ToolError` naming them)."""
        values = super().parse_arguments(arguments)
        missing = [v for v in self.input_variables if v.is_required and values.get(v.name) is None]
        if missing:
            names = ", ".join(
                f"{v.name!r}" + (f" ({v.description})" if v.description else "") for v in missing
            )
            raise ToolError(f"{self.full_name}: missing required argument(s) {names}")
        for var in self.input_variables:
            if values.get(var.name) is None:
                values[var.name] = var.default
        return values

    async def invoke(
        self, arguments: Any = None, *, context: Context | None = None, **kwargs: Any
    ) -> FunctionResult:
        """Render the template, ask the model, return a :class:`FunctionResult` (through the hooks)."""
        result = await super().invoke(arguments, context=context, **kwargs)
        # a hook may skip the call or replace the result with plain text
        return result if isinstance(result, FunctionResult) else FunctionResult(self.full_name, result)

    def resolve_llm(self, context: Context) -> BaseLLM:
        """The model this function calls in ``context``."""
        return self.llm if self.llm is not None else context.llm(self.service_id)

    async def render(self, arguments: Mapping[str, Any], context: Context | None = None) -> str:
        """The prompt these arguments give (function blocks are called)."""
        return await self.template.render(arguments, functions=self.functions, context=context)

    async def _call(self, arguments: dict[str, Any], context: Context) -> FunctionResult:
        prompt = await self.render(arguments, context)
        messages: list[dict[str, Any]] = []
        if self.system_prompt:
            messages.append({"role": "system", "content": self.system_prompt})
        messages.append({"role": "user", "content": prompt})
        llm = self.resolve_llm(context)
        completion = await llm.complete(messages, stop=self.stop, settings=self.settings)
        return FunctionResult(
            self.full_name,
            completion.text.strip(),
            {
                "rendered_prompt": prompt,
                "messages": messages,
                "usage": completion.usage,
                "model": completion.model or llm.model,
                "service_id": self.service_id,
                "arguments": arguments,
                "finish_reason": completion.finish_reason,
            },
        )


def _declare(
    declared: Sequence[InputVariable | Mapping[str, Any] | str] | None, used: list[str]
) -> list[InputVariable]:
    variables: list[InputVariable] = []
    for item in declared or []:
        if isinstance(item, InputVariable):
            variables.append(item)
        elif isinstance(item, str):
            variables.append(InputVariable(name=item))
        else:
            variables.append(InputVariable.model_validate(dict(item)))
    names = {v.name for v in variables}
    variables.extend(InputVariable(name=n) for n in used if n not in names)
    return variables


__all__ = [
    "FunctionResult",
    "InputVariable",
    "PromptFunction",
    "PromptTemplate",
    "template_variables",
    "use_functions",
]
