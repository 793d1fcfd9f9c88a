"""Shared test helpers (a plain module; test files import it as ``support``)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_example(
    *args: str, timeout: float = 120, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``python <args>`` from the repository root as a new user would: no API keys,
    no rolecast settings from this machine, the checkout importable. Runs are logged to a
    throwaway store (not into the checkout) unless ``env`` names one."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ROLECAST_"))}
    base["PYTHONPATH"] = str(ROOT)
    base["ROLECAST_STORE"] = os.path.join(tempfile.gettempdir(), f"rolecast-test-runs-{os.getpid()}.db")
    env = {**base, **(env or {})}
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, cwd=ROOT, env=env, timeout=timeout
    )
