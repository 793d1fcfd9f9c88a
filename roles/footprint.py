"""What keeps a role small: the parts of its pydantic state that roles alike can share or store compactly.

A million roles of a class differ in little (a name, their followers): pydantic's per-instance dicts
cost them most of their bytes. Two helpers, both run at the end of ``Role.__init__``:

* :func:`shared_private`: the private attributes (``_llm``, ``_context`` …, a 272-byte dict) of the
  roles whose values are the same objects are one :class:`SharedPrivate` dict, swapped for another
  when a role sets one of them (never changed in place).
* :class:`Addresses`: the names a role answers to (its name, profile and class path: a 216-byte set)
  are its name and a frozenset of the others that the roles of a class and profile share.
* :func:`compact_fields`: the field dict pydantic builds (18 keys, 464 bytes) becomes a key-sharing
  dict of the same keys and values (CPython's instance-dict layout: the keys once per class, each
  role its values, 216 bytes; see :mod:`rolecast.core.compact`); it is still the role's
  ``__dict__``, read and set as before.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Iterator
from collections.abc import Set as AbstractSet
from typing import Any

from rolecast.core.classes import share_model_state, shared_names
from rolecast.core.compact import key_sharing_template


class SharedPrivate(dict[str, Any]):
    """The private attributes (``_llm``, ``_context`` …) of every role whose values are the same objects:
    one dict for them all (a million roles of a team hold one, not a million of 272 bytes). A role
    never changes it in place: setting one of its private attributes gives it the dict of its new
    values (see :func:`shared_private` and :meth:`Inbox.__setattr__`)."""

    __slots__ = ("__weakref__",)


#: (the names, then the ids of the values) → the dict the roles with those values share; at most
#: _MAX_SHARED of them, so that roles whose values are their own (a model each) do not grow it: past
#: that they keep dicts of their own, as before
_SHARED_PRIVATE: weakref.WeakValueDictionary[tuple[Any, ...], SharedPrivate] = weakref.WeakValueDictionary()
_MAX_SHARED = 256


def shared_private(private: dict[str, Any]) -> dict[str, Any]:
    """The shared dict holding the same private values as ``private`` (each the same object), or
    ``private`` itself — as a dict of its own — when there are already too many shared ones."""
    key = (*private, *map(id, private.values()))  # (the shared dict holds the values: their ids stay theirs)
    found = _SHARED_PRIVATE.get(key)
    if found is not None:
        return found
    if len(_SHARED_PRIVATE) >= _MAX_SHARED:
        return dict(private) if type(private) is SharedPrivate else private
    shared = _SHARED_PRIVATE[key] = SharedPrivate(private)
    return shared



class Addresses(AbstractSet[str]):
    """``role.addresses`` as a role keeps it: a set (``in``, iteration, ``==``, ``|``, ``isdisjoint``,
    ``issubset`` …; immutable: :meth:`Role.set_addresses` gives another) stored as the role's own name
    and a frozenset of its other addresses shared by every role that has the same ones (48 bytes a
    role, where a set of three names took 216). Made by :func:`compact_addresses`."""

    __slots__ = ("_name", "_others")

    def __init__(self, name: str, others: frozenset[str]) -> None:
        self._name = name
        self._others = others  # (never holds the name)

    def __contains__(self, item: object) -> bool:
        return item == self._name or item in self._others

    def __iter__(self) -> Iterator[str]:
        yield self._name
        yield from self._others

    def __len__(self) -> int:
        return 1 + len(self._others)

    def isdisjoint(self, other: Iterable[Any]) -> bool:
        if not isinstance(other, AbstractSet):
            other = set(other)
        return self._name not in other and self._others.isdisjoint(other)

    @classmethod
    def _from_iterable(cls, it: Iterable[Any]) -> set[Any]:
        return set(it)  # (``a | b``, ``a & b`` …: a plain set)

    def copy(self) -> set[str]:
        return set(self)

    def union(self, *others: Iterable[str]) -> set[str]:
        return set(self).union(*others)

    def intersection(self, *others: Iterable[str]) -> set[str]:
        return set(self).intersection(*others)

    def difference(self, *others: Iterable[str]) -> set[str]:
        return set(self).difference(*others)

    def issubset(self, other: Iterable[str]) -> bool:
        return set(self).issubset(other)

    def issuperset(self, other: Iterable[str]) -> bool:
        return set(self).issuperset(other)

    def __repr__(self) -> str:
        return repr(set(self))

    def __reduce__(self) -> tuple[Any, ...]:
        return (Addresses, (self._name, self._others))


def compact_addresses(name: str, addresses: Iterable[str]) -> AbstractSet[str]:
    """``addresses`` as a role keeps them: an :class:`Addresses` when its ``name`` is among them, else the
    frozenset of them shared by the roles with the same (see :func:`rolecast.core.classes.shared_names`)."""
    names = set(addresses)
    if name in names:
        names.discard(name)
        return Addresses(name, shared_names(names))
    return shared_names(names)


def addresses_as_set(self: Any, addresses: Iterable[str]) -> set[str]:
    """``role.addresses`` as a dump records it: the set it reads as (a field serializer of Role's: pydantic
    knows one by its first parameter's name, ``self``)."""
    return set(addresses)


#: the keys of a field dict, in order → a key-sharing dict with those keys (values None), or None where
#: this Python makes none smaller: each role's field dict is a copy of it
_KEY_SHARING: dict[tuple[str, ...], dict[str, Any] | None] = {}


def compact_fields(model: Any) -> None:
    """Store ``model``'s field dict in the key-sharing layout (see the module docstring), if smaller."""
    fields = model.__dict__
    keys = tuple(fields)
    if keys in _KEY_SHARING:
        template = _KEY_SHARING[keys]
    else:
        template = _KEY_SHARING[keys] = key_sharing_template(keys)
    if template is not None:
        compact = template.copy()
        compact.update(fields)
        object.__setattr__(model, "__dict__", compact)


def compact_role(role: Any) -> None:
    """At the end of ``Role.__init__``: its fields-set and empty extras become the ones every role with
    the same shares (setting a field swaps, see :meth:`roles.inbox.Inbox.__setattr__`), so do its
    private attributes (:func:`shared_private`), and its field dict becomes key-sharing."""
    share_model_state(role)
    if role.__pydantic_private__ is not None:
        object.__setattr__(role, "__pydantic_private__", shared_private(role.__pydantic_private__))
    compact_fields(role)


__all__ = ["Addresses", "SharedPrivate", "addresses_as_set", "compact_addresses", "compact_fields", "compact_role",
           "shared_private"]
