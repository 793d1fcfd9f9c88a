"""Test-wide settings: team runs log to a store in a temporary folder, never into the checkout;
the ``fuzz`` marker runs only when asked for (``pytest -m fuzz``)."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _run_store_in_tmp(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROLECAST_STORE", str(tmp_path_factory.getbasetemp() / "runs.db"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip ``fuzz`` tests (10,000 hypothesis examples per parser) unless ``-m`` names the marker."""
    if "fuzz" in (config.getoption("markexpr") or ""):
        return
    skip = pytest.mark.skip(reason="nightly fuzzing: run with -m fuzz")
    for item in items:
        if "fuzz" in item.keywords:
            item.add_marker(skip)
