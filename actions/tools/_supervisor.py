"""The sandbox's supervisor: a small process between the framework and model-written code.

Started by :func:`actions.tools.sandbox.run_python` as ``python -I -B _supervisor.py CONFIG``
(standard library only: it imports nothing of the framework). It

* becomes a *child subreaper* (``PR_SET_CHILD_SUBREAPER``), so every process the code
  starts — also those that call ``setsid`` or fork twice to become daemons — stays
  in its tree, and kills that whole tree when the code ends, at the timeout, when
  the tree passes its memory or process cap, or when the framework goes away (its
  stdin closes);
* confines the code's process before ``execve``: its own session, resource limits,
  ``PR_SET_PDEATHSIG``, a different uid or no capabilities at all when started as
  root, ``PR_SET_NO_NEW_PRIVS``, a pids/memory cgroup where one can be made, and a
  Landlock domain where the kernel has Landlock (reads and writes only where allowed,
  no TCP, no signals or ptrace out of the sandbox);
* reads the code's stdout and stderr itself, capped, while the tree lives, and never
  past its death (a daemon holding a pipe open cannot stall anyone); it writes them
  to files for the framework and prints one JSON status line when all is dead.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import resource
import select
import signal
import sys
import time
from typing import Any

PR_SET_PDEATHSIG = 1
PR_CAPBSET_DROP = 24
#: stands for /proc/self/fd/<the i-th handle> in the command (sandbox.HANDLE; this file imports nothing of rolecast)
HANDLE = "@rolecast-handle-{}@"
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38
CAP_LAST = 63

# Landlock (linux/landlock.h); syscall numbers are the same on every architecture since 5.13
SYS_LANDLOCK_CREATE_RULESET, SYS_LANDLOCK_ADD_RULE, SYS_LANDLOCK_RESTRICT_SELF = 444, 445, 446
SYS_CAPSET = {"x86_64": 126, "aarch64": 91}.get(os.uname().machine)
LANDLOCK_CREATE_RULESET_VERSION = 1
LANDLOCK_RULE_PATH_BENEATH = 1
FS_EXECUTE, FS_WRITE_FILE, FS_READ_FILE, FS_READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
FS_WRITE_ALL = sum(1 << i for i in (1, 4, 5, 6, 7, 8, 9, 10, 11, 12))  # write, remove, make*
FS_REFER, FS_TRUNCATE, FS_IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long


class RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]  # fmt: skip


class PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _check(result: int, what: str) -> int:
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return result


def landlock_abi() -> int:
    """The kernel's Landlock ABI version, 0 when it has none (or it is disabled)."""
    result = libc.syscall(SYS_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0),
                          ctypes.c_uint32(LANDLOCK_CREATE_RULESET_VERSION))  # fmt: skip
    return max(0, int(result))


def landlock_ruleset(abi: int, rules: dict[str, list[str]], network: bool) -> int:
    """A Landlock ruleset fd: read/exec where ``rules`` say, write only under ``rules["write"]``."""
    fs = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_READ_DIR | FS_WRITE_ALL
    fs |= (FS_REFER if abi >= 2 else 0) | (FS_TRUNCATE if abi >= 3 else 0) | (FS_IOCTL_DEV if abi >= 5 else 0)
    net = NET_BIND_TCP | NET_CONNECT_TCP if abi >= 4 and not network else 0
    scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 else 0
    attr = RulesetAttr(fs, net, scoped)
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8
    ruleset = _check(libc.syscall(SYS_LANDLOCK_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size),
                                  ctypes.c_uint32(0)), "landlock_create_ruleset")  # fmt: skip
    read = FS_READ_FILE | FS_READ_DIR
    grants = [(read | FS_EXECUTE, p) for p in rules.get("exec", [])] + [(read, p) for p in rules.get("read", [])]
    grants += [(fs, p) for p in rules.get("write", [])]
    for access, path in grants:
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            continue  # a path this machine does not have
        try:
            if not os.path.isdir(path):
                access &= FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE | FS_IOCTL_DEV
            rule = PathBeneathAttr(access & fs, fd)
            _check(libc.syscall(SYS_LANDLOCK_ADD_RULE, ruleset, LANDLOCK_RULE_PATH_BENEATH, ctypes.byref(rule),
                                ctypes.c_uint32(0)), f"landlock_add_rule {path}")  # fmt: skip
        finally:
            os.close(fd)
    return ruleset


