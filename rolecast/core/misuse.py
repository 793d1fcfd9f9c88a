"""Checks of how the API is called, shared by the user-facing classes."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from ..errors import UsageError


def reject_unknown_keywords(owner: str, given: Iterable[str], accepted: Iterable[str]) -> None:
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
        f"it takes {', '.join(known)} (declare a field on your subclass to add one)"
    )


__all__ = ["reject_unknown_keywords"]
