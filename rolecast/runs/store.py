"""The run store: an append-only log of everything a run does, written before it takes effect.

A run is a sequence of :class:`RunEvent` records — run started, round begun, message
published, model call answered, role turn started / finished / failed, round ended,
run stopped — each with the run's id, a sequence number, the round and the role it
belongs to, and a JSON payload. Where a round starts every turn at once and gathers them
(in process), the round's events hold its turns: ``round_started`` lists the roles it
starts and ``round_finished`` each turn that finished, with the id of the message it
returned (a failed turn has its ``turn_failed``); where turns start and end apart (the Ray
runtime's workers), each has a ``turn_started`` and a ``turn_finished`` event of its own.
The log is the single source of truth for resuming a run, replaying it with no model,
and inspecting it (``rolecast runs ...``).

:class:`~rolecast.runs.base.RunStore` is the interface every backend implements (five core
methods, the other capabilities with defaults); :func:`open_store` is the one door from what a
user passes (a path, a ``postgresql://`` URL, a store) to a store.
:class:`SQLiteRunStore` (:mod:`rolecast.runs.sqlite`) is the embedded default: one file, WAL mode, one committed
transaction per write, and a journal (:mod:`rolecast.runs.journal`) that makes a model call
durable with one copy, before the transaction that writes it. The run's
:class:`~rolecast.runs.log.RunLog` decides when to write: a model call answered is durable
before its answer is used, so a crash (even ``kill -9``) loses at most the model calls in
flight. :class:`MemoryRunStore` (:mod:`rolecast.runs.in_memory`) keeps a run in a list, and
:class:`PostgresRunStore` (:mod:`rolecast.runs.postgres`) in a database several machines share; this
module re-exports them.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import ConfigError
from .base import RunInfo, RunStore, run_infos
from .events import (
    CHECKPOINT,
    DURABLE_KINDS,
    EVENT_KINDS,
    LLM_CALL,
    MESSAGE,
    ROUND_FINISHED,
    ROUND_STARTED,
    RUN_STARTED,
    RUN_STOPPED,
    TURN_FAILED,
    TURN_FINISHED,
    TURN_STARTED,
    RunEvent,
    encode_data,
)
from .in_memory import MemoryRunStore
from .postgres import PostgresRunStore
from .sqlite import DEFAULT_STORE_PATH, SQLiteRunStore

#: the URL schemes :func:`open_store` reads as PostgreSQL
POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def configured_store() -> str | Path | None:
    """Where :func:`default_store` is: ``$ROLECAST_STORE`` (a path or a URL; None for ``none``/``off``),
    else ``./.rolecast/runs.db``. Nothing is opened."""
    configured = os.environ.get("ROLECAST_STORE", "").strip()
    if configured.lower() in ("none", "off", "0", "false"):
        return None
    return configured or DEFAULT_STORE_PATH


def default_store() -> RunStore | None:
    """The store a team uses when none is given: ``$ROLECAST_STORE`` (a path, a ``postgresql://`` URL,
    or ``none``/``off`` for no log), else ``./.rolecast/runs.db``."""
    return open_store(configured_store())


def open_store(
    store: str | os.PathLike[str] | RunStore | tuple[str, str] | None, *, read_only: bool = False,
) -> RunStore | None:
    """The one door to a run store, from what a user passed.

    ``store`` is a store (returned as it is), None (no store), a ``postgresql://`` (or ``postgres://``)
    URL, a ``sqlite:///path`` URL or a plain path to a SQLite file, or what :meth:`RunStore.shared`
    gave. ``read_only``: for a reader (``rolecast runs list``): a store that does not exist is a
    :class:`~rolecast.errors.ConfigError` instead of a new, empty store, and one that does is opened
    read-only (a SQLite file on read-only media, a PostgreSQL user allowed only to SELECT); a write is a
    :class:`~rolecast.errors.StoreError`.
    """
    if store is None or isinstance(store, RunStore):
        return store
    if isinstance(store, tuple) and len(store) == 2 and store[0] == "sqlite":
        store = store[1]
    if isinstance(store, os.PathLike):
        store = os.fspath(store)
    if not isinstance(store, str):
        raise ConfigError(f"store must be a path, a postgresql:// URL, a RunStore or None, not {type(store).__name__}")
    text = store.strip()
    if text.startswith(POSTGRES_SCHEMES):
        return PostgresRunStore(text, read_only=read_only)
    if text.startswith("sqlite://"):
        text = text[len("sqlite://"):]
        if text.startswith("/") and not text.startswith("//"):
            text = text[1:] or ":memory:"  # sqlite:///rel.db is relative, sqlite:////abs.db absolute
    if "://" in text:
        raise ConfigError(f"unknown run store URL {text!r}: use a file path, sqlite:///path or postgresql://...")
    if read_only and text != ":memory:" and not os.path.exists(text):
        raise ConfigError(f"no run store at {text} (run a team first, or pass --store PATH|URL)")
    return SQLiteRunStore(text, read_only=read_only and text != ":memory:")


__all__ = [
    "CHECKPOINT",
    "DEFAULT_STORE_PATH",
    "DURABLE_KINDS",
    "EVENT_KINDS",
    "LLM_CALL",
    "MESSAGE",
    "POSTGRES_SCHEMES",
    "ROUND_FINISHED",
    "ROUND_STARTED",
    "RUN_STARTED",
    "RUN_STOPPED",
    "TURN_FAILED",
    "TURN_FINISHED",
    "TURN_STARTED",
    "MemoryRunStore",
    "PostgresRunStore",
    "RunEvent",
    "RunInfo",
    "RunStore",
    "SQLiteRunStore",
    "configured_store",
    "default_store",
    "encode_data",
    "open_store",
    "run_infos",
]

