"""Run model-written Python in a separate, confined process tree — never in the framework's.

:func:`run_python` starts a small supervisor (``actions/tools/_supervisor.py``, standard
library only) that runs ``python -I`` (isolated mode: no ``PYTHON*`` variables, no user
site-packages, no script directory on ``sys.path``) in a fresh temporary directory that
is removed afterwards. The supervisor is a child subreaper: every process the code
starts — also one that calls ``setsid`` or forks twice — stays in its tree, and the
whole tree is killed when the code ends, at the timeout, past its memory or process
cap, or when the caller is cancelled. The code gets:

* a scrubbed environment: a short whitelist (``PATH``, locale, ``HOME``/``TMPDIR``
  pointing into the sandbox) plus only what the caller passes in ``env``;
* resource limits (``RLIMIT_AS``, ``RLIMIT_CPU``, ``RLIMIT_FSIZE``, ``RLIMIT_NOFILE``,
  ``RLIMIT_CORE`` = 0, ``RLIMIT_NPROC`` where it counts), a cap on the processes and
  on the memory of the whole tree (a cgroup where one can be made, else watched by the
  supervisor), its own session;
* as root: a uid of its own — also when the interpreter lies under a directory other
  users cannot search (``/root/.pyenv``): the supervisor then starts it through a handle
  to its installation directory, opened while it is still root — else (no Linux ``/proc``)
  uid 0 with no capabilities at all, and a warning that says how to get a uid of its own;
  ``PR_SET_NO_NEW_PRIVS`` always;
* a Landlock domain where the kernel has Landlock: it reads only the system, the
  interpreter and ``read_paths``, writes only in its directory and ``write_paths``,
  opens no TCP connection (unless ``network=True``), and cannot signal or ptrace
  anything outside the sandbox;
* stdout and stderr in files the framework reads afterwards (capped), never a pipe
  that a daemon could hold open; stdin closed.

The framework process makes itself non-dumpable (``PR_SET_DUMPABLE`` 0) the first time
it runs code, so that a process of the same user cannot read its memory or environment
through ``/proc``, nor ptrace it.

:class:`PythonSession` keeps definitions between calls of one run by *replaying the
source* of earlier successful cells (their output discarded) in each fresh process:
nothing persists in a long-lived process and nothing ever runs in the framework.

On Linux, where ``unshare`` is allowed, the supervisor also runs in its own PID and
mount namespaces with a fresh ``/proc`` and in its own network namespace (no network)
unless ``network=True``. What holds with and without namespaces is in the README's
table ("What the sandbox guarantees"); :func:`sandbox_report` says what this machine
provides.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import signal
import site
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loguru import logger

from rolecast.errors import SandboxError

from .confinement import (
    interpreter_handle,
    landlock_abi,
    landlock_rules,
    namespace_prefix,
    protect_framework,
    sandbox_uid,
    uid_via_handle,
    usable_by_others,
)

#: in the supervisor's configuration, stands for ``/proc/self/fd/<the i-th handle>`` (see ``handles``)
HANDLE = "@rolecast-handle-{}@"

# Runs in the child before the model's code (the supervisor has confined it): replay earlier cells
# with their output discarded, then run the cell. ``code.InteractiveInterpreter``
# runs every cell in one shared namespace, like a REPL; "single" mode compilation of
# a trailing expression echoes its value when asked to.
_BOOTSTRAP = r"""
import ast, code, json, os, site, sys
cfg = json.loads(sys.argv[1])
for directory in cfg.get("site", ()):  # a virtual environment's packages (an interpreter started by handle)
    site.addsitedir(directory)
if sys.executable.startswith("/proc/self/"):  # started by handle: a path this process's children reach too
    sys.executable = sys._base_executable = f"/proc/{os.getpid()}/" + sys.executable[len("/proc/self/"):]

class Cell(code.InteractiveInterpreter):
    failed = False
    def showtraceback(self):
        self.failed = True
        super().showtraceback()
    def showsyntaxerror(self, filename=None, **kwargs):
        self.failed = True
        super().showsyntaxerror(filename)

