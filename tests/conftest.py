"""Shared pytest set-up: the ``fuzz`` marker runs only when asked for (``pytest -m fuzz``)."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip ``fuzz`` tests (10,000 hypothesis examples per parser) unless ``-m`` names the marker."""
    if "fuzz" in (config.getoption("markexpr") or ""):
        return
    skip = pytest.mark.skip(reason="nightly fuzzing: run with -m fuzz")
    for item in items:
        if "fuzz" in item.keywords:
            item.add_marker(skip)
