"""Run model-written Python in a separate, limited process — never in the framework's.

:func:`run_python` starts ``python -I`` (isolated mode: no ``PYTHON*`` variables, no
user site-packages, no script directory on ``sys.path``) in a fresh temporary
directory that is removed afterwards, with:

* a scrubbed environment: a short whitelist (``PATH``, locale, ``HOME``/``TMPDIR``
  pointing into the sandbox) plus only what the caller passes in ``env``;
* resource limits set by a tiny bootstrap in the child before the code runs
  (``RLIMIT_AS`` for memory, ``RLIMIT_CPU``, ``RLIMIT_FSIZE``, ``RLIMIT_NOFILE``,
  ``RLIMIT_CORE`` = 0, and ``RLIMIT_NPROC`` when asked for);
* its own session and process group, killed as a whole on timeout or cancellation;
* stdin closed, and stdout/stderr read concurrently with a cap, so a flood of output
  neither blocks the child nor fills the parent's memory.

The limits are set in the child rather than with ``preexec_fn``, which is not safe
when the parent has threads (llama.cpp, ``asyncio.to_thread``).

:class:`PythonSession` keeps definitions between calls of one run by *replaying the
source* of earlier successful cells (their output discarded) in each fresh process:
nothing persists in a long-lived process and nothing ever runs in the framework.

On Linux, where ``unshare`` is allowed (as root, or with unprivileged user
namespaces), the child also gets its own PID and mount namespaces with a fresh
``/proc`` — it cannot see or signal the framework's process, nor read its
``/proc/<pid>/environ`` — and its own network namespace (no network) unless
``network=True``. Where namespaces are not available this is logged once and the
child runs without them.

This is process isolation with limits, not a security boundary against a determined
attacker: the child runs as the same user (unless ``user=`` names another) and can
read the files that user can read. For hostile code use a container or VM.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from loguru import logger

from rolecast.errors import SandboxError

# Runs in the child before the model's code: set the limits, replay earlier cells
# with their output discarded, then run the cell. ``code.InteractiveInterpreter``
# runs every cell in one shared namespace, like a REPL; "single" mode compilation of
# a trailing expression echoes its value when asked to.
_BOOTSTRAP = r"""
import ast, code, json, os, sys
cfg = json.loads(sys.argv[1])
try:
    import resource
except ImportError:
    resource = None
if resource is not None:
    for name, value in cfg["limits"].items():
        which = getattr(resource, name, None)
        if which is None:
            continue
        soft, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        try:
            resource.setrlimit(which, (value, value))
        except (ValueError, OSError):
            pass

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
_GRACE = 1.0  # seconds to drain the pipes after the process group was killed
_READ_CHUNK = 65536


@dataclass
class SandboxResult:
    """What a sandboxed run produced.

    ``returncode`` is negative when the process was killed by a signal (``-9`` after
    a timeout). ``truncated`` says that stdout or stderr passed ``max_output``: stdout
    keeps its beginning, stderr its end (where the exception is).
    """

    stdout: str
    stderr: str
    returncode: int
    timed_out: bool = False
    truncated: bool = False
    duration: float = 0.0
    timeout: float | None = field(default=None, repr=False)

    @property
    def ok(self) -> bool:
        """The code ran to the end without an exception."""
        return self.returncode == 0 and not self.timed_out

    @property
    def error(self) -> str:
        """A one-line reason when not :attr:`ok`: the exception's last line, a timeout, a signal."""
        if self.timed_out:
            limit = f" after {self.timeout:g} s" if self.timeout is not None else ""
            return f"TimeoutError: the code did not finish{limit} and was stopped"
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


class _Capture:
    """Bytes read from one pipe, capped: the head (stdout) or the tail (stderr) is kept."""

    def __init__(self, limit: int, keep_tail: bool):
        self.limit = max(0, limit)
        self.keep_tail = keep_tail
        self.data = bytearray()
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        if self.keep_tail:
            self.data += chunk
            if len(self.data) > self.limit:
                del self.data[: len(self.data) - self.limit]
        elif len(self.data) < self.limit:
            self.data += chunk[: self.limit - len(self.data)]

    @property
    def truncated(self) -> bool:
        return self.total > self.limit

    def text(self) -> str:
        return self.data.decode("utf-8", errors="replace")