namespace = {"__name__": "__main__", "__builtins__": __builtins__}

def run(path, echo):
    with open(path, encoding="utf-8") as f:
        source = f.read()
    cell = Cell(namespace)
    try:
        tree = ast.parse(source, path)
        last = tree.body[-1] if tree.body else None
        if echo and isinstance(last, ast.Expr):
            parts = [(ast.Module(tree.body[:-1], []), "exec"), (ast.Interactive([last]), "single")]
        else:
            parts = [(tree, "exec")]
        compiled = [compile(node, path, mode) for node, mode in parts]
    except (SyntaxError, ValueError, OverflowError, MemoryError, RecursionError):
        cell.showsyntaxerror(path)
        return False
    for c in compiled:
        cell.runcode(c)
        if cell.failed:
            return False
    return True

def quiet(path):
    sys.stdout.flush(); sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1); os.dup2(devnull, 2)
    try:
        return run(path, False)
    except SystemExit:  # the cell ended itself early, as it did when it first ran
        return True
    finally:
        sys.stdout.flush(); sys.stderr.flush()
        os.dup2(saved[0], 1); os.dup2(saved[1], 2)
        for fd in (*saved, devnull):
            os.close(fd)

for i, path in enumerate(cfg["setup"]):
    if not quiet(path):
        print(f"warning: replaying earlier cell {i + 1} failed", file=sys.stderr)
sys.argv = [cfg["main"]]
sys.exit(0 if run(cfg["main"], cfg["echo"]) else 1)
"""

# what the child may see of the environment; everything else is dropped
_ENV_WHITELIST = ("PATH", "SYSTEMROOT")
_SUPERVISOR = str(Path(__file__).with_name("_supervisor.py"))
_BACKSTOP = 5.0  # seconds the framework waits past the timeout for the supervisor's own kill
_POLL = 0.1  # seconds between the supervisor's looks at the tree's memory and size
_USE_CGROUPS = True  # tests turn it off to check the supervisor's own caps


@dataclass
class SandboxResult:
    """What a sandboxed run produced.

    ``returncode`` is negative when the process was killed by a signal (``-9`` after
    a timeout). ``truncated`` says that stdout or stderr passed ``max_output``: stdout
    keeps its beginning, stderr its end (where the exception is). ``killed_for`` says
    why the supervisor stopped the tree early (its memory or process cap).
    """

    stdout: str
    stderr: str
    returncode: int
    timed_out: bool = False
    truncated: bool = False
    duration: float = 0.0
    timeout: float | None = field(default=None, repr=False)
    killed_for: str | None = None

    @property
    def ok(self) -> bool:
        """The code ran to the end without an exception."""
        return self.returncode == 0 and not self.timed_out and not self.killed_for

    @property
    def error(self) -> str:
        """A one-line reason when not :attr:`ok`: the exception's last line, a timeout, a signal."""
        if self.timed_out:
            limit = f" after {self.timeout:g} s" if self.timeout is not None else ""
            return f"TimeoutError: the code did not finish{limit} and was stopped"
        if self.killed_for:
            return f"the sandbox stopped the code: it used {self.killed_for}"
        if self.returncode == 0:
            return ""
        lines = [line for line in self.stderr.splitlines() if line.strip()]
        if self.returncode < 0:
            try:
                name = signal.Signals(-self.returncode).name
            except ValueError:
                name = f"signal {-self.returncode}"
            hint = " (CPU time limit)" if name == "SIGXCPU" else ""
            return f"the process was killed by {name}{hint}"
        return lines[-1].strip() if lines else f"the process exited with status {self.returncode}"

    def observation(self) -> str:
        """What a tool reports to the model: stdout, then the error line if the run failed."""
        parts = [self.stdout.rstrip()] if self.stdout.strip() else []
        if not self.ok:
            parts.append(self.error)
        if self.truncated:
            parts.append("[output truncated]")
        return "\n".join(parts)


