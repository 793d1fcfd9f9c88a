"""A throwaway PostgreSQL server on 127.0.0.1 for tests: initdb into a temp dir, start, stop, delete.

The server binaries come from the system (Debian: ``apt-get install postgresql``, which
puts them under ``/usr/lib/postgresql/<version>/bin``). PostgreSQL refuses to run as
root, so when the tests run as root the server runs as the ``postgres`` system user
(created by that package).
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from servers import free_port


def find_bin() -> Path | None:
    """The directory holding initdb and pg_ctl, or None when PostgreSQL is not installed."""
    found = shutil.which("pg_ctl")
    if found and shutil.which("initdb"):
        return Path(found).parent
    for candidate in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if (Path(candidate) / "pg_ctl").exists():
            return Path(candidate)
    return None


class PostgresServer:
    """Start with :meth:`start`, connect with :attr:`dsn`, stop with :meth:`stop`."""

    def __init__(self) -> None:
        bindir = find_bin()
        if bindir is None:
            raise RuntimeError("PostgreSQL is not installed (apt-get install postgresql)")
        self.bindir = bindir
        self.port = free_port()
        self.tmp = Path(tempfile.mkdtemp(prefix="rolecast-pg-"))
        self.data = self.tmp / "data"
        self.as_user: str | None = "postgres" if os.geteuid() == 0 else None
        self.user = self.as_user or os.environ.get("USER") or "postgres"

    @property
    def dsn(self) -> str:
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/postgres"

    def _run(self, *args: str) -> None:
        cmd = [str(self.bindir / args[0]), *args[1:]]
        if self.as_user:
            cmd = ["runuser", "-u", self.as_user, "--", *cmd]
        subprocess.run(cmd, check=True, capture_output=True, timeout=120)

    def start(self) -> PostgresServer:
        if self.as_user:
            shutil.chown(self.tmp, self.as_user)
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", self.user, "--no-sync")
        self._run(
            "pg_ctl", "-D", str(self.data), "-l", str(self.tmp / "log"), "-w", "-t", "60", "-o",
            f"-h 127.0.0.1 -p {self.port} -k {self.tmp} -F -c max_connections=50", "start",
        )
        deadline = time.time() + 30
        while not (self.data / "postmaster.pid").exists() and time.time() < deadline:
            time.sleep(0.1)
        return self

    def stop(self) -> None:
        try:
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        except (subprocess.SubprocessError, OSError):
            pass
        shutil.rmtree(self.tmp, ignore_errors=True)
