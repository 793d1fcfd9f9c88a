"""What the sandbox can use on this machine, and the confinement it asks its supervisor for.

Probed lazily (never at import) and once per process: Landlock's ABI version, whether
``unshare`` works, and — when running as root — whether a uid of the sandbox's own can
run the interpreter. :func:`sandbox_report` puts it together for the README's table.
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import secrets
import shutil
import site
import sys
import sysconfig
from collections.abc import Sequence
from typing import Any

from loguru import logger

PR_SET_DUMPABLE = 4
_SYS_LANDLOCK_CREATE_RULESET = 444

# what a Python program reads under /etc (never all of /etc: /etc/shadow is root's and the
# sandbox may run as uid 0 without capabilities)
_ETC_READABLE = (
    "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "timezone", "passwd", "group", "hosts",
    "resolv.conf", "nsswitch.conf", "host.conf", "gai.conf", "protocols", "services", "ssl",
    "ca-certificates", "pki", "mime.types", "os-release", "locale.alias",
)  # fmt: skip
_SYSTEM_EXEC = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_DEVICES_READ = ("/dev/urandom", "/dev/random", "/dev/zero")

_PROBED: dict[str, Any] = {}


def _libc() -> Any:
    return ctypes.CDLL(None, use_errno=True)


def protect_framework() -> bool:
    """Make this process non-dumpable: no same-user ``/proc/<pid>/mem``, ``environ`` or ptrace.

    Done once, the first time code is run (a side effect: core dumps of this process
    are off and debuggers must run as root). Returns whether it holds.
    """
    if "dumpable" not in _PROBED:
        ok = False
        if sys.platform.startswith("linux"):
            try:
                ok = _libc().prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0
            except (OSError, AttributeError):
                ok = False
        _PROBED["dumpable"] = ok
    return bool(_PROBED["dumpable"])


def landlock_abi() -> int:
    """The kernel's Landlock ABI version (0: none). 4+ confines TCP, 6+ signals too."""
    if "landlock" not in _PROBED:
        abi = 0
        if sys.platform.startswith("linux"):
            try:
                libc = _libc()
                libc.syscall.restype = ctypes.c_long
                abi = max(0, int(libc.syscall(_SYS_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0),
                                              ctypes.c_uint32(1))))  # fmt: skip
            except (OSError, AttributeError):
                abi = 0
        _PROBED["landlock"] = abi
    return int(_PROBED["landlock"])


def _interpreter_dirs() -> list[str]:
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.path.realpath(sys.executable))}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            paths.add(path)
    paths.update(site.getsitepackages() if hasattr(site, "getsitepackages") else [])
    return sorted(p for p in paths if p and os.path.exists(p))


def landlock_rules(
    workdir: str, read_paths: Sequence[str], write_paths: Sequence[str], private_proc: bool = False
) -> dict[str, list[str]]:
    """Where the code may execute, read and write (everything else is refused under Landlock).

    ``/proc`` is readable only when it is the sandbox's own (a PID namespace mounted a
    fresh one); otherwise only ``/proc/self``.
    """
    return {
        "exec": [*_SYSTEM_EXEC, *_interpreter_dirs()],
        "read": [
            *(f"/etc/{name}" for name in _ETC_READABLE),
            *_DEVICES_READ,
            "/proc" if private_proc else "/proc/self",
            *(os.fspath(p) for p in read_paths),
        ],
        "write": [workdir, "/dev/null", *(os.fspath(p) for p in write_paths)],
    }


async def _runs_as(uid: int, via_handle: bool = False) -> bool:
    """Whether a process with ``uid`` can start this interpreter (not under a 0700 home, say).

    ``via_handle``: started as :func:`interpreter_handle` says, through a directory handle the
    parent opened — which reaches the interpreter's files without searching the directories
    above them (``/root``).
    """
    handle = os.open(interpreter_handle()[0], os.O_PATH | os.O_DIRECTORY) if via_handle else None
    try:
        executable = f"/proc/self/fd/{handle}/{interpreter_handle()[1]}" if handle is not None else sys.executable
        probe = await asyncio.create_subprocess_exec(
            executable, "-I", "-c", "import json, os", user=uid, group=uid, extra_groups=[],
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL, cwd="/",
            pass_fds=[handle] if handle is not None else [],
        )  # fmt: skip
        return await asyncio.wait_for(probe.wait(), 10) == 0
    except (OSError, asyncio.TimeoutError, ValueError):
        return False
    finally:
        if handle is not None:
            os.close(handle)


def interpreter_handle() -> tuple[str, str]:
    """(the interpreter's installation directory, its executable relative to it).

    As root with the interpreter under a directory other users cannot search (``/root/.pyenv``),
    the supervisor opens that directory (an ``O_PATH`` handle) before it gives up root, and the
    code's process starts ``/proc/self/fd/<handle>/bin/python3.x``: the kernel resolves the handle
    to the directory itself, so only the directories below it — world-readable, as an
    installation's are — are searched, and the code runs under a uid of its own.
    """
    home = os.path.realpath(sys.base_prefix)
    return home, os.path.relpath(os.path.realpath(sys.executable), home)


