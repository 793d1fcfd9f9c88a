"""Finding a class by its path among the classes already defined — never by importing one.

Saved runs and teams name the classes of their roles and actions. Restoring them must
not import a module because a file says so; :func:`loaded_subclass` looks only among
the subclasses of a base the program has already defined (by importing the modules it
chose to import).
"""

from __future__ import annotations

import sys
import weakref
from collections.abc import Iterable
from typing import Any, TypeVar

from ..errors import UsageError

T = TypeVar("T")

#: class → (module, qualname, path), made once: a million roles of one class share one path string (weak:
#: a class defined in a function is let go, and :func:`loaded_subclass` does not find it again)
_PATHS: weakref.WeakKeyDictionary[type, tuple[str, str, str]] = weakref.WeakKeyDictionary()


def class_path(obj: Any) -> str:
    """``module.QualName`` of a class or of an instance's class (one shared, interned string per class)."""
    cls = obj if isinstance(obj, type) else type(obj)
    module, qualname = cls.__module__, cls.__qualname__
    found = _PATHS.get(cls)
    if found is not None and found[0] is module and found[1] is qualname:
        return found[2]
    path = sys.intern(f"{module}.{qualname}")  # (made again if a class was renamed after its creation)
    _PATHS[cls] = (module, qualname, path)
    return path


#: frozensets of names kept once (see :func:`shared_names`)
_NAME_SETS: dict[frozenset[str], frozenset[str]] = {}


def shared_names(names: Iterable[str]) -> frozenset[str]:
    """``frozenset(names)``, the same object for the same names: the watch lists of a million roles of one
    class are one set (interned strings in it), not a million copies. Immutable: a change makes another."""
    key = frozenset(sys.intern(n) if type(n) is str else n for n in names)
    found = _NAME_SETS.get(key)
    if found is None:
        if len(_NAME_SETS) >= 4096:  # distinct watch lists are few; a program making endless ones is not
            _NAME_SETS.clear()  # kept from its memory (the sets still work, only are not shared)
        found = _NAME_SETS[key] = key
    return found


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




#: pydantic fields-sets kept once (see :func:`shared_fields_set`)
_FIELD_SETS: dict[frozenset[str], set[str]] = {}


def shared_fields_set(names: Iterable[str]) -> set[str]:
    """The same ``set`` object for the same field names: a model's ``__pydantic_fields_set__`` (which
    fields were given) is the same for a million roles of one class, and a set of a dozen names is
    728 bytes. Shared, so never grown in place: whoever sets a field not in it swaps in the set of
    the names with that one (see :meth:`roles.inbox.Inbox.__setattr__`)."""
    key = frozenset(names)
    found = _FIELD_SETS.get(key)
    if found is None:
        if len(_FIELD_SETS) >= 4096:
            _FIELD_SETS.clear()
        found = _FIELD_SETS[key] = set(key)
    return found


class _NoExtras(dict[str, Any]):
    """The empty ``__pydantic_extra__`` shared by the models that have no extra attributes (an empty dict
    each is 64 bytes); setting one gives the model its own dict first (see :func:`unshare_for`)."""

    def _refuse(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("the shared empty extras of a model are not changed in place; set the attribute")

    __setitem__ = update = setdefault = _refuse  # type: ignore[assignment]


#: see :class:`_NoExtras`
NO_EXTRAS: dict[str, Any] = _NoExtras()


def share_model_state(model: Any) -> None:
    """After a pydantic model's ``__init__``: its fields-set, and its extras when it has none, become the
    objects every model with the same ones shares (:func:`shared_fields_set`, :data:`NO_EXTRAS`). The
    model's ``__setattr__`` must call :func:`unshare_for` first."""
    object.__setattr__(model, "__pydantic_fields_set__", shared_fields_set(model.__pydantic_fields_set__))
    extra = model.__pydantic_extra__
    if extra is not None and not extra:
        object.__setattr__(model, "__pydantic_extra__", NO_EXTRAS)


def unshare_for(model: Any, name: str) -> None:
    """Before ``model.name = ...``: a field or extra attribute not yet in the shared fields-set swaps in the
    set with it (so pydantic's ``add`` finds it there and never grows a shared set), and an extra attribute
    gives the model its own extras dict."""
    cls = type(model)
    if name in cls.__private_attributes__:
        return
    # pydantic adds the name to the fields-set for a field and for an extra attribute alike (``extra="allow"``)
    fields_set = model.__pydantic_fields_set__
    if name not in fields_set:
        object.__setattr__(model, "__pydantic_fields_set__", shared_fields_set((*fields_set, name)))
    if name not in cls.__pydantic_fields__ and model.__pydantic_extra__ is NO_EXTRAS:
        object.__setattr__(model, "__pydantic_extra__", {})


__all__ = ["MOVED_MODULES", "NO_EXTRAS", "class_path", "current_class_path", "loaded_subclass", "share_model_state",
           "shared_fields_set", "shared_names", "unshare_for"]