async def _drain(stream: asyncio.StreamReader | None, capture: _Capture) -> None:
    if stream is None:
        return
    while chunk := await stream.read(_READ_CHUNK):
        capture.feed(chunk)


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    """Kill the child's whole process group (its own session), or the child alone."""
    if os.name == "posix":
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()


def sandbox_env(workdir: str, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The child's environment: a whitelist, locale and home in ``workdir``, plus ``extra``."""
    env = {k: os.environ[k] for k in _ENV_WHITELIST if k in os.environ}
    env.setdefault("PATH", os.defpath)
    env.update({"LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "HOME": workdir, "TMPDIR": workdir})
    env.update({str(k): str(v) for k, v in (extra or {}).items()})
    return env


def _limits(
    timeout: float, memory_mb: int | None, max_file_mb: int | None, max_processes: int | None
) -> dict[str, int]:
    limits = {
        "RLIMIT_CORE": 0,
        "RLIMIT_NOFILE": 256,
        # a second line of defence behind the wall-clock timeout
        "RLIMIT_CPU": math.ceil(timeout) + 1,
    }
    if memory_mb is not None:
        limits["RLIMIT_AS"] = memory_mb * 1024 * 1024
    if max_file_mb is not None:
        limits["RLIMIT_FSIZE"] = max_file_mb * 1024 * 1024
    if max_processes is not None:
        # counts every process of the user and is ignored for root: opt-in only
        limits["RLIMIT_NPROC"] = max_processes
    return limits


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
    max_processes: int | None = None,
    user: str | int | None = None,
    namespaces: bool = True,
    network: bool = False,
) -> SandboxResult:
    """Run ``code`` in a sandboxed ``python -I`` subprocess and return what it printed.

    Args:
        code: the source to run, as a script (``__name__ == "__main__"``).
        timeout: wall-clock seconds; then the whole process group is killed.
        memory_mb: address-space limit (``RLIMIT_AS``); None for no limit.
        max_output: bytes kept of stdout and of stderr each; the rest is read and dropped.
        env: variables to give the child on top of the minimal whitelist.
        setup: earlier cells to run first, in the same namespace, with their output
            discarded (how :class:`PythonSession` restores state).
        echo_last_expression: print the value of a trailing expression, like a REPL.
        max_file_mb: largest file the code may write (``RLIMIT_FSIZE``).
        max_processes: ``RLIMIT_NPROC``; it counts all processes of the user, so off by default.
        user: run as this user (needs root), e.g. ``"nobody"``; the interpreter must be
            readable by it.
        namespaces: on Linux, isolate the child in its own PID/mount (and network)
            namespaces when ``unshare`` allows it.
        network: keep network access (otherwise, with namespaces, the child has none).

    Raises:
        SandboxError: the interpreter could not be started (not: the code failed —
            that is a result with ``ok == False``).
    """
    if timeout <= 0:
        raise SandboxError("timeout must be positive")
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="rolecast-sandbox-", ignore_cleanup_errors=True) as workdir:
        argv, extra = await _command(workdir, code, setup, echo_last_expression, user, namespaces, network,
                                     _limits(timeout, memory_mb, max_file_mb, max_processes))
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=workdir,
                env=sandbox_env(workdir, env),
                **extra,  # type: ignore[arg-type]
            )
        except (OSError, ValueError, KeyError) as exc:
            raise SandboxError(f"could not start the sandboxed interpreter: {exc}") from exc
        out, err = _Capture(max_output, keep_tail=False), _Capture(max_output, keep_tail=True)
        timed_out = await _communicate(proc, timeout, out, err)
        returncode = proc.returncode if proc.returncode is not None else -signal.SIGKILL
    return SandboxResult(
        stdout=out.text(),
        stderr=err.text(),
        returncode=returncode,
        timed_out=timed_out,
        truncated=out.truncated or err.truncated,
        duration=time.monotonic() - started,
        timeout=timeout,
    )


