"""Tools: typed Python functions the model can call, grouped into plugins.

* :func:`tool` turns a function (sync, async or a generator) into a :class:`Tool`.
  Parameters are described with ``Annotated[type, "description"]`` and the docstring's
  first paragraph describes the tool. Arguments are validated and converted to the
  declared types (``"2130.23"`` → ``2130.23``) before the call; a wrong argument is a
  :class:`~rolecast.errors.ToolError` with a message the model can act on.
* :class:`Plugin` is a named group of functions (Semantic Kernel's plugin):
  ``plugin["Add"]``; its functions are called ``Plugin.Function``.

A function has one canonical name, ``Plugin.Function`` (:attr:`KernelFunction.full_name`),
and one wire form for places that forbid dots, ``Plugin-Function``
(:attr:`KernelFunction.wire_name`: OpenAI tool names, the stepwise prompt).
:class:`~actions.tools.registry.FunctionRegistry` finds a function by either. Tools and
prompt functions share one invocation path (:meth:`KernelFunction.invoke`), which runs
the context's invocation hooks.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Annotated, Any, get_args, get_origin, get_type_hints

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError, create_model

from rolecast.context import Context, current_context
from rolecast.errors import OutputParseError, ToolError

from .arguments import arguments_from_text


@dataclass
class ToolParameter:
    """One input of a function: name, description, type, default, required."""

    name: str
    description: str = ""
    annotation: Any = str
    default: Any = None
    required: bool = True

    def schema(self) -> dict[str, Any]:
        try:
            s = TypeAdapter(self.annotation).json_schema()
        except Exception:  # an exotic annotation: describe it as free text
            s = {"type": "string"}
        if self.description:
            s["description"] = self.description
        if not self.required and self.default is not None:
            try:
                json.dumps(self.default)
                s["default"] = self.default
            except TypeError:
                pass
        return s


class KernelFunction:
    """What tools and prompt functions have in common: a name, a manual, one way to call.

    Subclasses implement :meth:`_call` with already-validated arguments.
    """

    kind = "tool"

    def __init__(
        self,
        name: str,
        description: str = "",
        parameters: list[ToolParameter] | None = None,
        *,
        plugin_name: str | None = None,
        return_direct: bool = False,
        human_name: str | None = None,
    ):
        self.name = name
        self.description = description
        self.parameters = list(parameters or [])
        self.plugin_name = plugin_name
        self.return_direct = return_direct
        self.human_name = human_name or name.replace("_", " ").title()
        fields: dict[str, Any] = {
            p.name: (p.annotation, ... if p.required else p.default) for p in self.parameters
        }
        self._args_model: type[BaseModel] = create_model(
            f"{name}_args", __config__=ConfigDict(extra="ignore"), **fields
        )

    # ---------------------------------------------------------------- identity
    @property
    def full_name(self) -> str:
        """``Plugin.Function`` (or the bare name for a tool outside any plugin)."""
        return f"{self.plugin_name}.{self.name}" if self.plugin_name else self.name

    @property
    def wire_name(self) -> str:
        """``Plugin-Function``: the name where dots are not allowed (OpenAI tools, stepwise)."""
        return f"{self.plugin_name}-{self.name}" if self.plugin_name else self.name

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.full_name!r})"

    @property
    def json_schema(self) -> dict[str, Any]:
        """The parameters as a JSON schema object."""
        return {
            "type": "object",
            "properties": {p.name: p.schema() for p in self.parameters},
            "required": [p.name for p in self.parameters if p.required],
        }

    def openai_schema(self) -> dict[str, Any]:
        """The OpenAI ``tools=[...]`` entry (named by :attr:`wire_name`: no dots allowed there)."""
        return {
            "type": "function",
            "function": {"name": self.wire_name, "description": self.description, "parameters": self.json_schema},
        }

    # ---------------------------------------------------------------- calling
    def parse_arguments(self, arguments: Any) -> dict[str, Any]:
        """Validate and convert raw arguments (a dict, JSON text, or one bare value).

        Raises :class:`ToolError` naming what is wrong, in words a model can act on.
        """
        if arguments is None or arguments == "":
            arguments = {}
        if isinstance(arguments, str):
            try:
                arguments = arguments_from_text(self, arguments)
            except OutputParseError as exc:
                raise ToolError(str(exc)) from exc
        if not isinstance(arguments, dict):
            if len(self.parameters) == 1:
                arguments = {self.parameters[0].name: arguments}
            else:
                raise ToolError(f"{self.full_name} expects a JSON object of arguments, got {arguments!r}")
        unknown = set(arguments) - {p.name for p in self.parameters}
        if unknown and not self.accepts_extra():
            raise ToolError(
                f"{self.full_name} got unknown argument(s) {sorted(unknown)}; "
                f"it takes {[p.name for p in self.parameters]}"
            )
        try:
            model = self._args_model.model_validate(arguments)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(x) for x in e['loc']) or 'arguments'}: {e['msg']}" for e in exc.errors()
            )
            raise ToolError(f"invalid arguments for {self.full_name}: {problems}") from exc
        values = {p.name: getattr(model, p.name) for p in self.parameters}
        if self.accepts_extra():
            values.update({k: v for k, v in arguments.items() if k in unknown})
        return values

    def accepts_extra(self) -> bool:
        """Whether undeclared arguments are passed through (a prompt function's template may use them)."""
        return False

    async def invoke(self, arguments: Any = None, *, context: Context | None = None, **kwargs: Any) -> Any:
        """Validate ``arguments`` (plus ``kwargs``) and call, through the context's hooks."""
        if kwargs:
            arguments = {**(arguments if isinstance(arguments, dict) else {}), **kwargs}
        values = self.parse_arguments(arguments)
        ctx = context or current_context()

        async def call(args: dict[str, Any]) -> Any:
            return await self._call(args, ctx)

        return await ctx.hooks.invoke(self.kind, self.full_name, values, call, function=self)

    async def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if args:
            names = [p.name for p in self.parameters]
            kwargs.update(dict(zip(names, args, strict=False)))
        return await self.invoke(kwargs)

    async def _call(self, arguments: dict[str, Any], context: Context) -> Any:  # pragma: no cover
        raise NotImplementedError


def _split_annotated(annotation: Any) -> tuple[Any, str]:
    if get_origin(annotation) is Annotated:
        base, *meta = get_args(annotation)
        description = next((m for m in meta if isinstance(m, str)), "")
        return base, description
    return annotation, ""


def _doc_summary(fn: Callable[..., Any]) -> str:
    doc = inspect.getdoc(fn) or ""
    return doc.split("\n\n", 1)[0].replace("\n", " ").strip()


async def _collect(result: Any) -> Any:
    """Await awaitables and drain generators (Semantic Kernel allows all three)."""
    items: list[Any]
    if inspect.isawaitable(result):
        result = await result
    if inspect.isasyncgen(result):
        items = [item async for item in result]
        return "".join(items) if all(isinstance(i, str) for i in items) else items
    if inspect.isgenerator(result):
        items = list(result)
        return "".join(items) if all(isinstance(i, str) for i in items) else items
    return result


class Tool(KernelFunction):
    """A Python callable as a tool. Build one with :func:`tool` or ``Tool.from_function``."""

    def __init__(self, fn: Callable[..., Any], **kwargs: Any):
        self.fn = fn
        super().__init__(**kwargs)

    @classmethod
    def from_function(
        cls,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        plugin_name: str | None = None,
        return_direct: bool = False,
        human_name: str | None = None,
    ) -> Tool:
        signature = inspect.signature(fn)
        try:
            hints = get_type_hints(fn, include_extras=True)
        except (NameError, TypeError):
            hints = {}
        params: list[ToolParameter] = []
        for pname, p in signature.parameters.items():
            if pname in ("self", "cls") or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                continue
            annotation = hints.get(pname, p.annotation)
            if annotation is inspect.Parameter.empty:
                annotation = Any
            base, pdesc = _split_annotated(annotation)
            required = p.default is inspect.Parameter.empty
            params.append(
                ToolParameter(pname, pdesc, base, None if required else p.default, required)
            )
        return cls(
            fn,
            name=name or getattr(fn, "__name__", "tool"),
            description=description if description is not None else _doc_summary(fn),
            parameters=params,
            plugin_name=plugin_name,
            return_direct=return_direct,
            human_name=human_name,
        )

    async def _call(self, arguments: dict[str, Any], context: Context) -> Any:
        return await _collect(self.fn(**arguments))

    def __get__(self, instance: Any, owner: type | None = None) -> Tool:
        # ``@tool`` on a method: reading it from an instance gives a bound tool
        return self if instance is None else self.bind_to(instance)

    def bind_to(self, instance: Any, plugin_name: str | None = None) -> Tool:
        """A copy whose function is bound to ``instance`` (methods of a plugin class)."""
        bound = Tool(
            self.fn.__get__(instance, type(instance)),
            name=self.name,
            description=self.description,
            parameters=self.parameters,
            plugin_name=plugin_name or self.plugin_name,
            return_direct=self.return_direct,
            human_name=self.human_name,
        )
        return bound


def tool(
    fn: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    plugin_name: str | None = None,
    return_direct: bool = False,
    human_name: str | None = None,
) -> Any:
    """Decorator: make a :class:`Tool` of a typed function (``@tool`` or ``@tool(name=...)``).

    On a method of a plugin class, the method stays a method; :meth:`Plugin.from_object`
    collects it, bound to the instance.
    """

    def wrap(f: Callable[..., Any]) -> Tool:
        return Tool.from_function(
            f,
            name=name,
            description=description,
            plugin_name=plugin_name,
            return_direct=return_direct,
            human_name=human_name,
        )

    return wrap(fn) if fn is not None else wrap


kernel_function = tool
"""Semantic Kernel's name for :func:`tool` (``@kernel_function(description=...)``)."""


class Plugin:
    """A named group of functions: ``plugin["Add"]``, ``"Add" in plugin``, iteration."""

    def __init__(self, name: str, functions: Iterable[KernelFunction] = (), description: str = ""):
        self.name = name
        self.description = description
        self.functions: dict[str, KernelFunction] = {}
        for f in functions:
            self.add(f)

    def add(self, function: KernelFunction) -> KernelFunction:
        function.plugin_name = self.name
        self.functions[function.name] = function
        return function

    @classmethod
    def from_object(cls, obj: Any, name: str | None = None, description: str = "") -> Plugin:
        """Collect the ``@tool`` methods (or tools) of an object or class into a plugin."""
        plugin_name = name or (obj.__name__ if isinstance(obj, type) else type(obj).__name__)
        instance = obj() if isinstance(obj, type) else obj
        plugin = cls(plugin_name, description=description or _doc_summary(type(instance)))
        for attr in dir(type(instance)):
            member = getattr(type(instance), attr, None)
            if isinstance(member, Tool):
                plugin.add(member.bind_to(instance, plugin_name))
        return plugin

    def __getitem__(self, name: str) -> KernelFunction:
        try:
            return self.functions[name]
        except KeyError:
            raise ToolError(f"plugin {self.name!r} has no function {name!r}") from None

    def __contains__(self, name: object) -> bool:
        return name in self.functions

    def __iter__(self) -> Iterator[KernelFunction]:
        return iter(self.functions.values())

    def __len__(self) -> int:
        return len(self.functions)

    def __repr__(self) -> str:
        return f"Plugin({self.name!r}, {list(self.functions)})"




__all__ = ["KernelFunction", "Plugin", "Tool", "ToolParameter", "kernel_function", "tool"]
