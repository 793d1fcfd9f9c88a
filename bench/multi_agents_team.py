"""The README's team (examples/build_customized_multi_agents.py) for the held-out evalset beside this file."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))

from build_customized_multi_agents import build_team

__all__ = ["build_team"]
