"""Test-wide settings: team runs log to a store in a temporary folder, never into the checkout."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _run_store_in_tmp(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROLECAST_STORE", str(tmp_path_factory.getbasetemp() / "runs.db"))