async def _command(
    workdir: str,
    code: str,
    setup: Sequence[str],
    echo: bool,
    user: str | int | None,
    namespaces: bool,
    network: bool,
    limits: dict[str, int],
) -> tuple[list[str], dict[str, object]]:
    """The child's argv (with the ``unshare`` prefix where it works) and extra spawn options."""
    setup_files = [_write(workdir, f"cell_{i}.py", cell) for i, cell in enumerate(setup)]
    main = _write(workdir, "main.py", code)
    if user is not None:
        os.chmod(workdir, 0o777)  # the other user must be able to work in it
    cfg = {"limits": limits, "setup": setup_files, "main": main, "echo": echo}
    argv = [sys.executable, "-I", "-B", "-X", "utf8", "-c", _BOOTSTRAP, json.dumps(cfg)]
    if namespaces and user is None:
        prefix = await _namespace_prefix(network)
        if prefix:
            argv = [*prefix, *argv]
    extra: dict[str, object] = {"start_new_session": True} if os.name == "posix" else {}
    if user is not None:
        extra["user"] = user
    return argv, extra


async def _communicate(proc: asyncio.subprocess.Process, timeout: float, out: _Capture, err: _Capture) -> bool:
    """Wait for the child within ``timeout`` while draining its pipes; True if it timed out.

    The whole process group is killed at the end (background children would keep the
    pipes open), and when the caller is cancelled.
    """
    readers = {
        asyncio.ensure_future(_drain(proc.stdout, out)),
        asyncio.ensure_future(_drain(proc.stderr, err)),
    }
    waiter = asyncio.ensure_future(proc.wait())
    timed_out = False
    try:
        done, _ = await asyncio.wait({waiter}, timeout=timeout)
        if not done:
            timed_out = True
            _kill_group(proc)
            await waiter
        _kill_group(proc)
        _, pending = await asyncio.wait(readers, timeout=_GRACE)
        for task in pending:
            task.cancel()
    finally:
        if proc.returncode is None:  # cancelled while running
            _kill_group(proc)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(waiter), _GRACE)
        for task in readers:
            task.cancel()  # no-op for finished readers
        waiter.cancel()
    return timed_out


_NAMESPACE_PREFIX: dict[bool, list[str] | None] = {}


async def _namespace_prefix(network: bool) -> list[str] | None:
    """The ``unshare`` command that isolates PIDs (and the network), if it works here.

    Probed once per process for each ``network`` setting: ``unshare`` must exist and
    be allowed — as root directly, otherwise through an unprivileged user namespace.
    """
    if network in _NAMESPACE_PREFIX:
        return _NAMESPACE_PREFIX[network]
    found: list[str] | None = None
    unshare = shutil.which("unshare") if sys.platform.startswith("linux") else None
    if unshare:
        base = [unshare, "--pid", "--fork", "--mount-proc", "--kill-child"]
        if not network:
            base.append("--net")
        candidates = [base] if os.geteuid() == 0 else []
        candidates.append([*base[:1], "--user", "--map-root-user", *base[1:]])
        for candidate in candidates:
            try:
                probe = await asyncio.create_subprocess_exec(
                    *candidate, sys.executable, "-I", "-c", "pass",
                    stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
                )
                if await asyncio.wait_for(probe.wait(), 10) == 0:
                    found = candidate
                    break
            except (OSError, asyncio.TimeoutError):
                continue
    if found is None:
        logger.warning("sandbox: no PID/network namespaces here (unshare unavailable); "
                       "code runs as a plain limited subprocess")
    _NAMESPACE_PREFIX[network] = found
    return found


def _write(workdir: str, name: str, source: str) -> str:
    path = os.path.join(workdir, name)
    with open(path, "w", encoding="utf-8") as f:
        f.write(source)
    return name  # relative: tracebacks read "main.py", not the temporary path


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
