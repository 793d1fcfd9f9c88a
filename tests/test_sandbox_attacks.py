"""Issue 10's attacks on the sandbox, with and without namespaces (and with none of the extras).

What must hold depends on what the machine offers (``sandbox_report``): the README's
table says which guarantee needs what. Every attack here ran freely before the fix
without namespaces (and several with them).
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actions.tools import confinement, sandbox
from actions.tools.sandbox import run_python

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the confinement is Linux's")

SECRET = b"rolecast-heap-secret-" + os.urandom(6).hex().encode()
HELD = bytearray(SECRET * 4)  # in this process's memory only


@pytest.fixture(params=[True, False], ids=["namespaces", "no-namespaces"])
def namespaces(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


@pytest.fixture
def report() -> dict[str, Any]:
    return asyncio.run(confinement.sandbox_report())


@pytest.fixture
def outside() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="attack-outside-") as path:
        os.chmod(path, 0o777)  # anyone may write: only the sandbox can stop it
        yield Path(path)


async def attack(code: str, namespaces: bool, **kwargs: Any) -> str:
    kwargs.setdefault("timeout", 10)
    result = await run_python(code, namespaces=namespaces, **kwargs)
    return (result.stdout.strip().splitlines() or [result.error])[-1]


PID = os.getpid()


def tries(statement: str) -> str:
    """Code that prints GOT when ``statement`` works, BLOCKED when it raises OSError."""
    return f"try:\n    {statement}\n    print('GOT')\nexcept OSError:\n    print('BLOCKED')"


async def test_the_framework_environment_memory_and_ptrace_are_out_of_reach(namespaces: bool) -> None:
    environ = tries(f"open('/proc/{PID}/environ', 'rb').read()")
    memory = (
        f"try:\n    maps = open('/proc/{PID}/maps').read().splitlines()\n"
        f"    mem = open('/proc/{PID}/mem','rb', buffering=0)\n"
        "    found = False\n"
        "    for line in maps:\n"
        "        lo, hi = (int(x, 16) for x in line.split()[0].split('-'))\n"
        "        if 'rw-p' in line and hi - lo < 2**28:\n"
        "            try:\n"
        "                mem.seek(lo)\n"
        f"                found = found or {SECRET!r} in mem.read(hi - lo)\n"
        "            except OSError:\n"
        "                pass\n"
        "    print('GOT' if found else 'BLOCKED')\n"
        "except OSError:\n    print('BLOCKED')"
    )
    ptrace = (
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        f"ok = libc.ptrace(16, {PID}, None, None) == 0\n"
        f"ok and libc.ptrace(17, {PID}, None, None)\nprint('GOT' if ok else 'BLOCKED')"
    )
    for code in (environ, memory, ptrace):
        assert await attack(code, namespaces) == "BLOCKED"
    assert HELD


async def test_the_framework_cannot_be_signalled(namespaces: bool, report: dict[str, Any]) -> None:
    if not (namespaces and report["namespaces"]) and report["landlock_abi"] < 6 and not report["own_uid"]:
        pytest.skip("needs namespaces, Landlock 6 or a uid of the sandbox's own (see the README's table)")
    code = f"import os\ntry:\n    os.kill({PID}, 0)\n    print('GOT')\nexcept OSError:\n    print('BLOCKED')"
    assert await attack(code, namespaces) == "BLOCKED"


async def test_loopback_services_are_out_of_reach(namespaces: bool, report: dict[str, Any]) -> None:
    if not (namespaces and report["namespaces"]) and report["landlock_abi"] < 4:
        pytest.skip("needs a network namespace or Landlock 4 (see the README's table)")
    server = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    code = (
        "import socket\ntry:\n"
        f"    socket.create_connection(('127.0.0.1', {port}), timeout=2)\n    print('GOT')\n"
        "except OSError:\n    print('BLOCKED')"
    )
    try:
        assert await attack(code, namespaces) == "BLOCKED"
        assert await attack(code, namespaces, network=True) == "GOT"  # unless allowed
    finally:
        server.close()


async def test_writes_stay_in_the_sandbox(namespaces: bool, report: dict[str, Any], outside: Path) -> None:
    if report["landlock_abi"] < 1:
        pytest.skip("needs Landlock (see the README's table)")
    code = tries(f"open({str(outside / 'pwned')!r}, 'w').write('x')")
    assert await attack(code, namespaces) == "BLOCKED"
    assert not (outside / "pwned").exists()
    assert await attack(code, namespaces, write_paths=[outside]) == "GOT"  # unless allowed


async def test_the_frameworks_private_files_are_unreadable(namespaces: bool, report: dict[str, Any]) -> None:
    if report["landlock_abi"] < 1 and not report["own_uid"]:
        pytest.skip("needs Landlock or a uid of the sandbox's own (see the README's table)")
    fd, path = tempfile.mkstemp(prefix="framework-secret-")  # 0600
    os.write(fd, b"secret")
    os.close(fd)
    try:
        code = f"try:\n    open({path!r}).read()\n    print('GOT')\nexcept OSError:\n    print('BLOCKED')"
        assert await attack(code, namespaces) == "BLOCKED"
    finally:
        os.unlink(path)


DAEMON = """
import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        for _ in range(600):
            open(os.environ["BEAT"], "a").write(".")
            time.sleep(0.05)
        os._exit(0)
    os._exit(0)
