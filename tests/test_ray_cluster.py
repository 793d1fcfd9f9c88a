"""Joining a running Ray cluster: ``RayRuntime(address=...)`` and ``simulation.py --address`` use a
cluster that ``ray start --head`` started (here: on 127.0.0.1, a free port, stopped by the test),
give the history they give in process, and leave the cluster running when they are done.
"""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from environment.ray_runtime import RayRuntime  # noqa: E402
from memory import Message  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))
import simulation  # noqa: E402

pytestmark = [pytest.mark.ray, pytest.mark.integration]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def head(monkeypatch, tmp_path):
    """A cluster started by ``ray start --head --block`` (ended with its process)."""
    if ray.is_initialized():
        ray.shutdown()
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")  # the head and its drivers must agree on it
    port = free_port()
    ray_cli = shutil.which("ray") or pytest.skip("no ray command")
    log = (tmp_path / "head.log").open("w")
    proc = subprocess.Popen(
        [ray_cli, "start", "--head", "--block", f"--port={port}", "--num-cpus=2", "--node-ip-address=127.0.0.1",
         "--include-dashboard=false", "--disable-usage-stats"],
        stdout=log, stderr=subprocess.STDOUT,
    )
    address = f"127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while "This command will now block" not in (tmp_path / "head.log").read_text():
            assert proc.poll() is None, (tmp_path / "head.log").read_text()[-2000:]
            assert time.monotonic() < deadline, "ray start --head did not come up in 120 s"
            time.sleep(0.5)
        yield address, proc
    finally:
        proc.terminate()  # --block: the head stops what it started
        proc.wait(timeout=120)
        log.close()
        # `ray start` names its cluster in this file for `address="auto"`, and a stopped head leaves it behind
        current = Path(tempfile.gettempdir()) / "ray" / "ray_current_cluster"
        if current.exists() and current.read_text().strip().endswith(f":{port}"):
            current.unlink()


def shape(history: list[Message]) -> list[tuple[str, str, list[str], str]]:
    return [(m.sent_from, m.content, sorted(m.send_to), m.cause_by) for m in history]


def test_a_team_and_the_simulation_join_a_running_cluster_and_leave_it_running(head, tmp_path):
    address, proc = head
    expected = simulation.build_team(40, llm=simulation.instant_model(), store=None).run_sync(
        n_round=3, idea=simulation.TOPIC)
    team = simulation.build_team(40, llm=simulation.instant_model(), store=None,
                                 runtime=RayRuntime(address, roles_per_actor=20))
    try:
        got = team.run_sync(n_round=3, idea=simulation.TOPIC)
        assert len(team.runtime.worker_pids()) == 2
    finally:
        team.close()
    assert shape(got) == shape(expected)
    assert proc.poll() is None, "closing the team stopped the cluster it joined"

    script = [sys.executable, str(ROOT / "examples" / "simulation.py"), "--agents", "40", "--rounds", "3",
              "--model", "instant"]
    local = subprocess.run(script, capture_output=True, text=True, cwd=tmp_path, timeout=300)
    joined = subprocess.run([*script, "--runtime", "ray", "--address", address],
                            capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert joined.returncode == 0, joined.stderr[-3000:]

    def counts(out: str) -> str:
        found = re.search(r"posted=\d+ delivered=\d+", out)
        assert found, out[-2000:]
        return found.group(0)

    assert counts(joined.stdout) == counts(local.stdout) == "posted=120 delivered=520"
    assert proc.poll() is None
    ray.init(address=address)
    try:
        assert ray.cluster_resources().get("CPU") == 2  # still the cluster the test started
    finally:
        ray.shutdown()


def test_the_ray_bench_runs_interleaved_pairs_on_a_head_it_starts_and_stops(tmp_path, monkeypatch):
    """bench/bench_ray.py: a head of its own, in-process and Ray cases in turn, the medians, the same history."""
    import json

    if ray.is_initialized():
        ray.shutdown()
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    out = tmp_path / "ray.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "bench_ray.py"), "--agents", "200", "--rounds", "2", "--pairs", "2",
         "--out", str(out)], capture_output=True, text=True, cwd=ROOT, timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert [c["runtime"] for c in result["cases"]] == ["local", "ray", "ray", "local"]  # interleaved
    (summary,) = result["summary"]
    assert summary["same_history"] and summary["same_deliveries"]
    # 200 agents post to 4 followers a round: each actor keeps its own range's posts, only those
    # at the two boundaries between the two actors leave it (6 each way a round)
    assert summary["deliveries_in_actor"] + summary["deliveries_cross_actor"] == 2 * 200 * 4
    assert summary["deliveries_cross_actor"] == 2 * 12
    assert summary["ratio"] > 0 and summary["ray_driver_cpu_s"] > 0
    # the head it started is stopped: no process still serves its port
    port = result["head"].rsplit(":", 1)[1]
    left = subprocess.run(["pgrep", "-f", f"--port={port}"], capture_output=True, text=True).stdout.split()
    assert left == []
