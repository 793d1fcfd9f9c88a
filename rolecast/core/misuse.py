"""Checks of how the API is called, shared by the user-facing classes."""

from __future__ import annotations

import difflib
import functools
import inspect
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from ..errors import UsageError


def reject_unknown_keywords(
    owner: str, given: Iterable[str], accepted: Iterable[str],
    hint: str = " (declare a field on your subclass to add one)",
) -> None:
    """Raise :class:`UsageError` for a keyword ``owner`` does not take, naming the closest one it does.

    Constructors call this instead of swallowing unknown keywords: ``Role(watchh=[...])``
    must fail loudly, not run a role that silently watches nothing new.
    """
    known = sorted(set(accepted))
    unknown = [k for k in given if k not in known]
    if not unknown:
        return
    parts = []
    for key in unknown:
        close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
        parts.append(f"{key!r} (did you mean {close[0]!r}?)" if close else repr(key))
    raise UsageError(
        f"{owner} got unexpected keyword argument{'s' if len(unknown) > 1 else ''} {', '.join(parts)}; "
        f"it takes {', '.join(known)}{hint}"
    )


def _keyword_names(func: Callable[..., Any]) -> frozenset[str] | None:
    """The keywords ``func`` accepts, or None when it takes any (``**kwargs``)."""
    params = inspect.signature(func).parameters.values()
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return None
    return frozenset(p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))


def _checked(owner: str, func: Callable[..., Any], accepted: frozenset[str]) -> Callable[..., Any]:
    name = f"{owner}.{func.__name__}()"
    if inspect.iscoroutinefunction(func):
        @functools.wraps(func)
        async def checked_async(*args: Any, **kwargs: Any) -> Any:
            if kwargs and not accepted.issuperset(kwargs):
                reject_unknown_keywords(name, kwargs, accepted - {"self", "cls"}, hint="")
            return await func(*args, **kwargs)
        return checked_async

    @functools.wraps(func)
    def checked(*args: Any, **kwargs: Any) -> Any:
        if kwargs and not accepted.issuperset(kwargs):
            reject_unknown_keywords(name, kwargs, accepted - {"self", "cls"}, hint="")
        return func(*args, **kwargs)
    return checked


C = TypeVar("C", bound=type)


def checks_keywords(cls: C) -> C:
    """Class decorator: every public method ``cls`` defines (not its properties) answers an unknown
    keyword with the same :class:`UsageError` and "did you mean" as the constructor, not a bare
    ``TypeError``: ``team.run_sync(n_rounds=3)`` names ``n_round``. Methods taking ``**kwargs``
    are left as they are; a subclass's own overrides are its own."""
    for attr, value in list(vars(cls).items()):
        if attr.startswith("_"):
            continue
        kind = type(value) if isinstance(value, (classmethod, staticmethod)) else None
        func = value.__func__ if kind is not None else value
        if not inspect.isfunction(func):
            continue
        accepted = _keyword_names(func)
        if accepted is None:
            continue
        wrapped = _checked(cls.__name__, func, accepted)
        setattr(cls, attr, kind(wrapped) if kind is not None else wrapped)
    return cls


__all__ = ["checks_keywords", "reject_unknown_keywords"]
