"""Runs: the log of everything a team run does, where it is stored, and how it is read back.

One door for every reader and writer of runs (``Team``, the CLI, a web page):

* :func:`open_store` — a store from a path, a ``sqlite:///`` or ``postgresql://`` URL, or a store;
  :func:`default_store` — ``$ROLECAST_STORE`` or ``./.rolecast/runs.db``.
* :class:`RunStore` — the interface of every backend (:class:`SQLiteRunStore`,
  :class:`PostgresRunStore`, :class:`MemoryRunStore`), every capability a method with a default.
* :class:`RunEvent` and the event kinds (:mod:`rolecast.runs.events`).
* :class:`RunLog` — one run's write-ahead log while it runs (:mod:`rolecast.runs.log`).
* :mod:`rolecast.runs.inspection` — the list, a timeline, the message graph, JSON lines.

The README's *Durable runs* section describes them for users.
"""

from __future__ import annotations

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
    STATE_INVALID,
    TURN_FAILED,
    TURN_FINISHED,
    TURN_STARTED,
    RunEvent,
    encode_data,
)
from .ids import RUN_ID_PATTERN, check_run_id
from .inspection import export_run, graph_run, list_runs, run_summary, show_run
from .log import RunLog, fingerprint, new_run_id
from .postgres import PostgresRunStore
from .requests import CallRequest, request_of, requests_of
from .store import DEFAULT_STORE_PATH, MemoryRunStore, SQLiteRunStore, default_store, open_store

__all__ = [
    "CHECKPOINT",
    "DEFAULT_STORE_PATH",
    "DURABLE_KINDS",
    "EVENT_KINDS",
    "LLM_CALL",
    "MESSAGE",
    "ROUND_FINISHED",
    "ROUND_STARTED",
    "RUN_ID_PATTERN",
    "RUN_STARTED",
    "RUN_STOPPED",
    "STATE_INVALID",
    "TURN_FAILED",
    "TURN_FINISHED",
    "TURN_STARTED",
    "CallRequest",
    "MemoryRunStore",
    "PostgresRunStore",
    "RunEvent",
    "RunInfo",
    "RunLog",
    "RunStore",
    "SQLiteRunStore",
    "check_run_id",
    "default_store",
    "encode_data",
    "export_run",
    "fingerprint",
    "graph_run",
    "list_runs",
    "new_run_id",
    "open_store",
    "request_of",
    "requests_of",
    "run_infos",
    "run_summary",
    "show_run",
]