def drop_capabilities() -> None:
    """Give up every capability for good (a root process stays uid 0 but can no more than its files allow)."""
    for cap in range(CAP_LAST + 1):
        libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)  # fails past the kernel's last capability: fine
    if SYS_CAPSET is None:
        raise OSError("capset: unknown system call number on this architecture")
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable (x2): all empty
    _check(libc.syscall(SYS_CAPSET, header, data), "capset")


# ------------------------------------------------------------------ cgroups
def make_cgroups(cfg: dict[str, Any]) -> list[str]:
    """pids/memory cgroup directories (v1 hierarchies) for the tree, where this process may make them."""
    made: list[str] = []
    if not cfg.get("cgroups", True):
        return made
    name = f"rolecast-sandbox-{os.getpid()}"
    wanted = {"pids": ("pids.max", cfg.get("max_processes")), "memory": ("memory.limit_in_bytes", cfg.get("memory"))}
    for controller, (knob, value) in wanted.items():
        if value is None:
            continue
        path = os.path.join("/sys/fs/cgroup", controller, name)
        try:
            os.mkdir(path)
        except OSError:
            continue
        try:
            with open(os.path.join(path, knob), "w") as f:
                f.write(str(value))
            if controller == "memory":
                with contextlib.suppress(OSError), open(os.path.join(path, "memory.memsw.limit_in_bytes"), "w") as f:
                    f.write(str(value))
                # At the limit the kernel would kill one process of the tree and let the others go on,
                # so a tree of forks could take turns past the cap (CI: 3 children of 30 MB each got
                # their memory under a 64 MB cap, one after another). With the OOM killer off a process
                # at the limit waits instead, and the supervisor stops the whole tree (memory_cgroup_full).
                with contextlib.suppress(OSError), open(os.path.join(path, "memory.oom_control"), "w") as f:
                    f.write("1")
            made.append(path)
        except OSError:
            os.rmdir(path)
    return made


def memory_cgroup_hit(paths: list[str]) -> bool:
    """Whether the tree's memory cgroup reached its limit (the kernel then kills in it)."""
    for path in paths:
        with contextlib.suppress(OSError, ValueError), open(os.path.join(path, "memory.failcnt")) as f:
            if int(f.read()) > 0:
                return True
    return False


def memory_cgroup_full(paths: list[str]) -> bool:
    """Whether a process of the tree waits at the memory cgroup's limit (``under_oom``, the OOM killer off)."""
    for path in paths:
        with contextlib.suppress(OSError), open(os.path.join(path, "memory.oom_control")) as f:
            if "under_oom 1" in f.read():
                return True
    return False


def remove_cgroups(paths: list[str]) -> None:
    for path in paths:
        for _ in range(50):
            try:
                os.rmdir(path)
                break
            except OSError:
                time.sleep(0.02)


# -------------------------------------------------------------- the tree
def children_of(pid: int) -> list[int]:
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                found += [int(p) for p in f.read().split()]
        except OSError:
            continue
    return found


def descendants() -> list[int]:
    """Every process below this one (the subreaper keeps orphans here, so this is the whole tree)."""
    seen: list[int] = []
    todo = children_of(os.getpid())
    while todo:
        pid = todo.pop()
        seen.append(pid)
        todo += children_of(pid)
    return seen


def memory_bytes(pids: list[int]) -> int:
    """The tree's memory: resident sizes summed, or — when that passes nothing — proportional sizes.

    Forked children share their parent's pages, which a plain sum counts again for
    each; ``Pss`` splits shared pages among their users, but costs a page-table walk,
    so it is read only when the cheap sum is over the cap.
    """
    page = os.sysconf("SC_PAGE_SIZE")
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError, IndexError, ValueError), open(f"/proc/{pid}/statm") as f:
            total += int(f.read().split()[1]) * page
    return total


def proportional_bytes(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError, ValueError), open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    total += int(line.split()[1]) * 1024
                    break
    return total


def reap(child: int, status: dict[str, Any]) -> None:
    """Collect every dead child; remember how the code's own process ended."""
    while True:
        try:
            pid, code = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        if pid == child:
            status["returncode"] = os.waitstatus_to_exitcode(code)


