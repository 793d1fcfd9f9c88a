"""Shared test helpers (a plain module; test files import it as ``support``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_example(
    *args: str, timeout: float = 120, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``python <args>`` from the repository root as a new user would: no API keys,
    no rolecast settings from this machine (but ``env``), the checkout importable."""
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ROLECAST_"))}, **(env or {})}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, cwd=ROOT, env=env, timeout=timeout
    )
