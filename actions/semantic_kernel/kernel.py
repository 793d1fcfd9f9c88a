"""Kernel: Semantic Kernel's facade over functions, models and invocation hooks.

::

    kernel = Kernel(llm=my_model, services={"creative": other_model})
    kernel.add_plugin(MathPlugin(), "MathPlugin")
    poem = kernel.add_function(
        "WriterPlugin",
        prompt="Generate a short funny poem about {{$input}}",
        function_name="ShortPoem",
        description="Turn a scenario into a short and entertaining poem.",
    )

    @kernel.on_invoking
    def log(invocation): print("calling", invocation.name, invocation.arguments)

    result = await kernel.invoke("WriterPlugin.ShortPoem", input="John Doe")
    print(result)                       # the poem
    results = await kernel.invoke_many([poem, "MathPlugin.Add"], input="1", amount="2")

The kernel holds a :class:`~rolecast.context.Context` — the default model, named
services, cost accounting and budgets, and the :class:`~rolecast.control.hooks.Hooks` that wrap
every action, tool and prompt-function call — and a
:class:`~actions.tools.FunctionRegistry` shared by tools and prompt functions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from loguru import logger

from rolecast.context import Context, current_scope
from rolecast.control.hooks import Hooks
from rolecast.errors import InvocationCancelled, UsageError
from rolecast.llm.base import BaseLLM, LLMSettings

from ..tools import FunctionRegistry, KernelFunction, Plugin, Tool, fit_arguments
from .prompt_function import (
    FunctionResult,
    InputVariable,
    PromptFunction,
    use_functions,
)


class Kernel:
    """Functions, models and hooks in one place; ``await kernel.invoke(fn, **arguments)``.

    ``llm`` is the default model (else the configured default is built on first use),
    ``services`` are more models by name (a prompt function's ``service_id``). Pass a
    ``context`` to share budgets and hooks with a team instead.
    """

    def __init__(
        self,
        llm: BaseLLM | None = None,
        services: Mapping[str, BaseLLM] | None = None,
        *,
        context: Context | None = None,
        hooks: Hooks | None = None,
        plugins: Sequence[Any] = (),
    ):
        if context is None:
            context = Context(llm=llm, llms=dict(services or {}), hooks=hooks)
        else:
            if llm is not None:
                context.set_llm(llm)
            for name, service in (services or {}).items():
                context.add_service(name, service)
            if hooks is not None:
                context.hooks = hooks
        self.context = context
        self.functions = FunctionRegistry()
        for plugin in plugins:
            self.add_plugin(plugin)

    # ---------------------------------------------------------------- services
    def add_service(self, service_id: str, llm: BaseLLM) -> None:
        """Register a model under ``service_id`` (SK's ``kernel.add_service``)."""
        self.context.add_service(service_id, llm)

    def get_service(self, service_id: str | None = None) -> BaseLLM:
        """The model named ``service_id``, else the default (with a warning for a missing name)."""
        return self.context.llm(service_id)

    @property
    def llm(self) -> BaseLLM:
        """The default model."""
        return self.context.llm()

    @property
    def hooks(self) -> Hooks:
        """The invocation hooks of this kernel's context."""
        return self.context.hooks

    def on_invoking(self, fn: Callable[..., Any] | None = None, *, kinds: set[str] | None = None) -> Any:
        """Register a before hook (decorator); see :meth:`rolecast.control.hooks.Hooks.on_invoking`."""
        return self.hooks.on_invoking(fn, kinds=kinds)

    def on_invoked(self, fn: Callable[..., Any] | None = None, *, kinds: set[str] | None = None) -> Any:
        """Register an after hook (decorator); see :meth:`rolecast.control.hooks.Hooks.on_invoked`."""
        return self.hooks.on_invoked(fn, kinds=kinds)

    # --------------------------------------------------------------- functions
    @property
    def plugins(self) -> dict[str, Plugin]:
        """The plugins by name: ``kernel.plugins["WriterPlugin"]["Translate"]``."""
        return self.functions.plugins

    def add_plugin(self, plugin: Any, name: str | None = None, description: str = "") -> Plugin:
        """Add a :class:`Plugin`, or an object / class whose ``@tool`` methods form one."""
        if not isinstance(plugin, Plugin):
            plugin = Plugin.from_object(plugin, name, description)
        elif name and name != plugin.name:
            plugin = Plugin(name, list(plugin), plugin.description)
        for function in plugin:
            self._adopt(function)
        self.functions.add(plugin)
        return plugin

    def add_function(
        self,
        plugin_name: str,
        function: KernelFunction | Callable[..., Any] | None = None,
        *,
        prompt: str | None = None,
        function_name: str | None = None,
        description: str = "",
        input_variables: Sequence[InputVariable | Mapping[str, Any] | str] | None = None,
        settings: LLMSettings | Mapping[str, Any] | None = None,
        service_id: str | None = None,
        stop: Sequence[str] | None = None,
        system_prompt: str | None = None,
    ) -> KernelFunction:
        """Add a function to ``plugin_name``: a prompt (``prompt=``), a tool, or a plain callable."""
        if function is None:
            if prompt is None:
                raise UsageError("add_function needs a prompt= or a function")
            function = PromptFunction(
                prompt,
                function_name=function_name,
                plugin_name=plugin_name,
                description=description,
                input_variables=input_variables,
                settings=settings,
                service_id=service_id,
                stop=stop,
                system_prompt=system_prompt,
            )
        elif not isinstance(function, KernelFunction):
            function = Tool.from_function(
                function, name=function_name, description=description or None, plugin_name=plugin_name
            )
        function.plugin_name = plugin_name
        self._adopt(function)
        self.functions.add(function)
        return function

    create_function_from_prompt = add_function

    def _adopt(self, function: KernelFunction) -> None:
        # a prompt function added here calls this kernel's functions while rendering
        if isinstance(function, PromptFunction) and function.functions is None:
            function.functions = self.functions

    def get_function(self, name: str, function_name: str | None = None) -> KernelFunction:
        """``get_function("Plugin.Fn")`` or ``get_function("Plugin", "Fn")``; unknown → ToolError."""
        return self.functions.get(f"{name}.{function_name}" if function_name else name)

    # --------------------------------------------------------------- invoking
    @contextmanager
    def _scope(self) -> Iterator[None]:
        # charge model calls to this kernel's context, unless already inside it (keeps the role)
        with use_functions(self.functions):
            if current_scope().context is self.context:
                yield
            else:
                with self.context.scope():
                    yield

    async def invoke(
        self,
        function: KernelFunction | str | Any,
        arguments: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> FunctionResult:
        """Invoke one function (an object or ``"Plugin.Fn"``) with ``arguments`` and ``kwargs``.

        The arguments are a bag, as SK's ``KernelArguments``: a tool takes only its
        declared parameters from it. The result is always a :class:`FunctionResult`.
        A plan from a planner may be passed too (it runs with ``input=``).
        """
        bag = {**(arguments or {}), **kwargs}
        if not isinstance(function, (KernelFunction, str)) and hasattr(function, "invoke"):
            return await function.invoke(self, arguments=bag)  # a FunctionPlan
        fn = self.functions.get(function) if isinstance(function, str) else function
        with self._scope():
            value = await fn.invoke(fit_arguments(fn, bag, bag=True), context=self.context)
        if isinstance(value, FunctionResult):
            return value
        return FunctionResult(fn.full_name, value, {"arguments": bag})

    async def invoke_many(
        self,
        functions: Sequence[KernelFunction | str],
        arguments: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> list[FunctionResult]:
        """Invoke several functions in turn with the same arguments, collecting the results.

        As in SK, a hook that cancels one call ends the run: the results gathered so far
        are returned (and the cancellation is logged).
        """
        results: list[FunctionResult] = []
        for function in functions:
            try:
                results.append(await self.invoke(function, arguments, **kwargs))
            except InvocationCancelled as exc:
                logger.info("kernel.invoke_many stopped: {}", exc)
                break
        return results

    def __repr__(self) -> str:
        return f"Kernel(functions={[f.full_name for f in self.functions]})"


__all__ = ["Kernel"]