def kill_tree(child: int, status: dict[str, Any], uid: int | None) -> None:
    """SIGKILL every process of the tree, again and again until none is left (forks race the kill)."""
    if uid is not None:  # a uid of its own: kill(-1) as that uid reaches every process it has, anywhere
        killer = os.fork()
        if killer == 0:
            with contextlib.suppress(OSError):
                os.setuid(uid)
                for _ in range(1000):
                    os.kill(-1, signal.SIGKILL)  # ProcessLookupError once none is left
                    time.sleep(0.001)
            os._exit(0)
        os.waitpid(killer, 0)
    for _ in range(1000):
        pids = descendants()
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.001)
        reap(child, status)
    reap(child, status)


# -------------------------------------------------------------- the code
def confine(cfg: dict[str, Any], cgroups: list[str]) -> None:
    """In the forked child, before ``execve``: everything that limits the code's process."""
    os.setsid()
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    for path in cgroups:
        with open(os.path.join(path, "cgroup.procs"), "w") as f:
            f.write("0")
    for name, value in cfg["limits"].items():
        which = getattr(resource, name, None)
        if which is not None:
            _, hard = resource.getrlimit(which)
            value = value if hard == resource.RLIM_INFINITY else min(value, hard)
            with contextlib.suppress(ValueError, OSError):
                resource.setrlimit(which, (value, value))
    ruleset = landlock_ruleset(cfg["landlock"], cfg["rules"], cfg["network"]) if cfg["landlock"] else None
    if cfg["uid"] is not None:
        os.setgroups([])
        os.setgid(cfg["gid"])
        os.setuid(cfg["uid"])
    elif os.geteuid() == 0 and cfg["drop_caps"]:
        drop_capabilities()
    _check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "PR_SET_NO_NEW_PRIVS")
    if ruleset is not None:
        _check(libc.syscall(SYS_LANDLOCK_RESTRICT_SELF, ruleset, ctypes.c_uint32(0)), "landlock_restrict_self")
        os.close(ruleset)


class Capture:
    """Bytes read from one of the code's pipes, capped: the head (stdout) or the tail (stderr) is kept."""

    def __init__(self, fd: int, limit: int, keep_tail: bool):
        self.fd = fd
        self.limit = max(0, limit)
        self.keep_tail = keep_tail
        self.data = bytearray()
        self.total = 0
        os.set_blocking(fd, False)

    def read(self) -> bool:
        """Read what is there; False at end of file."""
        while True:
            try:
                chunk = os.read(self.fd, 65536)
            except BlockingIOError:
                return True
            if not chunk:
                return False
            self.total += len(chunk)
            if self.keep_tail:
                self.data += chunk
                del self.data[: max(0, len(self.data) - self.limit)]
            elif len(self.data) < self.limit:
                self.data += chunk[: self.limit - len(self.data)]

    def save(self, path: str) -> None:
        with open(path, "wb") as f:
            f.write(self.data)


def start(cfg: dict[str, Any], cgroups: list[str]) -> tuple[int, list[Capture]]:
    """Fork the code's process, confined; raise OSError with the reason if it could not start."""
    read_end, write_end = os.pipe()
    (out_r, out_w), (err_r, err_w) = os.pipe(), os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read_end)
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.dup2(out_w, 1)
            os.dup2(err_w, 2)
            os.chdir(cfg["cwd"])
            # opened while still root: the interpreter's directories, reached through these handles
            # by a uid that cannot search the directories above them (see sandbox.HANDLE)
            handles = [os.open(path, os.O_PATH | os.O_DIRECTORY) for path in cfg.get("handles") or ()]
            argv = list(cfg["argv"])
            for i, handle in enumerate(handles):
                os.set_inheritable(handle, True)
                argv = [a.replace(HANDLE.format(i), f"/proc/self/fd/{handle}") for a in argv]
            confine(cfg, cgroups)
            keep = sorted({write_end, *handles})  # the error pipe closes itself at exec (close-on-exec)
            for low, high in zip([2, *keep], [*keep, 65536], strict=True):
                os.closerange(low + 1, high)
            os.execve(argv[0], argv, cfg["env"])
        except BaseException as exc:  # report why, then die: nothing of the code ran
            with contextlib.suppress(OSError):
                os.write(write_end, f"{type(exc).__name__}: {exc}".encode()[:2000])
        os._exit(127)
    for fd in (write_end, out_w, err_w):
        os.close(fd)
    captures = [Capture(out_r, cfg["max_output"], keep_tail=False), Capture(err_r, cfg["max_output"], keep_tail=True)]
    with os.fdopen(read_end, "rb") as f:
        failure = f.read().decode(errors="replace")  # EOF at exec (close-on-exec) or at the child's death
    if failure:
        os.waitpid(pid, 0)
        raise OSError(failure)
    return pid, captures


