"""Dicts that share their key table: how many models alike hold their fields in few bytes (issue 38).

CPython keeps an object's attributes in a "split" dict (PEP 412): the keys once, in the class, and
each instance only its values. A copy of such a dict shares the key table too. A model whose
field dict is made as a copy of a template like that — the same keys in the same order, its own
values filled in — holds a message's eight fields in 136 bytes where a dict of its own takes 272,
a role's eighteen in 216 where pydantic's takes 464. It is still a plain ``dict``, read and set as
before; only its storage is shared. Where the interpreter makes no smaller dict (another version
or implementation), there is no template and the models keep the dicts pydantic gives them.
"""

from __future__ import annotations

import sys
from typing import Any


def key_sharing_template(names: tuple[str, ...]) -> dict[str, Any] | None:
    """A dict of ``names`` (in that order, all None) whose copies share its key table, or None where
    no such copy is smaller than a plain dict of the names.

    Made as CPython makes one: the names set one by one on instances of a class of their own; the
    values part the class gives an instance shrinks over the first few instances to the names'
    count, so instances are made until a copy stops getting smaller.
    """
    holder_class = type("FieldKeys", (), {})
    plain_size = sys.getsizeof(dict.fromkeys(names))
    template: dict[str, Any] | None = None
    size = plain_size
    for _ in range(64):
        holder = holder_class()
        for name in names:
            setattr(holder, name, None)
        shared = holder.__dict__
        if tuple(shared) != names:
            break
        copied = sys.getsizeof(shared.copy())
        if copied >= size:
            if template is not None:
                break  # as small as it gets
            continue
        template, size = shared, copied
    return template


__all__ = ["key_sharing_template"]
