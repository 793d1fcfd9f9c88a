"""Test-wide settings: team runs log to a store in a temporary folder, never into the checkout;
the ``fuzz`` marker runs only when asked for (``pytest -m fuzz``); no test asks a real model by
accident: ``ROLECAST_ALLOW_MODEL_REQUESTS=0`` for the session (and the processes it starts), except
in the tests marked ``integration`` (the embedded model, a real llama.cpp server) or
``allow_model_requests`` (a server the test starts on 127.0.0.1)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator

import pytest
from servers import OPEN_CLIENTS, FakeOpenAIServer

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


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAIServer]:
    """A fake OpenAI-compatible server on 127.0.0.1 (``tests/servers.py``), stopped after the test."""
    server = FakeOpenAIServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
async def close_fast_clients() -> AsyncIterator[None]:
    """Close the clients ``servers.fast_openai_client`` made during the test, on the test's loop.

    Not autouse: an async fixture runs an event loop around every test, which Playwright's sync
    API (tests/test_studio_browser.py) refuses. A module that makes clients uses it by name.
    """
    yield
    while OPEN_CLIENTS:
        await OPEN_CLIENTS.pop().aclose()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip ``fuzz`` tests (10,000 hypothesis examples per parser) unless ``-m`` names the marker."""
    if "fuzz" in (config.getoption("markexpr") or ""):
        return
    skip = pytest.mark.skip(reason="nightly fuzzing: run with -m fuzz")
    for item in items:
        if "fuzz" in item.keywords:
            item.add_marker(skip)
