"""Action: one unit of work a role can do, usually one LLM call. Users subclass it."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from enum import Enum
from typing import Any

from pydantic import (
    ConfigDict,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    ValidatorFunctionWrapHandler,
    model_serializer,
    model_validator,
)

from memory import Memory, Message
from rolecast.context import Context, current_context
from rolecast.control.hooks import Hooks
from rolecast.core.classes import NO_EXTRAS, class_path, share_model_state, shared_fields_set, unshare_for
from rolecast.core.config import Config
from rolecast.core.misuse import checks_keywords, reject_unknown_keywords
from rolecast.core.models import Model
from rolecast.core.serialization import CLASS_KEY as SERIALIZED_CLASS_KEY
from rolecast.core.serialization import class_named, without_class_key
from rolecast.errors import NothingToRun, UsageError
from rolecast.llm import as_llm, create_llm
from rolecast.llm.base import BaseLLM, LLMSettings
from rolecast.runs.log import enter_action, exit_action

from .action_node import ActionNode

#: keywords the constructor takes besides the fields
INIT_KEYWORDS = frozenset({"llm", "context", "config", "llm_name_or_type"})

#: the private attributes :attr:`Action.llm` reads
_LLM_PRIVATES = ("_forced_llm", "_llm", "_config", "_config_llm", "_role_llm", "_owner")

#: the key under which a dump records the class it came from (MetaGPT's ``__module_class_name``;
#: rolecast's older ``class_path`` is still read)
CLASS_KEY = SERIALIZED_CLASS_KEY

# ids of action instances whose ``run`` is already inside a hook invocation, so that a
# subclass calling ``super().run()`` is not hooked twice
_IN_RUN: ContextVar[frozenset[int]] = ContextVar("rolecast_in_run", default=frozenset())


# The wrapper below reaches the ContextVar only through these module functions: a user's
# Action subclass is shipped to other processes by cloudpickle (the Ray runtime), which
# copies the wrapper by value with the globals it names, and a ContextVar cannot be pickled.
def _active_runs() -> frozenset[int]:
    return _IN_RUN.get()


def _enter_run(active: frozenset[int]) -> Any:
    return _IN_RUN.set(active)


def _leave_run(token: Any) -> None:
    _IN_RUN.reset(token)


def _hooked(run: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap an ``Action.run`` so that every call goes through the context's hooks."""
    signature = inspect.signature(run)

    @functools.wraps(run)
    async def wrapper(self: Action, *args: Any, **kwargs: Any) -> Any:
        hooks = self.context.hooks
        if not (hooks._invoking or hooks._invoked):  # no hooks: the run itself, under this action's name
            token = enter_action(self.name)  # model calls made inside are logged with this action's name
            try:
                return await run(self, *args, **kwargs)
            finally:
                exit_action(token)
        active = _active_runs()
        if id(self) in active:  # a subclass's run calling super().run() inside a hooked call
            return await run(self, *args, **kwargs)
        token = enter_action(self.name)
        try:
            return await _invoke(self, hooks, active, args, kwargs)
        finally:
            exit_action(token)

    async def _invoke(
        self: Action, hooks: Hooks, active: frozenset[int], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        bound = signature.bind(self, *args, **kwargs)
        arguments = {k: v for k, v in bound.arguments.items() if k != "self"}

        async def call(args: dict[str, Any]) -> Any:
            token = _enter_run(active | {id(self)})
            try:
                bound.arguments.update(args)
                return await run(*bound.args, **bound.kwargs)
            finally:
                _leave_run(token)

        return await hooks.invoke("action", self.name, arguments, call, action=self)

    wrapper.__rolecast_hooked__ = True  # type: ignore[attr-defined]
    return wrapper


def _awaitable(run: Callable[..., Any]) -> Callable[..., Any]:
    """A synchronous ``run`` as a coroutine method (its result awaited if it returned an awaitable)."""

    @functools.wraps(run)
    async def wrapper(self: Action, *args: Any, **kwargs: Any) -> Any:
        result = run(self, *args, **kwargs)
        if inspect.isawaitable(result):
            result = await result
        return result

    return wrapper


@checks_keywords
class Action(Model):
    """A unit of work. Subclass it and override :meth:`run`::

        class SimpleWriteCode(Action):
            PROMPT_TEMPLATE: str = "Write a python function that can {instruction}."
            name: str = "SimpleWriteCode"

            async def run(self, instruction: str) -> str:
                return await self._aask(self.PROMPT_TEMPLATE.format(instruction=instruction))

    Or, without a subclass, give it an instruction (MetaGPT's ``Action(instruction=...)``):
    ``Action(name="Debate", instruction="Argue for your side")`` asks the model to follow
    it on the history (through :attr:`node`, a raw-text :class:`ActionNode`).

    The model it uses (``self.llm``) is resolved at call time: the action's own
    ``llm``, else its named ``service`` in the team's context, else the role's model,
    else the team's default, else the configured default. A role played by a person
    (``Role(is_human=True)``) overrides all of these. Every call of ``run`` goes
    through the context's invocation hooks.

    Constructor keywords besides the fields: ``llm`` and ``context`` (a
    :class:`~rolecast.context.Context`). Any other keyword is a
    :class:`~rolecast.errors.UsageError` naming the closest one; declare a field on a
    subclass to add one.
    """

    # extra="allow" so that subclass code may keep ad-hoc attributes (``self.x = ...``), as
    # in MetaGPT; the constructor still rejects keywords it does not know
    model_config = ConfigDict(arbitrary_types_allowed=True, extra="allow", defer_build=True)

    name: str = ""
    desc: str = ""
    prefix: str = ""
    service: str | None = None
    settings: LLMSettings | None = None
    #: what the default ``run`` asks the model to do (MetaGPT's ``Action(instruction=...)``)
    instruction: str = ""

    _llm: BaseLLM | None = PrivateAttr(default=None)
    _role_llm: BaseLLM | None = PrivateAttr(default=None)
    _forced_llm: BaseLLM | None = PrivateAttr(default=None)
    _context: Context | None = PrivateAttr(default=None)
    _owner: Any = PrivateAttr(default=None)
    _node: ActionNode | None = PrivateAttr(default=None)
    _config: Config | None = PrivateAttr(default=None)
    _config_llm: BaseLLM | None = PrivateAttr(default=None)
    #: this instance is its class's shared one (see :meth:`shared`): roles hold it, and run a binding of it;
    #: the value is then the fields-set of its bindings (a non-empty set), else False
    _shared: Any = PrivateAttr(default=False)
    #: a binding (see :meth:`bound_to`): the shared instance it binds to a role, until it is changed
    _bound_from: Action | None = PrivateAttr(default=None)
    #: few-shot demonstrations (a tuning's: see :meth:`set_demos`), as (prompt, answer) pairs
    _demos: tuple[tuple[str, str], ...] | None = PrivateAttr(default=None)

    def __init__(
        self,
        llm: BaseLLM | None = None,
        context: Context | None = None,
        config: Config | None = None,
        llm_name_or_type: str | None = None,
        **data: Any,
    ):
        data = without_class_key(data)
        reject_unknown_keywords(type(self).__name__, data, {*type(self).model_fields, *INIT_KEYWORDS})
        if context == "":  # MetaGPT's dumps of older actions carry an empty ``context`` field: no context given
            context = None
        if context is not None and not isinstance(context, Context):
            raise UsageError(
                f"{type(self).__name__}(context=...) takes a rolecast Context, not {type(context).__name__}; "
                "pass data to run() instead"
            )
        if llm_name_or_type is not None:
            # MetaGPT's name for a model of the configuration chosen by name: rolecast's service
            if data.get("service") not in (None, llm_name_or_type):
                raise UsageError("give llm_name_or_type= or service= (the same thing), not both")
            data["service"] = llm_name_or_type
        super().__init__(**data)
        self._llm = as_llm(llm, f"{type(self).__name__}(llm=...)")
        self._context = context
        if config is not None:
            self.config = config
        if not self.name:
            self.name = type(self).__name__
        share_model_state(self)  # its fields-set and empty extras: shared objects (see __setattr__)

    def __setattr__(self, name: str, value: Any) -> None:
        unshare_for(self, name)
        private = self.__pydantic_private__
        if private is not None and private.get("_bound_from") is not None:
            self._adopt()  # a run's binding of a shared action, changed: it becomes its role's own
        super().__setattr__(name, value)

    # ---------------------------------------------------------- sharing
    @classmethod
    def shared(cls) -> Action | None:
        """The one instance of this class that roles given the class (``set_actions([cls])``) share, or
        None when an instance made with no arguments holds state of its own (a mutable value, an
        extra attribute, a private attribute set): those roles then get one each, as before.

        A shared instance is never run or changed as it is: a role runs a binding of it
        (:meth:`bound_to`: the role's owner, context, model and identity prompt on the class's
        defaults), and a binding that anyone changes (``todo.x = ...``) becomes the role's own
        action (copy on write). So a million roles with the same action class hold one action."""
        found: tuple[Action, bool] | None = cls.__dict__.get(_SHARED)
        if found is None:
            instance = cls()
            found = (instance, _stateless(instance))
            if found[1]:  # its bindings' fields-set, kept where each binding finds it
                fields_set = shared_fields_set((*instance.__pydantic_fields_set__, "prefix"))
                instance.__pydantic_private__["_shared"] = fields_set  # type: ignore[index]
            type.__setattr__(cls, _SHARED, found)
        instance, shareable = found
        return instance if shareable else None

    @property
    def is_shared(self) -> bool:
        """Whether this is a class's shared instance (see :meth:`shared`)."""
        private = self.__pydantic_private__
        return bool(private is not None and private.get("_shared"))

    def bound_to(self, owner: Any, *, prefix: str, context: Context | None, llm: BaseLLM | None,
                 forced: bool = False) -> Action:
        """This shared action as ``owner`` runs it: the class's defaults (shared, not copied), with the
        owner, its context, its model (``forced``: a person's, which wins) and its identity prompt."""
        # (every turn of a role holding a shared action makes one: no call here that can be spared)
        private = self.__pydantic_private__
        assert private is not None
        fields_set = private["_shared"]
        bound = object.__new__(type(self))
        values = {**self.__dict__, "prefix": prefix}
        private = {**private, "_owner": owner, "_context": context, "_role_llm": llm,
                   "_forced_llm": llm if forced else None, "_shared": False, "_bound_from": self}
        object.__setattr__(bound, "__dict__", values)
        object.__setattr__(bound, "__pydantic_fields_set__", fields_set)
        object.__setattr__(bound, "__pydantic_extra__", NO_EXTRAS)
        object.__setattr__(bound, "__pydantic_private__", private)
        return bound

    def _adopt(self) -> None:
        """A binding is changed: from now on it is its owner's own action, in place of the shared one."""
        private = self.__pydantic_private__
        assert private is not None
        shared, private["_bound_from"] = private["_bound_from"], None
        adopt = getattr(private["_owner"], "_adopt_action", None)
        if adopt is not None:
            adopt(shared, self)

    @model_validator(mode="after")
    def _node_from_instruction(self) -> Action:
        if self.instruction:
            self._node = ActionNode(
                key=self.name or type(self).__name__, expected_type=str, instruction=self.instruction, example="",
                schema="raw",
            )
        return self
    @model_serializer(mode="wrap")
    def _with_class(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # the class path travels with the fields, so a saved action comes back as its own class
        return {CLASS_KEY: class_path(self), **handler(self)}

    @model_validator(mode="wrap")
    @classmethod
    def _as_saved_class(cls, value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        # a dump validated as a field typed ``Action`` comes back as the loaded subclass it names
        if isinstance(value, dict) and class_named(cls, value) is not cls:
            return cls.restore(value)
        return handler(value)

    @classmethod
    def restore(cls, data: dict[str, Any] | Action) -> Action:
        """An action from its dump, as the (already loaded) class the dump names."""
        if isinstance(data, Action):
            return data
        return class_named(cls, data)(**without_class_key(data))

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        run = cls.__dict__.get("run")
        if run is None or hasattr(run, "__rolecast_hooked__"):
            return
        if inspect.isasyncgenfunction(run) or not callable(run) or isinstance(run, (staticmethod, classmethod)):
            raise UsageError(
                f"{cls.__name__}.run must be a method, `async def run(self, ...)` (or a plain `def run`); "
                "it may not be an async generator, a staticmethod or a classmethod"
            )
        if not inspect.iscoroutinefunction(run):
            run = _awaitable(run)  # a plain `def run` is accepted: it runs in the event loop as is
        cls.run = _hooked(run)  # type: ignore[method-assign]

    # ----------------------------------------------------------------- wiring
    @property
    def llm(self) -> BaseLLM:
        """The model this action calls (resolved: person → action → service → role → team → default)."""
        # the private attributes read from pydantic's dict of them: every model call resolves its model
        private = self.__pydantic_private__
        if private is None:  # not initialised (a model made past pydantic's __init__): the slow reads
            private = {name: getattr(self, name) for name in _LLM_PRIVATES}
        llm = private["_forced_llm"]
        if llm is not None:
            return llm
        llm = private["_llm"]
        if llm is not None:
            return llm
        config = private["_config"]
        if config is not None:  # the action's own configuration (MetaGPT's private config)
            config_llm = private["_config_llm"]
            if config_llm is None:
                config_llm = self._config_llm = create_llm(config.services.get(self.service or "", config.llm))
            return config_llm
        service = self.service
        if service:
            context = self.context
            if service in context.services or service in context.config.services:
                return context.llm(service)
            context.llm(service)  # logs the missing-service warning once
        llm = private["_role_llm"]
        if llm is not None:
            return llm
        owner = private["_owner"]
        configured = getattr(owner, "configured_llm", None)  # the role's own configuration
        if isinstance(configured, BaseLLM):
            return configured
        context = self.context
        # the model the configuration's roles: section gives the role (MetaGPT's per-role llm), else the default
        return (context.role_llm(owner) if owner is not None else None) or context.llm()

    @llm.setter
    def llm(self, value: BaseLLM | None) -> None:
        self._llm = as_llm(value, f"{self.name}.llm")

    @property
    def context(self) -> Context:
        """The context this action runs in: its role's team, else the running scope's."""
        private = self.__pydantic_private__
        context = private["_context"] if private is not None else self._context
        return context if context is not None else current_context()

    def set_context(self, context: Context | None) -> None:
        self._context = context

    @property
    def config(self) -> Config:
        """The configuration this action's model comes from: its own, else its role's, else the context's."""
        if self._config is not None:
            return self._config
        own = getattr(self._owner, "own_config", None)
        return own if isinstance(own, Config) else self.context.config

    @config.setter
    def config(self, value: Config) -> None:
        if not isinstance(value, Config):
            raise UsageError(f"{type(self).__name__}.config takes a rolecast Config, not {type(value).__name__}")
        self._config = value
        self._config_llm = None

    def set_role_llm(self, llm: BaseLLM | None, *, override: bool = False) -> None:
        """The owning role's model: used when the action has none of its own.

        ``override=True`` (a role played by a person) makes it win over the action's own
        model and service too.
        """
        self._role_llm = llm
        self._forced_llm = llm if override else None

    @property
    def node(self) -> ActionNode | None:
        """The :class:`ActionNode` the default ``run`` fills (set by ``instruction``, or assigned)."""
        return self._node

    @node.setter
    def node(self, value: ActionNode | None) -> None:
        self._node = value

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
        private = self.__pydantic_private__
        demos = private.get("_demos") if private else None
        if demos and isinstance(prompt, str):
            # the one place demonstrations are rendered: after the system prompt, a user turn and an
            # assistant turn each, then the action's own prompt
            turns: list[dict[str, Any]] = [{"role": "system", "content": text} for text in systems]
            for asked, answered in demos:
                turns += [{"role": "user", "content": asked}, {"role": "assistant", "content": answered}]
            return await self.llm.ask([*turns, {"role": "user", "content": prompt}], stop=stop,
                                      settings=self.settings, grammar=grammar)
        return await self.llm.ask(prompt, systems, stop=stop, settings=self.settings, grammar=grammar)

    def set_demos(self, demos: Sequence[tuple[str, str]]) -> None:
        """Few-shot demonstrations for this action's calls (what a tuning's ``action:<Class>.demos`` sets):
        (prompt, answer) pairs, rendered by :meth:`_aask` as a user and an assistant turn each, after the
        system prompt and before the action's own prompt. None (the default) sends the prompt as it is."""
        pairs = tuple((str(asked), str(answered)) for asked, answered in demos)
        private = self.__pydantic_private__
        assert private is not None
        private["_demos"] = pairs or None

    async def _run_action_node(self, *args: Any, **kwargs: Any) -> ActionNode:
        """Fill :attr:`node` from the history given (newest first, as MetaGPT numbers it)."""
        node = self._node
        assert node is not None
        history = args[0] if args else next(iter(kwargs.values()), [])
        items = history if isinstance(history, (list, tuple)) else [history]
        context = "## History Messages\n" + "\n".join(f"{i}: {m}" for i, m in enumerate(reversed(items)))
        node.system_msgs = [self.prefix] if self.prefix else []
        return await node.fill(req=context, llm=self.llm)

    async def run(self, *args: Any, **kwargs: Any) -> Any:
        """Default behaviour: fill :attr:`node` if there is one, else ask the model about the
        given text or messages (``desc``, if set, first as the instruction).

        Subclasses override this.
        """
        if self._node is not None:
            return await self._run_action_node(*args, **kwargs)
        if not self.desc and all(a is None for a in (*args, *kwargs.values())):
            # no instruction, no description and nothing given: there is no prompt to send (MetaGPT's
            # base Action.run raises NotImplementedError here too)
            raise NothingToRun(f"{type(self).__name__} has no run() of its own, no instruction and no desc, "
                               "and was given nothing to work on: override run() or give it an instruction")
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


#: the class attribute holding (its shared instance, whether it is shared: not when its defaults hold state)
#: (on the class itself: a class defined in a function goes with its instance)
_SHARED = "__rolecast_shared__"

#: values a shared instance may hold: none can be changed in place
_IMMUTABLE = (str, int, float, bool, bytes, tuple, frozenset, type(None), Enum)


def _stateless(action: Action) -> bool:
    """Whether ``action`` holds nothing that could be changed in place or is its own: its fields are
    immutable values, it has no extra attributes, and its private attributes are unset (None/False)."""
    if action.__pydantic_extra__:
        return False
    if not all(isinstance(v, _IMMUTABLE) and (type(v) is not tuple or _all_immutable(v))
               for v in action.__dict__.values()):
        return False
    private = action.__pydantic_private__ or {}
    return all(v is None or v is False for k, v in private.items() if k != "_shared")


def _all_immutable(values: tuple[Any, ...]) -> bool:
    return all(isinstance(v, _IMMUTABLE) and (type(v) is not tuple or _all_immutable(v)) for v in values)


# the base class's own run goes through the hooks too
Action.run = _hooked(Action.run)  # type: ignore[method-assign]


class UserRequirement(Action):
    """Stands for the user's request: ``Message(cause_by=UserRequirement)``."""

    name: str = "UserRequirement"

    async def run(self, *args: Any, **kwargs: Any) -> str:
        return "\n".join(str(a) for a in args)


__all__ = ["CLASS_KEY", "INIT_KEYWORDS", "Action", "UserRequirement"]
