"""Checks of how a role is declared: what ``watch=`` and ``actions=`` take, and roles that would do nothing."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from actions import Action
from memory import any_to_str
from rolecast.errors import UsageError


def _action_classes() -> list[type[Action]]:
    found, todo = [], [Action]
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo.extend(cls.__subclasses__())
    return found


def watched_name(value: Any, who: str) -> str:
    """What ``watch=`` keeps for ``value``: a class's or instance's dotted path, a dotted string as it
    is, and a bare name (``"UserRequirement"``) as the one Action class of that name (a UsageError
    when none or several have it: a name that matches no message would be ignored in silence)."""
    if not isinstance(value, str) or "." in value:
        return any_to_str(value)
    paths = sorted({any_to_str(c) for c in _action_classes() if c.__name__ == value})
    if len(paths) == 1:
        return paths[0]
    if paths:
        raise UsageError(f"{who}: watch={value!r} is ambiguous: {', '.join(paths)} are all called that; "
                         "watch the class itself or its dotted path")
    raise UsageError(f"{who}: watch={value!r} names no Action class (none by that name is defined yet); "
                     "watch takes Action classes, instances or dotted paths such as 'actions.action.UserRequirement'")


def refuse_roles_that_do_nothing(roles: Iterable[Any]) -> None:
    """A UsageError naming the roles with no actions and no ``_act`` of their own (when a run starts:
    they would never answer, and the run would end as if they had nothing to say)."""
    idle = [r.name for r in roles if getattr(r, "_does_nothing", lambda: False)()]
    if idle:
        raise UsageError(f"{', '.join(idle)} {'has' if len(idle) == 1 else 'have'} no actions and no _act of "
                         "its own: it would never answer; give it actions=[...] or override _act")


def _action_list(actions: Any, role: Any) -> list[Any]:
    """``actions=`` as a list: one action (an instance or a class) means a list of one; a string,
    a mapping or a non-iterable is a UsageError saying what is expected."""
    if isinstance(actions, Action) or (isinstance(actions, type) and issubclass(actions, Action)):
        return [actions]
    if isinstance(actions, (str, bytes, Mapping)) or not isinstance(actions, Iterable):
        who = getattr(role, "name", "") or type(role).__name__
        raise UsageError(f"{who}: actions= takes a list of Action instances or classes, "
                         f"not {type(actions).__name__} {actions!r:.80}")
    return list(actions)


__all__ = ["refuse_roles_that_do_nothing", "watched_name"]