def over_a_cap(cfg: dict[str, Any], status: dict[str, Any]) -> str | None:
    """Why the tree must stop now (too many processes, too much memory), if the kernel does not cap it."""
    tree = descendants()
    if cfg["max_processes"] is not None and "pids" not in status["cgroups"] and len(tree) > cfg["max_processes"]:
        return f"more than {cfg['max_processes']} processes"
    memory = cfg["memory"]
    if memory is not None and memory_cgroup_full(status["cgroup_paths"]):
        return f"more than {memory // (1024 * 1024)} MB of memory in all"
    if memory is not None and "memory" not in status["cgroups"]:
        if memory_bytes(tree) > memory and proportional_bytes(tree) > memory:
            return f"more than {memory // (1024 * 1024)} MB of memory in all"
    return None


def watch(cfg: dict[str, Any], status: dict[str, Any], child: int, captures: list[Capture], wake: int) -> None:
    """Until the code ends, times out, passes a cap or the framework leaves: read its output, reap."""
    deadline = time.monotonic() + cfg["timeout"]
    checked = 0.0
    open_pipes = {c.fd: c for c in captures}
    while status["returncode"] is None:
        now = time.monotonic()
        if now >= deadline:
            status["timed_out"] = True
            return
        ready, _, _ = select.select([0, wake, *open_pipes], [], [], min(deadline - now, cfg["poll"]))
        if 0 in ready and not os.read(0, 1):
            status["cancelled"] = True  # the framework closed our stdin: it went away or gave up
            return
        if wake in ready:
            with contextlib.suppress(BlockingIOError):
                os.read(wake, 512)
        for fd in ready:
            if fd in open_pipes and not open_pipes[fd].read():
                del open_pipes[fd]
        reap(child, status)
        if status["returncode"] is None and time.monotonic() - checked >= cfg["poll"]:
            checked = time.monotonic()
            status["killed_for"] = over_a_cap(cfg, status)
            if status["killed_for"]:
                return


def supervise(cfg: dict[str, Any]) -> dict[str, Any]:
    """Run the code, watch it, kill its tree; the status for the framework."""
    status: dict[str, Any] = {"returncode": None, "timed_out": False, "killed_for": None, "cancelled": False}
    _check(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), "PR_SET_CHILD_SUBREAPER")
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    cgroups = make_cgroups(cfg)
    status["cgroups"] = [os.path.basename(os.path.dirname(p)) for p in cgroups]
    status["cgroup_paths"] = cgroups
    try:
        child, captures = start(cfg, cgroups)
    except OSError as exc:
        status["error"] = str(exc)
        remove_cgroups(cgroups)
        return status
    watch(cfg, status, child, captures, wake_r)
    kill_tree(child, status, cfg["uid"])
    if memory_cgroup_hit(cgroups) and status["returncode"] == -signal.SIGKILL:
        status["killed_for"] = f"more than {cfg['memory'] // (1024 * 1024)} MB of memory in all"
    remove_cgroups(cgroups)
    for capture, path in zip(captures, (cfg["stdout"], cfg["stderr"]), strict=True):
        capture.read()  # whatever the dead tree left in the pipe
        capture.save(path)
    status["output_bytes"] = [c.total for c in captures]
    return status


def main() -> None:
    cfg = json.loads(sys.argv[1])
    status = supervise(cfg)
    sys.stdout.write(json.dumps(status) + "\n")
    sys.stdout.flush()


#: a script, run by its path (nothing imports from it)
__all__: list[str] = []


if __name__ == "__main__":
    main()
