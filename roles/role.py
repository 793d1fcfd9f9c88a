"""Role: an agent with an identity, ordered actions, a memory, and a way to choose what to do.

A role's turn (:meth:`Role.run`): ``_observe`` keeps the news it watches →
``react`` loops ``_think`` → ``_act`` by its react mode → the result is a
:class:`~memory.Message` added to its memory and published on the environment bus.

React modes:

* ``react``: ``_think`` asks the model to pick the next action with the numeric
  state-selection prompt (MetaGPT's ``STATE_TEMPLATE``) through ``llm.choose``;
  ``-1`` — or an invalid answer, which is logged — ends the loop without acting;
  ``max_react_loop`` bounds it; a role with one action needs no model call.
* ``by_order``: each action once, in order, no model call to choose.
* ``plan_and_act``: the role's ``planner`` (a :class:`~actions.plan_and_act.PlanRunner`)
  writes a task graph over the role's actions and runs it.

Every action runs through :func:`actions.perform.perform`: the result becomes a
Message, a failure becomes :class:`~rolecast.errors.ActionFailed`, and the message is
remembered once.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from typing import Any

from loguru import logger
from pydantic import (
    ConfigDict,
    Field,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    ValidatorFunctionWrapHandler,
    field_serializer,
    model_serializer,
    model_validator,
)

from actions import Action, UserRequirement
from actions.action import CLASS_KEY
from actions.perform import perform
from actions.plan_and_act import PlanRunner
from actions.plan_and_act.runner import ask_a_person
from memory import LongTermMemory, Message, any_to_str
from rolecast.context import Context, current_context
from rolecast.core.classes import class_path
from rolecast.core.config import Config
from rolecast.core.misuse import checks_keywords, reject_unknown_keywords
from rolecast.core.models import Model
from rolecast.core.serialization import class_named, without_class_key
from rolecast.errors import ActionFailed, InvalidChoice, InvocationCancelled, RolecastError, UsageError
from rolecast.llm import as_llm
from rolecast.llm.base import BaseLLM
from rolecast.llm.human import HumanProvider
from rolecast.runs.events import STATE_INVALID

from .action_list import ActionList, adopt_action, bind_action, own_action, raw_action, raw_actions
from .checks import _action_list, refuse_roles_that_do_nothing, watched_name  # noqa: F401 - re-exported
from .fitting import (
    COMPACTED,
    Compaction,
    MemoryFitter,
    as_compaction,
    compact,
    compacted_view,
    history_budget,
    history_for_action,
    state_prompt,
)
from .footprint import addresses_as_set, compact_role
from .inbox import Inbox
from .prompts import CONSTRAINT_TEMPLATE, PREFIX_TEMPLATE, PREFIX_TEMPLATE_NO_GOAL, STATE_TEMPLATE  # noqa: F401 - re-exported
from .role_context import RoleContext, RoleReactMode
from .sdk import MetaGPTSDK

#: keywords the constructor takes besides the fields
INIT_KEYWORDS = frozenset(
    {"llm", "context", "config", "actions", "watch", "react_mode", "max_react_loop", "long_term_memory",
     "compaction"}
)

@checks_keywords
class Role(MetaGPTSDK, Inbox, Model):
    """Subclass it as in MetaGPT::

        class SimpleCoder(Role):
            name: str = "Alice"
            profile: str = "SimpleCoder"

            def __init__(self, **kwargs):
                super().__init__(**kwargs)
                self._watch([UserRequirement])
                self.set_actions([SimpleWriteCode])

    Constructor keywords besides the fields: ``llm`` (a model for this role),
    ``context`` (a :class:`~rolecast.context.Context`), ``actions``, ``watch``,
    ``react_mode``, ``max_react_loop`` and ``long_term_memory`` (True or a
    :class:`~memory.LongTermMemory`: prompts then carry the recent and the relevant part
    of the history, within a token budget, instead of all of it). Any other keyword is a
    :class:`~rolecast.errors.UsageError` naming the closest one (declare a field on your
    subclass to add one). ``is_human=True`` makes a person play the role: its model —
    for every action, whatever the action's own — is a
    :class:`~rolecast.llm.human.HumanProvider` reading standard input (pass
    ``llm=HumanProvider(answer)`` to answer from code).
    """

    # extra="allow" so that subclass code may keep ad-hoc attributes (``self.x = ...``), as
    # in MetaGPT; the constructor still rejects keywords it does not know
    model_config = ConfigDict(arbitrary_types_allowed=True, extra="allow", defer_build=True)

    name: str = ""
    profile: str = ""
    goal: str = ""
    constraints: str = ""
    desc: str = ""
    is_human: bool = False
    actions: list[Action] = Field(default_factory=list, exclude=True)
    states: list[str] = Field(default_factory=list)
    rc: RoleContext = Field(default_factory=RoleContext)
    addresses: set[str] = Field(default_factory=set)
    recovered: bool = False
    latest_observed_msg: Message | None = None
    observe_all_msg_from_buffer: bool = False
    planner_max_replans: int = 1
    planner_max_tasks: int = 8
    #: plan_and_act: how many independent tasks may run at once (1 = one after another)
    planner_concurrency: int = 1
    #: plan_and_act: "auto" (a rule), "llm", "none", or a callable ``(task, result) -> Review | bool``
    planner_reviewer: Any = "auto"

    _llm: BaseLLM | None = PrivateAttr(default=None)
    _context: Context | None = PrivateAttr(default=None)
    _planner: PlanRunner | None = PrivateAttr(default=None)
    _warned_no_actions: bool = PrivateAttr(default=False)
    _long_term_memory: LongTermMemory | None = PrivateAttr(default=None)
    _compaction: Compaction | None = PrivateAttr(default=None)
    _config: Config | None = PrivateAttr(default=None)
    _config_llm: BaseLLM | None = PrivateAttr(default=None)
    #: the identity prompts this role gave its actions (refreshed by set_env; others' are kept)
    _given_prefixes: tuple[str, ...] = PrivateAttr(default=())

    # a role is an entity: hashable by identity (SubscriptionRunner and member_addrs key by role)
    __hash__ = object.__hash__

    @model_serializer(mode="wrap")
    def _with_class(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # a dump records the role's class and its actions (a shared one as this role runs it, left shared)
        return {CLASS_KEY: class_path(self), **handler(self), "actions": [
            (self._bind(a) if a.is_shared else a).model_dump(mode="json") for a in raw_actions(self.actions)]}

    _addresses_as_set = field_serializer("addresses")(addresses_as_set)  # (kept compact: see roles.footprint)

    @model_validator(mode="wrap")
    @classmethod
    def _as_recorded_class(cls, value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        if isinstance(value, dict):
            target = class_named(cls, value)  # MetaGPT's key, or rolecast's older one
            if target is not cls:
                return target.model_validate(value)
        return handler(value)

    def __init__(
        self, llm: BaseLLM | None = None, context: Context | None = None, config: Config | None = None, **data: Any
    ):
        data = without_class_key(data)
        reject_unknown_keywords(type(self).__name__, data, {*type(self).model_fields, *INIT_KEYWORDS})
        if context == "":  # an empty ``context`` field of a MetaGPT dump: none given
            context = None
        if context is not None and not isinstance(context, Context):
            raise UsageError(f"{type(self).__name__}(context=...) takes a rolecast Context, "
                             f"not {type(context).__name__}")
        long_term_memory = data.pop("long_term_memory", None)
        compaction = as_compaction(data.pop("compaction", None))
        rc = data.pop("rc", None)
        actions = data.pop("actions", None)
        watch = data.pop("watch", None)
        react_mode = data.pop("react_mode", None)
        max_react_loop = data.pop("max_react_loop", None)
        super().__init__(**data)
        llm = as_llm(llm, f"{type(self).__name__}(llm=...)")
        if self.is_human:
            if llm is not None and not isinstance(llm, HumanProvider):
                raise UsageError(f"{type(self).__name__}(is_human=True) is played by a person, not by {llm!r}; "
                                 "pass llm=HumanProvider(answer) to answer from code")
            llm = llm or HumanProvider()
        self._llm = llm
        self._context = context
        if config is not None:
            self.config = config
        self.long_term_memory = long_term_memory
        self._compaction = compaction
        if not self.name:
            self.name = type(self).__name__
        if not self.profile:
            self.profile = type(self).__name__
        self.set_addresses({class_path(self), self.name, self.profile})  # (the class path: one string per class)
        self._watch(watch if watch is not None else [UserRequirement])
        if actions:
            self.set_actions([Action.restore(a) if isinstance(a, dict) else a for a in _action_list(actions, self)])
        if rc is not None:
            self._restore_context(rc)
        if react_mode is not None:
            self._set_react_mode(react_mode, max_react_loop if max_react_loop is not None else 1)
        elif max_react_loop is not None:
            self.rc.max_react_loop = max_react_loop
        # its fields-set, extras and private attributes are the ones every role with the same shares, its
        # field dict key-sharing (a million roles of a class: one set, one dict); see roles.footprint
        compact_role(self)

    def _restore_context(self, rc: RoleContext | dict[str, Any]) -> None:
        """Take the saved runtime state (memory, state, watch list, react mode) of a dump."""
        saved = rc if isinstance(rc, RoleContext) else RoleContext.model_validate(rc)
        self.rc.memory = saved.memory
        self.rc.state = saved.state
        self.rc.watch = saved.watched
        self.rc.react_mode = saved.react_mode
        self.rc.max_react_loop = saved.max_react_loop
        self.rc.msg_buffer = saved.msg_buffer
        if saved.state >= 0 and self.latest_observed_msg is not None:
            self.recovered = True  # saved in the middle of a turn: the next one resumes at that action

    # ----------------------------------------------------------------- wiring
    @property
    def llm(self) -> BaseLLM:
        """This role's model: its own, else its configuration's, else the team's default (resolved lazily)."""
        if self._llm is not None:
            return self._llm
        return self.configured_llm or self.context.role_llm(self) or self.context.llm()

    @llm.setter
    def llm(self, value: BaseLLM | None) -> None:
        value = as_llm(value, f"{self.name}.llm")
        self._llm = value
        for action in raw_actions(self.actions):
            if not action.is_shared:  # (a shared one is bound to this role's model when it runs)
                action.set_role_llm(value, override=self.is_human)

    @property
    def context(self) -> Context:
        return self._context if self._context is not None else current_context()

    def set_context(self, context: Context | None) -> None:
        self._context = context
        for action in raw_actions(self.actions):
            if not action.is_shared:
                action.set_context(context)

    def set_env(self, env: Any) -> None:
        """Called by the environment when the role joins it: as in MetaGPT, the actions are prepared
        again, so their identity prompt names the environment (``Environment(desc=...)``) and the
        other roles, and they take the environment's context and models."""
        self.rc.env = env
        context = getattr(env, "context", None)
        if context is not None:
            self.set_context(context)
        if env is not None:
            actions = self.actions
            if getattr(env, "desc", "") and isinstance(actions, ActionList):
                actions._own_all()  # the identity prompt names the others: each action its own, made once
            for action in raw_actions(actions):
                if not action.is_shared:
                    self.prepare_action(action)

    @property
    def env(self) -> Any:
        return self.rc.env

    @property
    def _setting(self) -> str:
        return f"{self.name}({self.profile})"

    @property
    def todo(self) -> Action | None:
        return self.rc.todo

    def set_todo(self, value: Action | None) -> None:
        self.rc.todo = value

    @property
    def planner(self) -> PlanRunner:
        """The plan_and_act runner of this role (created on first use; MetaGPT's name)."""
        if self._planner is None:
            self._planner = PlanRunner(max_replans=self.planner_max_replans, max_tasks=self.planner_max_tasks)
        return self._planner

    @planner.setter
    def planner(self, value: PlanRunner) -> None:
        self._planner = value

    @property
    def long_term_memory(self) -> LongTermMemory | None:
        """This role's long-term memory, or None: its prompts then carry its whole history."""
        return self._long_term_memory

    @long_term_memory.setter
    def long_term_memory(self, value: LongTermMemory | bool | None) -> None:
        if value is True:
            value = LongTermMemory()
        elif value is False:
            value = None
        if value is not None and not isinstance(value, LongTermMemory):
            raise UsageError(f"long_term_memory must be True, False, None or a LongTermMemory, not {value!r}")
        self._long_term_memory = value

    async def prompt_history(self) -> list[Message]:
        """The history this role's prompts carry: all of it, or with long-term memory the recent
        and the relevant-to-the-news part, within its token budget."""
        long_term = self._long_term_memory
        if long_term is None:
            history = self.rc.history  # (one copy; scanned for a summary only when its cause holds one)
            return compacted_view(history) if self.rc.memory.get_by_action(COMPACTED) else history
        return await long_term.context(self.rc.memory, self.rc.news, llm=self.llm, budget=await history_budget(self))

    def memory_fitter(self, action: Action, scale: float = 1.0) -> MemoryFitter:
        """How this role's memory reads while ``action`` runs in an ``_act`` of its own (MetaGPT's way):
        fitted to the window (see :class:`~roles.fitting.MemoryFitter`)."""
        return MemoryFitter(self, action, scale)

    def _identity_prefix(self) -> str:
        """Profile, name, goal and constraints: the start of the identity prompt."""
        template = PREFIX_TEMPLATE if self.goal.strip() else PREFIX_TEMPLATE_NO_GOAL
        prefix = template.format(profile=self.profile, name=self.name, goal=self.goal.strip())
        if self.constraints:
            prefix += CONSTRAINT_TEMPLATE.format(constraints=self.constraints)
        return prefix

    def _get_prefix(self) -> str:
        """The identity prompt: ``desc`` if given, else profile, name, goal and constraints, and the
        environment's description with the other roles' names."""
        if self.desc:
            return self.desc
        prefix = self._identity_prefix()
        env = self.rc.env
        if env is not None and env.desc:
            others = ", ".join(n for n in env.role_names() if n != self.name)
            prefix += f"You are in {env.desc} with roles({others})."
        return prefix

    def prepare_action(self, action: Action) -> None:
        """Give ``action`` this role's context, model, identity prompt and ownership."""
        action.set_context(self._context)
        action.set_role_llm(self._llm, override=self.is_human)
        action.set_owner(self)
        # the identity prompt is this role's: set, or refreshed when this role wrote the old one (a
        # prompt given to the action by other code is kept)
        old = action.prefix
        if not old or old in self._given_prefixes or (not self.desc and old.startswith(self._identity_prefix())):
            prefix = self._get_prefix()
            if prefix not in self._given_prefixes:
                self._given_prefixes = (*self._given_prefixes, prefix)
            action.set_prefix(prefix)

    _init_action = prepare_action  # MetaGPT's spelling

    def set_action(self, action: Action | type[Action]) -> None:
        self.set_actions([action])

    def set_actions(self, actions: Sequence[Action | type[Action]]) -> None:
        """Replace this role's actions (classes are instantiated); their order is the states'.

        A class whose default instance holds no state of its own is not instantiated for this role: it
        holds the class's shared instance (see :mod:`roles.action_list`), and reading ``self.actions``
        hands out this role's own."""
        items = _action_list(actions, self)
        may_share = not getattr(self.rc.env, "desc", "")  # (else each identity prompt names the others)
        held: ActionList = ActionList(self)
        states: list[str] = []
        for item in items:
            action = None
            if may_share and isinstance(item, type) and issubclass(item, Action):
                shared = item.shared()
                if shared is not None and all(a is not shared for a in raw_actions(held)):
                    action = shared
            if action is None:
                action = item() if isinstance(item, type) else item
                if not isinstance(action, Action):
                    raise UsageError(f"{self.name}: {item!r} is not an Action or Action class")
                self.prepare_action(action)
            states.append(sys.intern(f"{len(held)}. {action}"))  # ("0. Post": one string for all roles)
            list.append(held, action)
        self.actions = held
        self.states = states
        if self.rc.react_mode == RoleReactMode.BY_ORDER:
            self.rc.max_react_loop = len(held)

    _init_actions = set_actions  # MetaGPT ≤0.7 spelling

    def _watch(self, actions: Iterable[Any]) -> None:
        """React to messages caused by these actions (classes, instances, dotted paths, or a class's
        bare name when one Action class has it)."""
        self.rc.watch = {watched_name(a, self.name) for a in actions}

    def _does_nothing(self) -> bool:
        """No actions, and none of the methods that could act without one overridden: a turn would
        do nothing (a run refuses to start with such a role: it would never answer)."""
        if self.actions:
            return False
        mine = type(self)
        return all(getattr(mine, m) is getattr(Role, m) for m in ("_act", "_think", "_react", "react", "run",
                                                                  "_plan_and_act"))

    def _set_react_mode(
        self, react_mode: str | RoleReactMode, max_react_loop: int = 1, auto_run: bool = True
    ) -> None:
        """Choose how ``_think`` picks actions: ``react``, ``by_order`` or ``plan_and_act``.

        ``max_react_loop`` bounds the ``react`` loop (other modes run each action or
        task once). ``auto_run=False`` (``plan_and_act``) has a person review each task's
        result before the plan goes on (MetaGPT's review by a human).
        """
        mode = self.rc.set_react_mode(react_mode, max_react_loop, len(self.actions))
        if mode == RoleReactMode.PLAN_AND_ACT and not auto_run:
            self.planner_reviewer = ask_a_person(self._llm if self.is_human else None)

    def _set_state(self, state: int) -> None:
        actions = self.actions
        if 0 <= state < len(actions):
            action = raw_action(actions, state)
            shared = (action.__pydantic_private__ or {}).get("_shared")  # (action.is_shared, without a call)
            self.rc.set_state(state, self._bind(action) if shared else action)
        else:
            self.rc.set_state(state, None)

    # shared actions (see roles.action_list): bound to this role when it runs them, its own when read
    _bind, _own_action, _adopt_action = bind_action, own_action, adopt_action

    # -------------------------------------------------------------- the turn
    async def _think(self) -> bool:
        """Choose the next action (sets ``rc.todo``); False when there is nothing to do."""
        n = len(self.actions)
        if n == 0:
            return False
        if self.recovered and self.rc.state >= 0 and n > 1:
            self._set_state(self.rc.state)  # a restored role resumes at the action its turn failed in
            self.recovered = False
            return True
        if self.rc.react_mode == RoleReactMode.BY_ORDER:
            if self.rc.max_react_loop != n:
                self.rc.max_react_loop = n
            self._set_state(self.rc.state + 1)
            return 0 <= self.rc.state < n
        if n == 1:
            self._set_state(0)
            return True
        prompt = await state_prompt(self, n)  # the newest history that fits the model's window
        try:
            next_state = await self.llm.choose(prompt, n)
        except InvalidChoice as exc:
            logger.warning("{}: invalid state answer {!r}; ending this turn", self._setting, exc.raw)
            log = self.context.run_log  # the console, `rolecast runs show` and traces show it
            if log is not None:
                log.emit(STATE_INVALID, {"raw": exc.raw, "n_options": n, "error": str(exc)}, role=self.name)
            next_state = -1
        if next_state == -1:
            logger.debug("{}: chose -1, done", self._setting)
        self._set_state(next_state)
        return self.rc.todo is not None

    async def _act(self) -> Message:
        """Run ``rc.todo`` on the history (override it as in MetaGPT).

        The turn passes what this returns through :func:`~actions.perform.perform`, so an
        override may return a Message or any value, and need not remember it.
        """
        todo = self.rc.todo
        if todo is None:
            raise UsageError(f"{self._setting}: _act called with nothing to do")
        logger.info("{}: to do {}", self._setting, todo.name)
        return await perform(self, todo, await history_for_action(self, todo, await self.prompt_history()))

    async def _react(self) -> Message | None:
        """Think then act, up to ``max_react_loop`` times; the last result is returned."""
        taken = 0
        rsp: Message | None = None
        by_order = self.rc.react_mode == RoleReactMode.BY_ORDER
        reactions = self.rc.reactions
        while taken < self.rc.max_react_loop:
            if not await self._think():
                break
            todo = self.rc.todo
            assert todo is not None  # _think returned True
            # the default _act runs the action through perform itself; an override is wrapped in it
            rsp = await (perform(self, todo, invoke=self._act) if self._overrides_act() else self._act())
            taken += 1
            if by_order and self.rc.reactions != reactions:
                # _act ran a reaction of its own (MetaGPT 0.8's TutorialAssistant: set_actions, then
                # `await super().react()`): that ran the actions it set, so this turn is done, as in
                # MetaGPT, whose by_order turn runs the actions it had when it began
                break
        return rsp

    # ------------------------------------------------------ plan_and_act owner
    def _overrides_act(self) -> bool:
        """Who runs an action, decided once: the default ``_act`` runs ``rc.todo`` through
        :func:`~actions.perform.perform` itself; a class that overrides it (as in MetaGPT) has its
        ``_act`` wrapped in perform, and since that reads ``rc.todo`` its actions run one at a time."""
        return type(self)._act is not Role._act

    @property
    def acts_concurrently(self) -> bool:
        """Whether plan tasks may run side by side: not when ``_act`` is overridden (it reads ``rc.todo``)."""
        return not self._overrides_act()

    async def perform_task(self, action: Action, note: Message) -> Message:
        """Run one plan task: remember its instruction ``note``, then ``action`` on the history."""
        self.remember(note)
        if not self._overrides_act():
            return await perform(self, action, await history_for_action(self, action, await self.prompt_history()))
        self._set_state(self.actions.index(action))
        return await perform(self, action, invoke=self._act)

    async def _plan_and_act(self) -> Message | None:
        """Plan over this role's actions, then run the plan (``plan_and_act`` mode)."""
        goal = self.rc.news[-1].content if self.rc.news else (
            self.rc.history[-1].content if self.rc.history else self.goal
        )
        return await self.planner.plan_and_act(self, goal)

    async def react(self) -> Message | None:
        """One reaction by the role's react mode; the state is reset afterwards.

        A reaction that raises leaves ``rc.state`` at the action that failed (and no
        ``rc.todo``), so that a team saved then resumes there (MetaGPT's recover flow); the
        role itself starts its next turn afresh, unless it was restored (``recovered``).
        """
        rc = self.rc
        if rc.state != -1 and not self.recovered:
            self._set_state(-1)  # left by a failed turn: this turn starts over
        compaction = self._compaction or self.context.kwargs.get("compaction")
        if compaction is not None:  # chosen by the user (Role or Team): older history becomes a summary
            await compact(self, compaction)
        try:
            rsp = await (self._plan_and_act() if rc.react_mode == RoleReactMode.PLAN_AND_ACT else self._react())
        except BaseException:
            rc.set_state(rc.state, None)  # the failed action's state is kept; nothing is left to do
            raise
        self._set_state(-1)
        rc.reactions += 1
        return rsp

    async def run(self, with_message: str | Message | list[str] | None = None) -> Message | None:
        """Take one turn: observe, react, publish. Returns the published message, if any.

        ``with_message`` puts a user requirement into the inbox first. An action that
        raises ends the turn with :class:`~rolecast.errors.ActionFailed` (its ``__cause__``
        is the original error); the messages observed this turn stay in memory. An action a
        hook cancels (:class:`~rolecast.errors.InvocationCancelled`: a rejected approval) ends
        the turn with no message, and the run goes on.
        """
        if with_message is not None:
            if isinstance(with_message, Message):
                msg = with_message
            elif isinstance(with_message, list):
                msg = Message(content="\n".join(with_message))
            else:
                msg = Message(content=with_message)
            if not msg.cause_by:
                msg.cause_by = any_to_str(UserRequirement)
            self.put_message(msg)
        if not await self._observe():
            return None
        if not self.actions and not self._warned_no_actions and self.rc.react_mode != RoleReactMode.PLAN_AND_ACT:
            self._warned_no_actions = True
            logger.warning("{} received news but has no actions, so it will not answer; give it some with "
                           "set_actions([...])", self._setting)
        with self.context.scope(role=self.name):
            try:
                rsp = await self.react()
            except InvocationCancelled as exc:
                if exc.kind != "action":
                    logger.error("{}: {}", self._setting, exc)
                    self._requeue_news()
                    raise
                # a hook (a rejected approval) cancelled an action: this turn ends with no message
                logger.warning("{}: {}; its turn is cancelled, the run goes on", self._setting, exc)
                rsp = None
            except RolecastError as exc:
                logger.error("{}: {}", self._setting, exc)
                self._requeue_news()
                raise
            except Exception as exc:  # raised outside an action: in _observe/_think overrides
                logger.error("{}: {}: {}", self._setting, type(exc).__name__, exc)
                self._requeue_news()
                raise ActionFailed(self.name, "_think", exc) from exc
            finally:
                self.rc.news = []
        self.set_todo(None)
        self.publish_message(rsp)
        return rsp

    def __str__(self) -> str:
        return self._setting

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, profile={self.profile!r})"


__all__ = ["INIT_KEYWORDS", "Role"]