#: what to do when the code cannot get a uid of its own (said once, in the warning)
UID_ADVICE = (
    "to run it under a uid of its own, make the interpreter usable by other users (install Python "
    "outside /root, e.g. in /usr/local or /opt, or let others search the directories above {exe}), run "
    "the framework as a user other than root, or pass user=<an unprivileged user> to run_python"
)


async def sandbox_uid(user: str | int | None) -> int | None:
    """The uid the code runs as: ``user`` if given, else (as root) a fresh one if the interpreter allows.

    ``None`` means the framework's own uid — as root, with every capability dropped. A fresh uid
    is used whether the interpreter is reachable by path or only through a handle of the
    supervisor's (:func:`uid_via_handle` then says so).
    """
    if user is not None:
        if isinstance(user, int):
            return user
        import pwd

        return pwd.getpwnam(user).pw_uid
    if os.name != "posix" or os.geteuid() != 0:
        return None
    if "uid_ok" not in _PROBED:
        _PROBED["uid_ok"] = await _runs_as(_fresh_uid())
        _PROBED["uid_via_handle"] = False
        if not _PROBED["uid_ok"] and sys.platform.startswith("linux"):
            _PROBED["uid_ok"] = _PROBED["uid_via_handle"] = await _runs_as(_fresh_uid(), via_handle=True)
        if not _PROBED["uid_ok"]:
            logger.warning(
                "sandbox: model code runs as uid 0 (root) with every capability dropped, because the "
                "interpreter {} cannot be started by another user; " + UID_ADVICE,
                sys.executable, exe=sys.executable,
            )
    return _fresh_uid() if _PROBED["uid_ok"] else None


def usable_by_others(path: str, *, write: bool) -> bool:
    """Whether a user of no group of the owner's may read (or ``write``) ``path``: the paths a
    caller grants the code must be, for the code to run under a uid of its own."""
    import stat

    target = os.path.realpath(path)
    if not os.path.exists(target):
        return write and usable_by_others(os.path.dirname(target), write=True)
    parts = target.split(os.sep)
    for i in range(1, len(parts) - 1):  # every directory above must be searchable
        ancestor = os.sep + os.path.join(*parts[1 : i + 1]) if i else os.sep
        if not os.stat(ancestor).st_mode & stat.S_IXOTH:
            return False
    mode = os.stat(target).st_mode
    need = stat.S_IWOTH if write else stat.S_IROTH
    if stat.S_ISDIR(mode):
        need |= stat.S_IXOTH
    return mode & need == need


def uid_via_handle() -> bool:
    """Whether the code's uid reaches the interpreter only through the supervisor's handle
    (probed by :func:`sandbox_uid`, which runs first)."""
    return bool(_PROBED.get("uid_via_handle"))


def _fresh_uid() -> int:
    # far above real accounts and below the 32-bit overflow uid; one per run, so RLIMIT_NPROC
    # counts this sandbox only and kill(-1) as this uid reaches exactly its processes
    return 1_000_000_000 + secrets.randbelow(1_000_000_000)


_NAMESPACE_PREFIX: dict[bool, list[str] | None] = {}


async def namespace_prefix(network: bool) -> list[str] | None:
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
                )  # fmt: skip
                if await asyncio.wait_for(probe.wait(), 10) == 0:
                    found = candidate
                    break
            except (OSError, asyncio.TimeoutError):
                continue
    if found is None:
        logger.warning("sandbox: no PID/network namespaces here (unshare unavailable); "
                       "code runs confined by the supervisor, Landlock and limits only")  # fmt: skip
    _NAMESPACE_PREFIX[network] = found
    return found


async def sandbox_report() -> dict[str, Any]:
    """What confines sandboxed code on this machine (for logs, bug reports and the README table)."""
    abi = landlock_abi()
    return {
        "namespaces": bool(await namespace_prefix(False)),
        "landlock_abi": abi,
        "landlock_confines": [
            name for name, need in (("files", 1), ("tcp", 4), ("signals and abstract sockets", 6)) if abi >= need
        ],
        "root": os.name == "posix" and os.geteuid() == 0,
        "own_uid": (await sandbox_uid(None)) is not None,
        "framework_not_dumpable": protect_framework(),
        "cgroups_v1": all(os.access(f"/sys/fs/cgroup/{c}", os.W_OK) for c in ("pids", "memory")),
    }


__all__ = [
    "UID_ADVICE",
    "interpreter_handle",
    "landlock_abi",
    "landlock_rules",
    "namespace_prefix",
    "protect_framework",
    "sandbox_report",
    "sandbox_uid",
    "uid_via_handle",
    "usable_by_others",
]
