"""Finding a class by its path among the classes already defined — never by importing one.

Saved runs and teams name the classes of their roles and actions. Restoring them must
not import a module because a file says so; :func:`loaded_subclass` looks only among
the subclasses of a base the program has already defined (by importing the modules it
chose to import).
"""

from __future__ import annotations

from typing import Any, TypeVar

from ..errors import UsageError

T = TypeVar("T")


def class_path(obj: Any) -> str:
    """``module.QualName`` of a class or of an instance's class."""
    cls = obj if isinstance(obj, type) else type(obj)
    return f"{cls.__module__}.{cls.__qualname__}"


#: modules that moved (issue 28: the kernel in sub-packages): a run or team saved before names its
#: classes by the old path, and still restores. A fixed table in code, never read from data, and
#: only a lookup among loaded classes: a path never makes anything be imported.
MOVED_MODULES: dict[str, str] = {
    "rolecast.approval": "rolecast.control.approval",
    "rolecast.classes": "rolecast.core.classes",
    "rolecast.config": "rolecast.core.config",
    "rolecast.console": "rolecast.observe.console",
    "rolecast.cost": "rolecast.accounting.cost",
    "rolecast.hooks": "rolecast.control.hooks",
    "rolecast.jsonutil": "rolecast.core.jsonutil",
    "rolecast.lazy": "rolecast.core.lazy",
    "rolecast.llm.engine": "rolecast.llm.local.engine",
    "rolecast.llm.local": "rolecast.llm.local.provider",
    "rolecast.llm.openai": "rolecast.llm.openai.provider",
    "rolecast.llm.openai_wire": "rolecast.llm.openai.wire",
    "rolecast.metering": "rolecast.accounting.metering",
    "rolecast.models": "rolecast.core.models",
    "rolecast.printable": "rolecast.observe.printable",
    "rolecast.ratelimit": "rolecast.accounting.ratelimit",
    "rolecast.serialization": "rolecast.core.serialization",
    "rolecast.settings": "rolecast.core.settings",
    "rolecast.tracing": "rolecast.observe.tracing",
    "rolecast.usage": "rolecast.core.misuse",
    "roles.context": "roles.role_context",
}


#: the new names (``rolecast.llm.local`` is an old module and a new package: its new modules win)
_CURRENT_MODULES = frozenset(MOVED_MODULES.values())


def current_class_path(path: str) -> str:
    """``path`` with a moved module's old name replaced by its new one (the longest module that matches)."""
    module = path
    while "." in module:
        module = module.rpartition(".")[0]
        if module in _CURRENT_MODULES:
            return path
        if module in MOVED_MODULES:
            return MOVED_MODULES[module] + path[len(module):]
    return path


def loaded_subclass(base: type[T], path: str) -> type[T]:
    """The subclass of ``base`` (or ``base`` itself) whose class path is ``path``, among those loaded."""
    path = current_class_path(path)
    stack: list[type[Any]] = [base]
    seen: set[type[Any]] = set()
    while stack:
        cls = stack.pop()
        if cls in seen:
            continue
        seen.add(cls)
        if class_path(cls) == path:
            return cls
        stack.extend(cls.__subclasses__())
    raise UsageError(
        f"cannot restore {path!r}: no loaded subclass of {base.__name__} has that class path; "
        "import the module that defines it first"
    )


__all__ = ["MOVED_MODULES", "class_path", "current_class_path", "loaded_subclass"]