def sandbox_env(workdir: str, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The child's environment: a whitelist, locale and home in ``workdir``, plus ``extra``."""
    env = {k: os.environ[k] for k in _ENV_WHITELIST if k in os.environ}
    env.setdefault("PATH", os.defpath)
    env.update({"LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "HOME": workdir, "TMPDIR": workdir})
    env.update({str(k): str(v) for k, v in (extra or {}).items()})
    return env


def _limits(
    timeout: float, memory_mb: int | None, max_file_mb: int | None, max_processes: int | None, own_uid: bool
) -> dict[str, int]:
    limits = {
        "RLIMIT_CORE": 0,
        "RLIMIT_NOFILE": 256,
        # a second line of defence behind the wall-clock timeout
        "RLIMIT_CPU": math.ceil(timeout) + 1,
    }
    if memory_mb is not None:
        limits["RLIMIT_AS"] = memory_mb * 1024 * 1024  # one process; the tree's total is the supervisor's
    if max_file_mb is not None:
        limits["RLIMIT_FSIZE"] = max_file_mb * 1024 * 1024
    if max_processes is not None and own_uid:
        # counts every process of the uid: exact only for a uid of the sandbox's own
        limits["RLIMIT_NPROC"] = max_processes
    return limits


def _read_output(path: str) -> str:
    with contextlib.suppress(OSError), open(path, "rb") as f:
        return f.read().decode("utf-8", errors="replace")
    return ""


async def _uid_for(user: str | int | None, read_paths: Sequence[str | os.PathLike[str]],
                   write_paths: Sequence[str | os.PathLike[str]]) -> int | None:
    """The uid a call runs as: ``user``'s, else the sandbox's own, else None (uid 0 without capabilities)."""
    uid = await sandbox_uid(user) if os.name == "posix" else None
    if uid is not None and user is None:
        closed = [os.fspath(p) for p in write_paths if not usable_by_others(os.fspath(p), write=True)]
        closed += [os.fspath(p) for p in read_paths if not usable_by_others(os.fspath(p), write=False)]
        if closed:
            # paths the caller granted that a uid of the sandbox's own could not use: this call runs
            # as uid 0 without capabilities (the owner's access, nothing more), as it must to use them
            logger.info("sandbox: {} not usable by other users; this code runs as uid 0 without capabilities",
                        ", ".join(closed))
            return None
    return uid


async def run_python(
    code: str,
    *,
    timeout: float = 10,
    memory_mb: int | None = 512,
    max_output: int = 20_000,
    env: Mapping[str, str] | None = None,
    setup: Sequence[str] = (),
    echo_last_expression: bool = False,
    max_file_mb: int | None = 64,
    max_processes: int | None = 64,
    user: str | int | None = None,
    namespaces: bool = True,
    network: bool = False,
    read_paths: Sequence[str | os.PathLike[str]] = (),
    write_paths: Sequence[str | os.PathLike[str]] = (),
) -> SandboxResult:
    """Run ``code`` in a sandboxed ``python -I`` process tree and return what it printed.

    Args:
        code: the source to run, as a script (``__name__ == "__main__"``).
        timeout: wall-clock seconds; then the whole process tree is killed.
        memory_mb: memory of the whole tree (and address space of each process); None for no limit.
        max_output: bytes kept of stdout and of stderr each; the rest is dropped.
        env: variables to give the child on top of the minimal whitelist.
        setup: earlier cells to run first, in the same namespace, with their output
            discarded (how :class:`PythonSession` restores state).
        echo_last_expression: print the value of a trailing expression, like a REPL.
        max_file_mb: largest file the code may write (``RLIMIT_FSIZE``).
        max_processes: processes the tree may hold at once; None for no cap.
        user: run as this user or uid (needs root); by default, as root, a fresh uid (the
            interpreter reached by path, or through a handle where other users cannot search
            the directories above it); uid 0 with no capabilities only where neither works
            (a warning says what to do) or for a call whose ``read_paths`` / ``write_paths``
            other users cannot use.
        namespaces: on Linux, also isolate the tree in its own PID/mount (and network)
            namespaces when ``unshare`` allows it.
        network: keep network access (otherwise it has none with namespaces, and no TCP
            under Landlock).
        read_paths: files or directories the code may also read (under Landlock it reads
            only the system and the interpreter otherwise).
        write_paths: files or directories the code may also write (besides its own directory).

    Raises:
        SandboxError: the sandbox could not start the code (not: the code failed —
            that is a result with ``ok == False``).
    """
    if timeout <= 0:
        raise SandboxError("timeout must be positive")
    started = time.monotonic()
    protect_framework()
    uid = await _uid_for(user, read_paths, write_paths)
    with tempfile.TemporaryDirectory(prefix="rolecast-sandbox-", ignore_cleanup_errors=True) as workdir, \
            tempfile.TemporaryDirectory(prefix="rolecast-output-", ignore_cleanup_errors=True) as outdir:  # fmt: skip
        prefix = await namespace_prefix(network) if namespaces else None
        if prefix and uid is not None and "--user" in prefix:
            prefix = None  # a user namespace maps one uid only: the sandbox's own uid matters more
        cfg = _config(workdir, outdir, code, setup, echo_last_expression, uid, network, env,
                      _limits(timeout, memory_mb, max_file_mb, max_processes, uid is not None),
                      read_paths, write_paths, private_proc=bool(prefix))  # fmt: skip
        cfg.update(timeout=timeout, memory=memory_mb * 1024 * 1024 if memory_mb else None,
                   max_processes=max_processes, max_output=max_output)  # fmt: skip
        argv = [sys.executable, "-I", "-B", _SUPERVISOR, json.dumps(cfg)]
        status = await _supervise([*(prefix or []), *argv], timeout)
        if status.get("error"):
            raise SandboxError(f"could not start the sandboxed interpreter: {status['error']}")
        stdout, stderr = _read_output(cfg["stdout"]), _read_output(cfg["stderr"])
        written = status.get("output_bytes") or [0, 0]
    returncode = status.get("returncode")
    return SandboxResult(
        stdout=stdout,
        stderr=stderr,
        returncode=returncode if isinstance(returncode, int) else -signal.SIGKILL,
        timed_out=bool(status.get("timed_out")),
        truncated=any(n > max_output for n in written),
        duration=time.monotonic() - started,
        timeout=timeout,
        killed_for=status.get("killed_for"),
    )


def _config(
    workdir: str,
    outdir: str,
    code: str,
    setup: Sequence[str],
    echo: bool,
    uid: int | None,
    network: bool,
    env: Mapping[str, str] | None,
    limits: dict[str, int],
    read_paths: Sequence[str | os.PathLike[str]],
    write_paths: Sequence[str | os.PathLike[str]],
    *,
    private_proc: bool,
) -> dict[str, Any]:
    """What the supervisor needs: the code's command, its confinement and where its output goes."""
    setup_files = [_write(workdir, f"cell_{i}.py", cell) for i, cell in enumerate(setup)]
    main = _write(workdir, "main.py", code)
    if uid is not None:
        for name in (".", *setup_files, main):
            os.chown(os.path.join(workdir, name), uid, uid)  # its own directory, nobody else's
    boot: dict[str, Any] = {"setup": setup_files, "main": main, "echo": echo}
    executable, handles = sys.executable, []
    if uid is not None and uid_via_handle():
        # the uid cannot search the directories above the interpreter: start it through a handle
        # to its installation, and hand it the virtual environment's packages the same way
        home, relative = interpreter_handle()
        executable = f"{HANDLE.format(0)}/{relative}"
        handles = [home]
        if sys.prefix != sys.base_prefix:
            extra = [d for d in site.getsitepackages() if os.path.isdir(d) and not d.startswith(home + os.sep)]
            boot["site"] = [HANDLE.format(len(handles) + i) for i in range(len(extra))]
            handles += extra
    return {
        "argv": [executable, "-I", "-B", "-X", "utf8", "-c", _BOOTSTRAP, json.dumps(boot)],
        "handles": handles,
        "cwd": workdir,
        "env": sandbox_env(workdir, env),
        "limits": limits,
        "uid": uid,
        "gid": uid,
        "drop_caps": True,
        "landlock": landlock_abi(),
        "rules": landlock_rules(
            workdir, [os.fspath(p) for p in read_paths], [os.fspath(p) for p in write_paths], private_proc
        ),
        "network": network,
        "stdout": os.path.join(outdir, "stdout"),
        "stderr": os.path.join(outdir, "stderr"),
        "poll": _POLL,
        "cgroups": _USE_CGROUPS,
    }


async def _supervise(argv: list[str], timeout: float) -> dict[str, Any]:
    """Start the supervisor and wait for its status line; on cancellation, make it kill the tree.

    Its stdin is a pipe the framework never writes: closing it (or dying) tells the
    supervisor to kill everything and stop. Only the supervisor holds its stdout, so
    reading it never waits on a daemon the code left behind.
    """
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, start_new_session=os.name == "posix",
        )  # fmt: skip
    except (OSError, ValueError) as exc:
        raise SandboxError(f"could not start the sandbox's supervisor: {exc}") from exc
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout + _BACKSTOP)
    except asyncio.TimeoutError:
        _kill_supervisor(proc)
        await proc.wait()
        return {"returncode": None, "timed_out": True, "killed_for": None}
    except BaseException:  # cancelled: the supervisor kills the tree when its stdin closes
        if proc.stdin is not None:
            proc.stdin.close()
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(asyncio.shield(proc.wait()), _BACKSTOP)
        _kill_supervisor(proc)
        raise
    lines = out.decode(errors="replace").strip().splitlines()
    try:
        status: dict[str, Any] = json.loads(lines[-1])
    except (IndexError, ValueError) as exc:
        raise SandboxError(f"the sandbox's supervisor failed: {err.decode(errors='replace')[-2000:]}") from exc
    return status


def _kill_supervisor(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL) if os.name == "posix" else proc.kill()


def _write(workdir: str, name: str, source: str) -> str:
    path = os.path.join(workdir, name)
    with open(path, "w", encoding="utf-8") as f:
        f.write(source)
    return name  # relative: tracebacks read "main.py", not the temporary path


_namespace_prefix = namespace_prefix  # the name the tests and older callers use


class PythonSession:
    """State between calls of one run, kept by replaying source, never by a live process.

    Each :meth:`run` starts a fresh sandbox, silently re-runs the cells that succeeded
    before (so functions and variables they defined exist again), then runs the new
    cell. A failed or timed-out cell is not kept. The price: earlier cells run again
    (their time counts against the timeout, their random numbers differ, files they
    wrote are written again in the new temporary directory). Create one session per
    run — sessions are plain objects, never shared globally.
    """

    def __init__(
        self,
        *,
        timeout: float = 10,
        memory_mb: int | None = 512,
        max_output: int = 20_000,
        env: Mapping[str, str] | None = None,
        echo_last_expression: bool = False,
        max_cells: int = 50,
    ):
        self.timeout = timeout
        self.memory_mb = memory_mb
        self.max_output = max_output
        self.env = dict(env or {})
        self.echo_last_expression = echo_last_expression
        self.max_cells = max_cells
        self.cells: list[str] = []

    async def run(self, code: str) -> SandboxResult:
        """Run ``code`` after replaying the earlier successful cells; keep it if it succeeds."""
        result = await run_python(
            code,
            timeout=self.timeout,
            memory_mb=self.memory_mb,
            max_output=self.max_output,
            env=self.env,
            setup=self.cells,
            echo_last_expression=self.echo_last_expression,
        )
        if result.ok:
            self.cells.append(code)
            del self.cells[: -self.max_cells]  # bounded: the oldest definitions go first
        return result

    def reset(self) -> None:
        """Forget every kept cell."""
        self.cells.clear()


__all__ = ["PythonSession", "SandboxResult", "run_python", "sandbox_env"]
