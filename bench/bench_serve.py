"""What serving a team costs: a task over A2A or HTTP against the same team run in process, and how
many tasks one server process holds at once.

    python bench/bench_serve.py            # full run
    python bench/bench_serve.py --quick    # smaller sizes (tests/test_bench.py)

Measures, on the scripted two-role team of ``tests/serve_teams.py:pair`` (a writer and a reviewer,
two model calls answered at once, every run durable in a SQLite store):
  (a) per task, the median wall time of: the team run in this process (``await team.run``); a task
      sent with the official a2a-sdk client's ``SendMessage`` (blocking) to ``rolecast serve`` in
      another process on 127.0.0.1; the HTTP API's ``POST /api/runs`` then its event stream to the
      end. Interleaved in blocks, so that a machine loaded by other work disturbs each alike;
  (b) concurrency: N tasks of ``tests/serve_teams.py:gated`` (its model waits for a file) started
      with ``returnImmediately``, all running at once in one server process, then the gate opened:
      how many completed, the wall time from the gate to the last, and the server's peak memory.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))


class Server:
    """``rolecast serve TARGET`` in a child process on 127.0.0.1 (a free port)."""

    def __init__(self, target: str, store: Path, env: dict[str, str] | None = None, *extra: str):
        command = [sys.executable, "-m", "rolecast.cli", "serve", target, "--port", "0", "--store", str(store), *extra]
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})
        line = self.process.stdout.readline() if self.process.stdout else ""
        if " at " not in line:
            self.process.kill()
            raise RuntimeError(f"the server did not start: {line!r}")
        self.url = line.split(" at ", 1)[1].split()[0]

    def rss_mib(self) -> float:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):  # the peak resident set
                return int(line.split()[1]) / 1024
        return float("nan")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(60)


async def _in_process(store: Path, i: int) -> float:
    import serve_teams

    team = serve_teams.pair()
    team._store_spec = str(store)  # (each a durable run, as a served task is)
    started = time.perf_counter()
    history = await team.run(5, idea=f"idea {i}")
    took = time.perf_counter() - started
    assert history[-1].content == f"reviewed: written: idea {i}", history[-1].content
    return took


async def _over_a2a(client: Any, i: int) -> float:
    from serve_support import text_message

    started = time.perf_counter()
    async for response in client.send_message(text_message(f"idea {i}", message_id=f"bench-{i}-{time.time()}")):
        task = response.task
    took = time.perf_counter() - started
    assert task.artifacts[0].parts[0].text == f"reviewed: written: idea {i}"
    return took


async def _over_http(http: Any, i: int) -> float:
    started = time.perf_counter()
    run_id = (await http.post("/api/runs", json={"idea": f"idea {i}"})).json()["run_id"]
    text = (await http.get(f"/api/runs/{run_id}/stream")).text
    took = time.perf_counter() - started
    assert '"status": "finished"' in text
    return took


async def overhead(tasks: int, blocks: int) -> dict[str, Any]:
    """(a): per-task wall times of the three ways, ``tasks`` of each per block, blocks interleaved."""
    import httpx
    from serve_support import client as a2a_client

    times: dict[str, list[float]] = {"in_process": [], "a2a": [], "http": []}
    with tempfile.TemporaryDirectory() as tmp:
        server = Server("tests.serve_teams:pair", Path(tmp) / "served.db")
        try:
            client = await a2a_client(server.url, streaming=False)
            async with httpx.AsyncClient(base_url=server.url, timeout=60) as http:
                for i in range(3):  # warm up: imports, the first connection, SQLite's first pages
                    await _in_process(Path(tmp) / "local.db", i)
                    await _over_a2a(client, i)
                    await _over_http(http, i)
                for block in range(blocks):
                    for i in range(tasks):
                        n = block * tasks + i
                        times["in_process"].append(await _in_process(Path(tmp) / "local.db", n))
                        times["a2a"].append(await _over_a2a(client, n))
                        times["http"].append(await _over_http(http, n))
        finally:
            server.stop()
    medians = {name: statistics.median(values) * 1000 for name, values in times.items()}
    return {"tasks": tasks * blocks, "median_ms": medians,
            "a2a_overhead_ms": medians["a2a"] - medians["in_process"],
            "http_overhead_ms": medians["http"] - medians["in_process"]}


async def concurrency(n: int) -> dict[str, Any]:
    """(b): ``n`` gated tasks at once in one server process, then the gate opened."""
    from a2a.types import a2a_pb2 as pb
    from serve_support import client as a2a_client
    from serve_support import text_message

    with tempfile.TemporaryDirectory() as tmp:
        gate = Path(tmp) / "gate"
        server = Server("tests.serve_teams:gated", Path(tmp) / "served.db", {"GATE": str(gate), "GATE_POLL": "0.5"},
                        "--max-tasks", str(n))
        try:
            client = await a2a_client(server.url, streaming=False)

            async def start(i: int) -> str:
                request = text_message(f"task {i}", message_id=f"c-{i}")
                request.configuration.return_immediately = True
                async for response in client.send_message(request):
                    return str(response.task.id)
                raise AssertionError("no task")

            ids: list[str] = []
            for first in range(0, n, 50):  # (the client's connection pool: 50 requests at a time)
                ids += await asyncio.gather(*(start(i) for i in range(first, min(n, first + 50))))
            states = [pb.TaskState.Name((await client.get_task(pb.GetTaskRequest(id=t))).status.state) for t in ids]
            working = states.count("TASK_STATE_WORKING")
            held_mib = server.rss_mib()
            gate.touch()
            opened = time.perf_counter()
            done = 0
            for task_id in ids:
                while True:
                    task = await client.get_task(pb.GetTaskRequest(id=task_id))
                    state = pb.TaskState.Name(task.status.state)
                    if state != "TASK_STATE_WORKING":
                        done += state == "TASK_STATE_COMPLETED"
                        break
                    await asyncio.sleep(0.05)
            drained = time.perf_counter() - opened
        finally:
            server.stop()
    return {"tasks": n, "working_at_once": working, "completed": done, "drain_s": drained, "peak_rss_mib": held_mib}


def run(quick: bool = False) -> dict[str, Any]:
    tasks, blocks, sizes = (5, 2, [50]) if quick else (20, 5, [100, 500, 1000])
    results: dict[str, Any] = {"overhead": asyncio.run(overhead(tasks, blocks))}
    results["concurrency"] = [asyncio.run(concurrency(n)) for n in sizes]
    return results


def report(results: dict[str, Any]) -> str:
    o = results["overhead"]
    m = o["median_ms"]
    lines = [f"per task (median of {o['tasks']}): in process {m['in_process']:.1f} ms, A2A SendMessage "
             f"{m['a2a']:.1f} ms (+{o['a2a_overhead_ms']:.1f}), HTTP POST + event stream {m['http']:.1f} ms "
             f"(+{o['http_overhead_ms']:.1f})"]
    for c in results["concurrency"]:
        lines.append(f"{c['tasks']} tasks at once: {c['working_at_once']} running together, {c['completed']} "
                     f"completed {c['drain_s']:.1f} s after the gate opened; "
                     f"server peak RSS {c['peak_rss_mib']:.0f} MiB")
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", action="store_true", help="print the results as JSON too")
    args = parser.parse_args()
    found = run(quick=args.quick)
    print(report(found))
    if args.json:
        print(json.dumps(found, indent=2))
