"""Test-wide settings: team runs log to a store in a temporary folder, never into the checkout;
the ``fuzz`` marker runs only when asked for (``pytest -m fuzz``); no test asks a real model by
accident: ``ROLECAST_ALLOW_MODEL_REQUESTS=0`` for the session (and the processes it starts), except
in the tests marked ``integration`` (the embedded model, a real llama.cpp server) or
``allow_model_requests`` (a server the test starts on 127.0.0.1)."""

from __future__ import annotations

import os

import pytest

from rolecast.llm.base import ALLOW_MODEL_REQUESTS_ENV

os.environ[ALLOW_MODEL_REQUESTS_ENV] = "0"


@pytest.fixture(autouse=True)
def _model_requests(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Real model requests only where a test says it makes them (see the module docstring)."""
    if request.node.get_closest_marker("integration") or request.node.get_closest_marker("allow_model_requests"):
        monkeypatch.setenv(ALLOW_MODEL_REQUESTS_ENV, "1")


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
