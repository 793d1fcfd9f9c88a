"""How the embedded llama.cpp model uses the CPU's threads.

* Its OpenMP workers sleep, not spin, while they wait (:func:`import_llama_cpp`).
* Generation and prompt evaluation get half the cores each by default (:func:`threads`).

Thread counts never change an answer: llama.cpp splits each operation's output between
its threads, and every value is computed the same way by whichever thread gets it (the
logits of 1 and 2 threads are bitwise equal).
"""

from __future__ import annotations

import os
from typing import Any


def import_llama_cpp() -> Any:
    """Import llama_cpp, first making its OpenMP threads sleep (not spin) while they wait.

    Spinning OpenMP workers fight every other busy thread for the cores: on a shared
    2-core machine prompt evaluation measured 3x slower. libgomp reads the variable
    when the library loads, so this only works before the first import; a value the
    user set wins.
    """
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    import llama_cpp

    return llama_cpp


def threads(n_threads: int | None, n_threads_batch: int | None = None) -> tuple[int, int]:
    """The threads generating and the threads evaluating prompts: by default half the cores, both.

    Not every core: taking them all slows everything down when other work shares the
    machine. Prompts get as many threads as generation, as in llama.cpp's own tools
    (llama-cpp-python would give them every core): llama.cpp's threads meet at a barrier
    after each of the graph's few hundred operations, and on a 135M model each operation
    is tiny. On a 2-core machine a second thread barely sped prompts up while the other
    core was free, and slowed them down by 1.2x per token while another process kept it
    busy; the README main job ran 10% faster with one (``bench/bench_main_job.py``).
    """
    n = n_threads or max((os.cpu_count() or 2) // 2, 1)
    return n, n_threads_batch or n


__all__ = ["import_llama_cpp", "threads"]
