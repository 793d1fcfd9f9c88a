"""Action: one unit of work a role can do, usually one LLM call. Users subclass it."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from typing import Any

from pydantic import BaseModel, ConfigDict, PrivateAttr, SerializerFunctionWrapHandler, model_serializer

from memory import Memory, Message
from rolecast.classes import class_path, loaded_subclass
from rolecast.context import Context, current_context
from rolecast.llm.base import BaseLLM, LLMSettings
from rolecast.runlog import acting

#: the key under which a dump records the class it came from
CLASS_KEY = "class_path"

# ids of action instances whose ``run`` is already inside a hook invocation, so that a
# subclass calling ``super().run()`` is not hooked twice
_IN_RUN: ContextVar[frozenset[int]] = ContextVar("rolecast_in_run", default=frozenset())


def _hooked(run: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap an ``Action.run`` so that every call goes through the context's hooks."""
    signature = inspect.signature(run)

    @functools.wraps(run)
    async def wrapper(self: Action, *args: Any, **kwargs: Any) -> Any:
        active = _IN_RUN.get()
        if id(self) in active:
            return await run(self, *args, **kwargs)
        with acting(self.name):  # model calls made inside are logged with this action's name
            return await _invoke(self, active, args, kwargs)

    async def _invoke(self: Action, active: frozenset[int], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        hooks = self.context.hooks
        if not (hooks._invoking or hooks._invoked):
            return await run(self, *args, **kwargs)
        bound = signature.bind(self, *args, **kwargs)
        arguments = {k: v for k, v in bound.arguments.items() if k != "self"}

        async def call(args: dict[str, Any]) -> Any:
            token = _IN_RUN.set(active | {id(self)})
            try:
                bound.arguments.update(args)
                return await run(*bound.args, **bound.kwargs)
            finally:
                _IN_RUN.reset(token)

        return await hooks.invoke("action", self.name, arguments, call, action=self)

    wrapper.__rolecast_hooked__ = True  # type: ignore[attr-defined]
    return wrapper


class Action(BaseModel):
    """A unit of work. Subclass it and override :meth:`run`::

        class SimpleWriteCode(Action):
            PROMPT_TEMPLATE: str = "Write a python function that can {instruction}."
            name: str = "SimpleWriteCode"

            async def run(self, instruction: str) -> str:
                return await self._aask(self.PROMPT_TEMPLATE.format(instruction=instruction))

    The model it uses (``self.llm``) is resolved at call time: the action's own
    ``llm``, else its named ``service`` in the team's context, else the role's model,
    else the team's default, else the configured default. Every call of ``run`` goes
    through the context's invocation hooks.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="allow")

    name: str = ""
    desc: str = ""
    prefix: str = ""
    service: str | None = None
    settings: LLMSettings | None = None

    _llm: BaseLLM | None = PrivateAttr(default=None)
    _role_llm: BaseLLM | None = PrivateAttr(default=None)
    _context: Context | None = PrivateAttr(default=None)
    _owner: Any = PrivateAttr(default=None)

    def __init__(self, llm: BaseLLM | None = None, **data: Any):
        data.pop(CLASS_KEY, None)
        super().__init__(**data)
        self._llm = llm
        if not self.name:
            self.name = type(self).__name__

    @model_serializer(mode="wrap")
    def _with_class(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # the class path travels with the fields, so a saved action comes back as its own class
        return {CLASS_KEY: class_path(self), **handler(self)}

    @classmethod
    def restore(cls, data: dict[str, Any] | Action) -> Action:
        """An action from its dump, as the (already loaded) class the dump names."""
        if isinstance(data, Action):
            return data
        target = loaded_subclass(cls, data[CLASS_KEY]) if CLASS_KEY in data else cls
        return target(**{k: v for k, v in data.items() if k != CLASS_KEY})

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        run = cls.__dict__.get("run")
        if run is not None and inspect.iscoroutinefunction(run) and not hasattr(run, "__rolecast_hooked__"):
            cls.run = _hooked(run)  # type: ignore[method-assign]

    # ----------------------------------------------------------------- wiring
    @property
    def llm(self) -> BaseLLM:
        """The model this action calls (resolved: action → service → role → team → default)."""
        if self._llm is not None:
            return self._llm
        context = self.context
        if self.service:
            if self.service in context.services or self.service in context.config.services:
                return context.llm(self.service)
            context.llm(self.service)  # logs the missing-service warning once
        if self._role_llm is not None:
            return self._role_llm
        return context.llm()

    @llm.setter
    def llm(self, value: BaseLLM | None) -> None:
        self._llm = value

    @property
    def context(self) -> Context:
        """The context this action runs in: its role's team, else the running scope's."""
        return self._context if self._context is not None else current_context()

    def set_context(self, context: Context | None) -> None:
        self._context = context

    def set_role_llm(self, llm: BaseLLM | None) -> None:
        self._role_llm = llm

    def set_owner(self, owner: Any) -> None:
        """The role that owns this action (set by ``Role.set_actions``)."""
        self._owner = owner

    @property
    def owner(self) -> Any:
        """The owning role, or None for a free-standing action."""
        return self._owner

    @property
    def owner_memory(self) -> Memory | None:
        """The owning role's memory, where multi-step actions record their steps."""
        rc = getattr(self._owner, "rc", None)
        return getattr(rc, "memory", None)

    def set_prefix(self, prefix: str) -> Action:
        """Set the system prompt (a role sets its identity here)."""
        self.prefix = prefix
        return self

    # ------------------------------------------------------------------ work
    async def _aask(
        self,
        prompt: str | Sequence[dict[str, Any]],
        system_msgs: Sequence[str] | None = None,
        *,
        stop: Sequence[str] | None = None,
        grammar: str | None = None,
    ) -> str:
        """Ask this action's model, with ``prefix`` as the first system message.

        ``grammar`` (GBNF) constrains the answer on models that decode under one.
        """
        systems = [self.prefix, *(system_msgs or [])] if self.prefix else list(system_msgs or [])
        return await self.llm.ask(prompt, systems, stop=stop, settings=self.settings, grammar=grammar)

    async def run(self, *args: Any, **kwargs: Any) -> Any:
        """Default behaviour: ask the model about the given text or messages.

        ``desc`` (if set) comes first as the instruction. Subclasses override this.
        """
        parts: list[str] = [self.desc] if self.desc else []
        for arg in (*args, *kwargs.values()):
            if isinstance(arg, Message):
                parts.append(str(arg))
            elif isinstance(arg, (list, tuple)):
                parts.extend(str(m) for m in arg)
            elif arg is not None:
                parts.append(str(arg))
        return await self._aask("\n\n".join(p for p in parts if p))

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


# the base class's own run goes through the hooks too
Action.run = _hooked(Action.run)  # type: ignore[method-assign]


class UserRequirement(Action):
    """Stands for the user's request: ``Message(cause_by=UserRequirement)``."""

    name: str = "UserRequirement"

    async def run(self, *args: Any, **kwargs: Any) -> str:
        return "\n".join(str(a) for a in args)
