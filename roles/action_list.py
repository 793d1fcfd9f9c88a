"""A role's actions (``role.actions``): shared actions kept once, each role's own handed out when asked for.

A role given an action class (``set_actions([WriteCode])``, MetaGPT's way) holds the class's shared
instance (:meth:`actions.Action.shared`) instead of an instance of its own: a million roles with one
action class hold one action. The role runs a binding of it (:meth:`actions.Action.bound_to`: its
owner, context, model and identity prompt on the class's defaults, made for the turn and dropped
after it), and whoever reads the list (``role.actions[0]``, ``for a in role.actions``) gets the role's
own action, bound and kept in the shared one's place — so code that keeps per-role state on an action,
or reads its prompt, sees what it would with an instance per role.

The role's own code reads the list with :func:`raw_actions` (shared instances as they are).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, SupportsIndex

if TYPE_CHECKING:
    from actions import Action


class ActionList(list["Action"]):
    """``role.actions``: a list whose shared entries become the role's own when read (see the module)."""

    __slots__ = ("_role",)

    def __init__(self, role: Any = None, items: list[Action] | None = None) -> None:
        super().__init__(items or ())
        self._role = role  # None once nothing in it is shared

    def __reduce__(self) -> tuple[Any, ...]:
        # pickled (Ray ships roles) as it is held: a shared action stays shared on the other side
        return (ActionList, (), (None, {"_role": self._role}), list.__iter__(self))

    def _own_all(self) -> None:
        """Replace every shared entry by the role's own binding of it (the one it is running, if any)."""
        role = self._role
        if role is None:
            return
        self._role = None
        for i, action in enumerate(list.__iter__(self)):
            if action.is_shared:
                list.__setitem__(self, i, role._own_action(action))

    def __getitem__(self, index: Any) -> Any:
        self._own_all()
        return list.__getitem__(self, index)

    def __iter__(self) -> Iterator[Action]:
        self._own_all()
        return list.__iter__(self)

    def __reversed__(self) -> Iterator[Action]:
        self._own_all()
        return list.__reversed__(self)

    def __contains__(self, item: object) -> bool:
        self._own_all()
        return list.__contains__(self, item)

    def index(self, value: Action, start: SupportsIndex = 0, stop: SupportsIndex = 2**62) -> int:
        self._own_all()
        return list.index(self, value, start, stop)

    def pop(self, index: SupportsIndex = -1) -> Action:
        self._own_all()
        return list.pop(self, index)

    def copy(self) -> list[Action]:
        self._own_all()
        return list.copy(self)

    def __add__(self, other: Any) -> Any:
        self._own_all()
        return list.__add__(self, other)

    def __eq__(self, other: object) -> bool:
        self._own_all()
        return list.__eq__(self, other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        self._own_all()
        return list.__repr__(self)


def raw_actions(actions: list[Action]) -> Iterator[Action]:
    """The role's actions as held (a shared instance as it is): for the role's own bookkeeping."""
    return list.__iter__(actions)


def raw_action(actions: list[Action], index: int) -> Action:
    return list.__getitem__(actions, index)


def bind_action(role: Any, action: Action) -> Action:
    """A shared action as ``role`` runs it (see :meth:`actions.Action.bound_to`): ``Role._bind``."""
    private = role.__pydantic_private__  # (role._context and role._llm, without pydantic's slow path)
    return action.bound_to(role, prefix=role._get_prefix(), context=private["_context"], llm=private["_llm"],
                           forced=role.is_human)


def own_action(role: Any, shared: Action) -> Action:
    """``role``'s own action in place of a shared one (its actions read): the binding it is running,
    if any, else a new one (``Role._own_action``)."""
    todo = role.rc.todo
    private = todo.__pydantic_private__ if todo is not None else None
    if private is not None and private.get("_bound_from") is shared and private.get("_owner") is role:
        own = todo
    else:
        own = bind_action(role, shared)
    own.__pydantic_private__["_bound_from"] = None
    if own.prefix not in role._given_prefixes:  # its identity prompt, refreshed by set_env as the role's
        role._given_prefixes = (*role._given_prefixes, own.prefix)
    return own


def adopt_action(role: Any, shared: Action, own: Action) -> None:
    """A binding of ``shared`` was changed (see :meth:`actions.Action._adopt`): it is ``role``'s own now,
    in the shared one's place (``Role._adopt_action``)."""
    actions = role.actions
    state = role.rc.state
    if 0 <= state < len(actions) and raw_action(actions, state) is shared:
        list.__setitem__(actions, state, own)
        return
    for i, action in enumerate(raw_actions(actions)):
        if action is shared:
            list.__setitem__(actions, i, own)
            return


__all__ = ["ActionList", "adopt_action", "bind_action", "own_action", "raw_action", "raw_actions"]
