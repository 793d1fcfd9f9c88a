"""The attacks of issue 10 against ``run_python``, with and without namespaces: what each one got.

Run by hand from a checkout's root::

    python bench/probe_sandbox.py            # both modes
    python bench/probe_sandbox.py --mode plain

Each attack is model-written code run in the sandbox; the line says what it reached
(``BLOCKED`` is what the sandbox should make of every one).
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.getcwd())

from actions.tools.sandbox import run_python

SECRET = "rolecast-probe-secret-4f1d"
HEAP_SECRET = bytearray(b"rolecast-heap-secret-9c2e" * 4)  # lives in this process's heap only

FIND_FRAMEWORK = f"""
import os
PID = {os.getpid()}  # the framework's pid (in a PID namespace that number names nothing)
"""

ATTACKS = {
    "read /proc/<framework>/environ": FIND_FRAMEWORK + f"""
try:
    data = open(f"/proc/{{PID}}/environ", "rb").read()
    print("GOT the secret" if b"{SECRET}" in data else "read it, no secret")
except OSError as exc:
    print("BLOCKED", type(exc).__name__)
""",
    "read the framework's heap (/proc/<pid>/mem)": FIND_FRAMEWORK + """
try:
    maps = open(f"/proc/{PID}/maps").read().splitlines()
    found = False
    with open(f"/proc/{PID}/mem", "rb", buffering=0) as mem:
        for line in maps:
            if "rw-p" not in line:
                continue
            lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
            if hi - lo > 256 * 1024 * 1024:
                continue
            try:
                mem.seek(lo)
                if b"rolecast-heap-secret-9c2e" in mem.read(hi - lo):
                    found = True
                    break
            except OSError:
                continue
    print("GOT the heap secret" if found else "read memory, no secret")
except OSError as exc:
    print("BLOCKED", type(exc).__name__)
""",
    "ptrace the framework": FIND_FRAMEWORK + """
import ctypes, ctypes.util
libc = ctypes.CDLL(None, use_errno=True)
r = libc.ptrace(16, PID, None, None)  # PTRACE_ATTACH
if r == 0:
    import time; time.sleep(0.1)
    libc.ptrace(17, PID, None, None)  # PTRACE_DETACH
    print("GOT ptrace attach")
else:
    print("BLOCKED errno", ctypes.get_errno())
""",
    "signal the framework (signal 0)": FIND_FRAMEWORK + """
try:
    os.kill(PID, 0)
    print("GOT: may signal (could kill) the framework")
except OSError as exc:
    print("BLOCKED", type(exc).__name__)
""",
    "connect to a loopback service": """
import os, socket
try:
    s = socket.create_connection(("127.0.0.1", int(os.environ["PORT"])), timeout=2)
    print("GOT a connection:", s.recv(20))
except OSError as exc:
    print("BLOCKED", type(exc).__name__)
""",
    "write outside the working directory": """
import os
try:
    open(os.path.join(os.environ["OUTSIDE"], "pwned"), "w").write("x")
    print("GOT a file written outside")
except OSError as exc:
    print("BLOCKED", type(exc).__name__)
""",
    "read the framework's 0600 file in /tmp": """
import os
try:
    print("GOT" if "rolecast" in open(os.environ["SECRET_FILE"]).read() else "read, no secret")
except OSError as exc:
    print("BLOCKED", type(exc).__name__)
""",
    "8 children x 100 MB (memory_mb=256)": """
import os, time
pids = []
for i in range(8):
    pid = os.fork()
    if pid == 0:
        try:
            b = bytearray(100 * 1024 * 1024)
            for j in range(0, len(b), 4096):
                b[j] = 1
            os.write(1, b"A")
            time.sleep(3)
        except MemoryError:
            os.write(1, b"m")
        os._exit(0)
    pids.append(pid)
for p in pids:
    os.waitpid(p, 0)
print()
""",
    "fork 300 processes": """
import os, time
n = 0
for i in range(300):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(2)
        os._exit(0)
    n += 1
print("forked", n)
""",
}

DAEMON = """
import os, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        with open(os.environ["BEAT"], "a") as f:
            for _ in range(400):
                f.write("."); f.flush(); time.sleep(0.1)
        os._exit(0)
    os._exit(0)
time.sleep(60)
"""


async def _serve(port_holder: list[int]) -> asyncio.AbstractServer:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"framework-internal")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port_holder.append(server.sockets[0].getsockname()[1])
    return server


def _targets() -> tuple[Path, str]:
    outside = Path(tempfile.mkdtemp(prefix="probe-outside-"))
    outside.chmod(0o777)  # writable to anyone: only the sandbox's own confinement can stop the write
    fd, secret_file = tempfile.mkstemp(prefix="probe-secret-")  # 0600, the framework's own
    os.write(fd, b"rolecast secret")
    os.close(fd)
    return outside, secret_file


def _supports(name: str) -> bool:
    return name in inspect.signature(run_python).parameters


async def probe(namespaces: bool) -> None:
    mode = "with namespaces" if namespaces else "without namespaces"
    print(f"--- {mode} (uid {os.getuid()})")
    ports: list[int] = []
    server = await _serve(ports)
    outside, secret_file = _targets()
    beat = outside / "beat"
    env = {"PORT": str(ports[0]), "OUTSIDE": str(outside), "SECRET_FILE": str(secret_file), "BEAT": str(beat)}
    for name, code in ATTACKS.items():
        began = time.monotonic()
        memory = name.startswith("8 children")
        result = await run_python(
            code, timeout=40 if memory else 10, env=env, namespaces=namespaces, memory_mb=256
        )
        took = time.monotonic() - began
        line = (result.stdout.strip().splitlines() or [result.error])[-1]
        if memory:
            got = result.stdout.count("A")
            line = f"{got} of 8 allocated 100 MB ({got * 100} MB held at once, cap 256 MB)" + (
                f", {result.stdout.count('m')} got MemoryError" if "m" in result.stdout else ""
            ) + ("" if result.ok else f"; {result.error}")
        print(f"  {name:45} {line}  [{took:.1f}s]")
    began = time.monotonic()
    # the heartbeat file is made writable on purpose: the daemon must be stopped by the kill, not by a write refusal
    extra = {"write_paths": [str(outside)]} if _supports("write_paths") else {}
    result = await run_python(DAEMON, timeout=3, env=env, namespaces=namespaces, **extra)
    took = time.monotonic() - began
    size = beat.stat().st_size if beat.exists() else 0
    await asyncio.sleep(1.0)
    alive = beat.exists() and beat.stat().st_size > size
    print(f"  {'setsid double-forked daemon, timeout 3 s':45} run_python took {took:.1f}s; "
          f"timed_out={result.timed_out}; daemon {'STILL ALIVE' if alive else 'dead'} after it returned")
    server.close()
    os.unlink(secret_file)
    assert HEAP_SECRET


def main() -> None:
    if os.environ.get("ROLECAST_PROBE") != SECRET:  # the secret must be in the environment the process started with
        os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, "ROLECAST_PROBE": SECRET})
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mode", choices=["both", "ns", "plain"], default="both")
    parser.add_argument("--degraded", action="store_true",
                        help="as on a machine without Landlock, cgroups or a uid of the sandbox's own")
    args = parser.parse_args()
    if args.degraded:
        from actions.tools import confinement, sandbox

        confinement._PROBED.update(landlock=0, uid_ok=False)
        sandbox._USE_CGROUPS = False
    modes = {"both": [True, False], "ns": [True], "plain": [False]}[args.mode]
    for namespaces in modes:
        asyncio.run(probe(namespaces))


if __name__ == "__main__":
    main()