time.sleep(60)
"""


async def _beat_stops(beat: Path) -> bool:
    for _ in range(20):
        before = beat.stat().st_size if beat.exists() else 0
        await asyncio.sleep(0.3)
        if (beat.stat().st_size if beat.exists() else 0) == before:
            return True
    return False


async def test_a_setsid_double_forked_daemon_dies_at_the_timeout(namespaces: bool, outside: Path) -> None:
    beat = outside / "beat"
    began = time.monotonic()
    result = await run_python(DAEMON, timeout=1, env={"BEAT": str(beat)}, namespaces=namespaces,
                              write_paths=[outside])  # fmt: skip
    took = time.monotonic() - began
    assert result.timed_out and took < 6  # 40 s past a 3 s timeout before
    assert beat.exists() and await _beat_stops(beat)  # it ran, and it did not outlive the call


async def test_a_daemon_left_behind_by_finished_code_dies_too(namespaces: bool, outside: Path) -> None:
    beat = outside / "beat"
    code = DAEMON.replace("time.sleep(60)", "print('done')")
    result = await run_python(code, timeout=10, env={"BEAT": str(beat)}, namespaces=namespaces, write_paths=[outside])
    assert result.ok and result.stdout == "done\n"
    assert result.duration < 6
    assert await _beat_stops(beat)


MEMORY = """
import os, time
for i in range(4):
    if os.fork() == 0:
        try:
            b = bytearray(30 * 1024 * 1024)
            for j in range(0, len(b), 4096):
                b[j] = 1
            os.write(1, b"A")
            time.sleep(1)
        except MemoryError:
            pass
        os._exit(0)
for i in range(4):
    os.wait()
"""


async def test_the_memory_of_the_whole_tree_is_capped(namespaces: bool) -> None:
    result = await run_python(MEMORY, timeout=30, memory_mb=64, namespaces=namespaces)
    assert result.stdout.count("A") <= 2  # 4 x 30 MB fitted under a 64 MB per-process limit before
    # the whole tree stops, and says why: with a memory cgroup, the kernel used to kill one child at a
    # time, and the others took turns past the cap (3 of 4 in a CI run)
    assert result.killed_for and "MB of memory" in result.killed_for


async def test_the_processes_of_the_whole_tree_are_capped(namespaces: bool) -> None:
    code = (
        "import os, time\nn = 0\nfor i in range(200):\n    try:\n        pid = os.fork()\n"
        "    except OSError:\n        break\n    if pid == 0:\n        time.sleep(3)\n        os._exit(0)\n"
        "    n += 1\nprint('forked', n)"
    )
    result = await run_python(code, timeout=20, max_processes=16, namespaces=namespaces)
    forked = int(result.stdout.split()[-1]) if result.stdout.startswith("forked") else 0
    assert forked < 16 or result.killed_for  # 300 of 300 before


@pytest.fixture
def degraded(monkeypatch: pytest.MonkeyPatch) -> None:
    """As on a machine without Landlock, cgroups or a uid of the sandbox's own: the supervisor alone."""
    monkeypatch.setitem(confinement._PROBED, "landlock", 0)
    monkeypatch.setitem(confinement._PROBED, "uid_ok", False)
    monkeypatch.setattr(sandbox, "_USE_CGROUPS", False)


async def test_without_landlock_cgroups_or_uid_the_supervisor_still_kills_and_caps(
    degraded: None, outside: Path
) -> None:
    beat = outside / "beat"
    result = await run_python(DAEMON, timeout=1, env={"BEAT": str(beat)}, namespaces=False)
    assert result.timed_out and result.duration < 6 and await _beat_stops(beat)
    result = await run_python(MEMORY, timeout=30, memory_mb=64, namespaces=False)
    assert result.killed_for and "MB of memory" in result.killed_for
    assert "memory" in result.observation()
    fork = "import os, time\nfor i in range(100):\n    if os.fork() == 0:\n        time.sleep(5)\n        os._exit(0)\n"
    result = await run_python(fork + "time.sleep(5)", timeout=20, max_processes=10, namespaces=False)
    assert result.killed_for == "more than 10 processes"
    environ = tries(f"open('/proc/{PID}/environ', 'rb').read()")
    assert await attack(environ, False) == "BLOCKED"  # a non-dumpable framework, a child without capabilities
