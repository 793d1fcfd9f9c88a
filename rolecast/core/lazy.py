"""Names a package exports but loads on first use (PEP 562), so that importing it stays light.

A package lists, in one static table, which of its names live in which of its own submodules::

    __getattr__, __dir__ = lazy_exports(__name__, globals(), {"ReActAction": ".loops", ...})

``from actions import ReActAction`` then imports ``actions.loops`` at that moment, once; a name
not in the table is an ``AttributeError`` as usual. The table is code, never data: a target
must be a submodule of the package itself (a leading dot), so laziness can defer an import
inside a package but never add an edge the architecture test cannot see (it reads the tables).
Type checkers see the same names through the package's ``if TYPE_CHECKING:`` imports.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(
    package: str, namespace: dict[str, Any], table: Mapping[str, str],
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module-level ``__getattr__`` and ``__dir__`` of ``package`` for the names in ``table``."""
    for name, target in table.items():
        if not target.startswith(".") or target.startswith(".."):
            raise ValueError(f"{package}: the lazy name {name!r} must live in a submodule of the package, "
                             f"not in {target!r}")

    def __getattr__(name: str) -> Any:
        target = table.get(name)
        if target is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(target, package), name)
        namespace[name] = value  # the next lookup is a plain global
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *table})

    return __getattr__, __dir__


__all__ = ["lazy_exports"]
