"""One writer per run: a lease in the store, held by one process, renewed by a heartbeat.

A run log that writes a run first takes the run's lease (:meth:`RunStore.acquire
<rolecast.runs.base.RunStore.acquire>`): a row naming the holder — host, pid, the pid's start
time, a random token — and since when it holds it, with a heartbeat the holder renews every few
seconds. Another process opening the same run meets the row and gets
:class:`~rolecast.errors.RunInUse`, unless the holder is gone:

* on the same host, at once: the pid is not alive, or is alive but started at another time (the
  pid was reused), so a resume right after ``kill -9`` does not wait; or it is this very process,
  which gave the lease up but could not delete its row (the store's server was unreachable): a
  retry in the same process takes its own lease back;
* on another host, when its heartbeat is older than the lease's time to live.

Each backend stores the row (SQLite: table ``leases``; PostgreSQL: ``rolecast_leases``); the
decision "is that holder gone?" is :func:`gone`, the same for all.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from loguru import logger

if TYPE_CHECKING:
    from .base import RunStore

#: a holder whose heartbeat is older than this (seconds) is gone, when it is on another host
LEASE_TTL = 60.0
#: how often a holder renews its heartbeat (seconds)
HEARTBEAT = 10.0

HOST = socket.gethostname()
#: the tokens of leases this process gave up but could not delete from the store (its connection was
#: lost): the row still names this process, yet nothing here holds it, so this process may take it again
_abandoned: set[str] = set()


def process_started(pid: int) -> float | None:
    """When process ``pid`` started (clock ticks since boot, from ``/proc``); None when unknown
    (not Linux) and -1.0 when there is no such process or it is a zombie (it died)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode(errors="replace")
    except FileNotFoundError:
        return -1.0
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2:].split()  # (the command in parentheses may hold spaces)
    if not fields or fields[0] in ("Z", "X"):
        return -1.0
    return float(fields[19])


def alive(pid: int, started: float | None) -> bool:
    """Whether process ``pid`` of this host, started at ``started``, still runs."""
    now_started = process_started(pid)
    if now_started is not None:
        return now_started >= 0 and (started is None or started == now_started)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass
class Holder:
    """Who holds (or asks for) a run's lease."""

    host: str = HOST
    pid: int = field(default_factory=os.getpid)
    started: float | None = field(default_factory=lambda: process_started(os.getpid()))
    token: str = field(default_factory=lambda: uuid.uuid4().hex)
    since: float = field(default_factory=time.time)
    heartbeat: float = field(default_factory=time.time)


def gone(holder: Holder, *, now: float | None = None, ttl: float = LEASE_TTL) -> bool:
    """Whether ``holder`` no longer holds its lease: on this host, its process is dead; on another,
    its heartbeat is older than ``ttl``."""
    if holder.host == HOST:
        if holder.pid == os.getpid() and holder.token in _abandoned:
            return True  # this process's own lease, given up while the store could not be reached
        return not alive(holder.pid, holder.started)
    return (time.time() if now is None else now) - holder.heartbeat > ttl


class Lease:
    """This process's hold on one run: taken by :meth:`acquire`, renewed by a daemon thread every
    :data:`HEARTBEAT` seconds, given back by :meth:`release` (or when the process exits)."""

    def __init__(self, store: RunStore, run_id: str, *, heartbeat: float = HEARTBEAT):
        self.store = store
        self.run_id = run_id
        self.holder = Holder()
        self.interval = heartbeat
        self.held = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def acquire(self) -> Lease:
        """Take the lease (:class:`~rolecast.errors.RunInUse` if a live process holds it)."""
        if self.held:
            return self
        self.holder.since = self.holder.heartbeat = time.time()
        self.store.acquire(self.run_id, self.holder)
        self.held = True
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=_beat, args=(weakref.ref(self), self._stop, self.interval),
            name=f"rolecast-lease-{self.run_id}", daemon=True,
        )
        self._thread.start()
        return self

    def renew(self) -> None:
        if self.held:
            self.holder.heartbeat = time.time()
            self.store.renew(self.run_id, self.holder)

    def release(self) -> None:
        """Give the lease back (nothing when not held)."""
        if not self.held:
            return
        self.held = False
        self._stop.set()
        try:
            self.store.release(self.run_id, self.holder)
        except Exception as exc:  # (a closed store: the next opener finds this process gone anyway)
            # a lost connection leaves the row naming this live process: it may take the run again itself
            _abandoned.add(self.holder.token)
            logger.debug("run {}: could not release its lease: {}", self.run_id, exc)


def _beat(ref: weakref.ref[Lease], stop: threading.Event, interval: float) -> None:
    while not stop.wait(interval):
        lease = ref()
        if lease is None or not lease.held:
            return
        try:
            lease.renew()
        except Exception as exc:  # a closed store, a lost connection: the run's own writes will say so
            logger.warning("run {}: could not renew its lease: {}", lease.run_id, exc)
            return
        del lease


__all__ = ["HEARTBEAT", "HOST", "LEASE_TTL", "Holder", "Lease", "alive", "gone", "process_started"]
