"""Finding a class by its path among the classes already defined — never by importing one.

Saved runs and teams name the classes of their roles and actions. Restoring them must
not import a module because a file says so; :func:`loaded_subclass` looks only among
the subclasses of a base the program has already defined (by importing the modules it
chose to import).
"""

from __future__ import annotations

from typing import Any, TypeVar

from .errors import UsageError

T = TypeVar("T")


def class_path(obj: Any) -> str:
    """``module.QualName`` of a class or of an instance's class."""
    cls = obj if isinstance(obj, type) else type(obj)
    return f"{cls.__module__}.{cls.__qualname__}"


def loaded_subclass(base: type[T], path: str) -> type[T]:
    """The subclass of ``base`` (or ``base`` itself) whose class path is ``path``, among those loaded."""
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


__all__ = ["class_path", "loaded_subclass"]
