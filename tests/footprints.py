"""What building the simulation's agents costs, in bytes an agent: the measurement the footprint tests
share (a plain module they import, ``from footprints import built_bytes_per_agent``)."""

from __future__ import annotations

import gc
import sys
import tracemalloc
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def built_bytes_per_agent(agents: int = 2000, **team: Any) -> float:
    """tracemalloc's bytes an agent for building ``examples/simulation.py``'s team of ``agents``
    (``team`` goes to its ``build_team``: ``store=None`` …), its class-level caches made first."""
    sys.path.insert(0, str(ROOT / "examples"))
    import simulation

    simulation.build_team(10, llm=simulation.instant_model(), **team).close()  # class-level caches made
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        built = simulation.build_team(agents, llm=simulation.instant_model(), **team)
        gc.collect()
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    per_agent = sum(d.size_diff for d in after.compare_to(before, "filename")) / agents
    built.close()
    return per_agent
