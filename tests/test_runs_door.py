"""The runs package's one door: open_store resolves a path, a URL or a store; every capability is a
method of the RunStore interface (no backend checks in its callers)."""

from __future__ import annotations

import pickle

import pytest

from rolecast.cli import main
from rolecast.errors import ConfigError, UsageError
from rolecast.runs import (
    MESSAGE,
    RUN_STARTED,
    MemoryRunStore,
    RunEvent,
    RunStore,
    SQLiteRunStore,
    default_store,
    open_store,
)


def test_open_store_reads_a_path_a_sqlite_url_or_a_store(tmp_path, monkeypatch):
    db = tmp_path / "runs.db"
    store = open_store(db)
    assert isinstance(store, SQLiteRunStore) and store.path == db
    store.append(RunEvent("r1", RUN_STARTED, {"idea": "x"}))
    store.close()
    monkeypatch.chdir(tmp_path)
    by_url = open_store("sqlite:///runs.db")  # relative to the working folder, as SQLAlchemy reads it
    assert isinstance(by_url, SQLiteRunStore) and [e.kind for e in by_url.events("r1")] == [RUN_STARTED]
    assert open_store(by_url) is by_url and open_store(None) is None
    by_url.close()
    with pytest.raises(ConfigError, match="unknown run store URL"):
        open_store("mysql://db/runs")
    with pytest.raises(ConfigError, match="no run store at"):
        open_store(tmp_path / "missing.db", read_only=True)
    assert not (tmp_path / "missing.db").exists()  # a reader creates nothing
    with pytest.raises(ConfigError, match="must be a path"):
        open_store(42)  # type: ignore[arg-type]
    monkeypatch.setenv("ROLECAST_STORE", str(db))
    default = default_store()
    assert isinstance(default, SQLiteRunStore) and default.path == db
    default.close()
    monkeypatch.setenv("ROLECAST_STORE", "off")
    assert default_store() is None


def test_capabilities_have_defaults_so_a_minimal_backend_is_a_whole_store():
    class ListStore(RunStore):  # only the five core methods
        def __init__(self) -> None:
            self.inner = MemoryRunStore()

        def append(self, event):
            return self.inner.append(event)

        def extend(self, events):
            self.inner.extend(events)

        def events(self, run_id, kinds=None):
            return self.inner.events(run_id, kinds)

        def runs(self):
            return self.inner.runs()

        def close(self):
            pass

    store = ListStore()
    assert store.stage([RunEvent("r", MESSAGE, {})]) is False  # the caller writes and waits instead
    assert store.home is None and store.shared() is store
    store.flush()
    assert not store.has_run("r")
    store.append(RunEvent("r", MESSAGE, {}))
    assert store.has_run("r")


def test_where_files_go_and_how_workers_open_it_are_the_stores_to_say(tmp_path):
    sqlite = SQLiteRunStore(tmp_path / "runs.db")
    assert sqlite.home == tmp_path
    assert open_store(pickle.loads(pickle.dumps(sqlite.shared()))).path == (tmp_path / "runs.db").resolve()
    sqlite.close()
    with pytest.raises(UsageError, match="in-memory"):
        MemoryRunStore().shared()


def test_the_runs_commands_say_when_there_is_no_store(tmp_path, capsys):
    assert main(["runs", "list", "--store", str(tmp_path / "nothing.db")]) == 2
    assert "no run store at" in capsys.readouterr().err
    assert not (tmp_path / "nothing.db").exists()
