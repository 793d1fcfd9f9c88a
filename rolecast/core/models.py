"""The framework's pydantic base: private attributes read at the speed of a dict.

pydantic keeps a model's private attributes (``_llm``, ``_context`` …) in ``__pydantic_private__``
and reads them through ``BaseModel.__getattr__``, which first probes the attribute's
declaration for a descriptor (an ``AttributeError`` raised and caught on every read): about
3 µs a read, and a react step reads a dozen (``bench/bench_framework.py`` (d), the react step).
:class:`Model` looks in the dict first and falls back on pydantic for everything else, so behaviour
is pydantic's own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel


class Model(BaseModel):
    """A ``BaseModel`` whose private attributes are fast to read (see the module docstring)."""

    if not TYPE_CHECKING:  # type checkers keep seeing pydantic's attributes, not "anything goes"

        def __getattr__(self, item: str) -> Any:
            try:  # object.__getattribute__: an unset slot must not come back here
                return object.__getattribute__(self, "__pydantic_private__")[item]
            except (KeyError, TypeError, AttributeError):  # not a private attribute, or no private state yet
                return super().__getattr__(item)


__all__ = ["Model"]
