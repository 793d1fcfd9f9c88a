"""Hand the next ``Team`` built in this task a run: its id, store, a run to reuse, and tags.

A runner that builds teams from a user's factory (``rolecast eval``) cannot pass ``run_id=`` to a
``Team(...)`` call it does not write. It wraps the factory's call instead::

    with bind_next_team(RunBinding(run_id="eval-x.add.1", store=store, tags={"eval": "eval-x"})):
        team = factory()            # the first Team built in here takes the binding

The first ``Team`` built inside the block with none of ``run_id``, ``reuse`` and ``fork`` takes it
(once: a second team of the factory gets nothing), as a rerun's team takes ``$ROLECAST_REUSE``
(:mod:`rolecast.runs.rerun`) — but held in a context variable, so that runs built concurrently
in other tasks never see it. ``tags`` are written in the run's ``run_started`` event.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any


@dataclass
class RunBinding:
    """What the next team takes: the run id, the store (a path, URL or store), the run it reuses, tags."""

    run_id: str
    store: Any
    reuse: str | None = None
    tags: dict[str, str] = field(default_factory=dict)
    #: set by the team that took it
    taken: bool = False


_NEXT: ContextVar[RunBinding | None] = ContextVar("rolecast_next_team", default=None)


@contextmanager
def bind_next_team(binding: RunBinding) -> Iterator[RunBinding]:
    """Inside the block, the first team built (with no run id of its own) takes ``binding``."""
    token = _NEXT.set(binding)
    try:
        yield binding
    finally:
        _NEXT.reset(token)


def claim_binding() -> RunBinding | None:
    """The binding for the team being built now, if one waits (it is then taken: returned once)."""
    binding = _NEXT.get()
    if binding is None or binding.taken:
        return None
    binding.taken = True
    return binding


__all__ = ["RunBinding", "bind_next_team", "claim_binding"]
