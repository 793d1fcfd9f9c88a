"""The simulation (examples/simulation.py) in process versus on a running Ray cluster, in interleaved pairs.

    python bench/bench_ray.py                          # starts a head (ray start --head, 127.0.0.1), stops it after
    python bench/bench_ray.py --address auto           # a cluster you started; left running
    python bench/bench_ray.py --agents 10000 --rounds 5 --pairs 5

An instant, deterministic model, so the figures are the framework's and the runtime's own
cost. Each case runs in a fresh interpreter; the pairs are interleaved (in process first in
one pair, Ray first in the next) and the medians reported, since this machine's load swings.
Per case: the wall time of building the team and its rounds — for Ray without joining the
cluster (``ray.init`` to a running one), with starting the actors and placing the roles —
the driver's CPU time over the same span, the history's digest (the same in both runtimes),
the deliveries, and for Ray how many stayed inside an actor and how many went actor to actor.
Peak memory is the resident high-water mark (VmHWM) of the driver, plus the workers' for Ray,
minus the interpreter's before building, divided by the agents. Writes bench/results/ray.json.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))


def vm_hwm_kib(pid: str | int = "self") -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def digest(history: list[Any]) -> str:
    h = hashlib.sha256()
    for m in history:
        h.update(f"{m.sent_from}|{m.content}|{sorted(m.send_to)}|{m.cause_by}\n".encode())
    return h.hexdigest()[:16]


def run_case(runtime: str, agents: int, rounds: int, num_cpus: int, address: str | None) -> dict[str, Any]:
    import simulation

    base_kib = vm_hwm_kib()
    load = os.getloadavg()[0]
    if runtime == "ray":
        rt = simulation.ray_runtime(address, num_cpus=num_cpus)
    elif runtime == "ray-pickle":  # the roles pickled on the driver, not built on the workers
        rt = simulation.ray_runtime(address, num_cpus=num_cpus, describe=None)
    elif runtime == "ray-before":  # another checkout (--before): its RayRuntime as it was
        from environment.ray_runtime import RayRuntime

        rt = RayRuntime(address, num_cpus=num_cpus, roles_per_actor=-(-agents // num_cpus))
    else:
        rt = None
    start, cpu0 = time.perf_counter(), time.process_time()
    team = simulation.build_team(agents, llm=simulation.instant_model(), runtime=rt, store=None)
    team.run_project(simulation.TOPIC)
    built = time.perf_counter() - start
    round_walls: list[float] = []
    worker_seconds: list[float] = []
    local = cross = 0
    try:
        for _ in range(rounds):
            t0 = time.perf_counter()
            asyncio.run(team.env.run())
            round_walls.append(time.perf_counter() - t0)
            if rt is not None:
                worker_seconds.append(max(rt.last_round_seconds.values()))
                local += sum(kept for kept, _ in rt.last_round_mail.values())
                cross += sum(sent for _, sent in rt.last_round_mail.values())
        cpu = time.process_time() - cpu0
        worker_kib = sum(vm_hwm_kib(pid) for pid in rt.worker_pids().values()) if rt is not None else 0
    finally:
        team.close()
    history = team.env.history.get()
    cluster = rt.startup_seconds.get("cluster", 0.0) if rt is not None else 0.0
    wall = built + sum(round_walls) - cluster
    return {
        "runtime": runtime, "agents": agents, "rounds": rounds, "messages": len(history),
        "delivered": simulation.delivered(history, agents), "digest": digest(history),
        "wall_s": round(wall, 3), "build_s": round(built, 3), "rounds_s": [round(w, 3) for w in round_walls],
        "driver_cpu_s": round(cpu, 3),
        "cluster_s": round(cluster, 3), "place_s": round(rt.startup_seconds.get("place", 0), 3) if rt else 0.0,
        # each round, the slowest worker's time (its mail and its roles' turns); the rest is transport
        "worker_round_s": [round(w, 3) for w in worker_seconds],
        # deliveries by the workers: inside an actor / actor to actor (the last round's go nowhere)
        "deliveries_in_actor": local, "deliveries_cross_actor": cross,
        "peak_kib_per_agent": round((vm_hwm_kib() - base_kib + worker_kib) / agents, 2),
        "workers": len(rt.last_round_mail) if rt is not None else 0,
        "load": round(load, 2),
    }


def case(runtime: str, agents: int, args: argparse.Namespace, address: str | None) -> dict[str, Any]:
    root = Path(args.before) if runtime == "ray-before" else ROOT
    script = root / "bench" / "bench_ray.py"
    if runtime == "ray-before":  # this script, run in the other checkout (imports its code)
        script.write_text(Path(__file__).read_text())
    env = {**os.environ, "PYTHONPATH": str(root)}
    out = subprocess.run(
        [sys.executable, str(script), "--case", runtime, str(agents), "--rounds", str(args.rounds),
         "--num-cpus", str(args.num_cpus), *(["--address", address] if address else [])],
        capture_output=True, text=True, cwd=root, timeout=1800, env=env,
    )
    if out.returncode:
        raise SystemExit(f"{runtime} {agents}: {out.stderr[-3000:]}")
    row: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return row


class Head:
    """``ray start --head --block`` on 127.0.0.1 (a free port), ended with its process."""

    def __init__(self, num_cpus: int):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.log = tempfile.NamedTemporaryFile("w+", suffix=".log", delete=False)
        ray_cli = shutil.which("ray") or "ray"
        # its workers import this checkout (as a cluster started for this project would): actors start in them
        path = os.pathsep.join(str(p) for p in (ROOT, ROOT / "examples", ROOT / "bench"))
        self.proc = subprocess.Popen(
            [ray_cli, "start", "--head", "--block", f"--port={self.port}", f"--num-cpus={num_cpus}",
             "--node-ip-address=127.0.0.1", "--include-dashboard=false", "--disable-usage-stats"],
            stdout=self.log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONPATH": path},
        )
        deadline = time.monotonic() + 180
        while "This command will now block" not in Path(self.log.name).read_text():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise SystemExit(Path(self.log.name).read_text()[-2000:])
            time.sleep(0.5)
        self.address = f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=120)
        Path(self.log.name).unlink(missing_ok=True)


def summary(sets: list[dict[str, dict[str, Any]]], runtime: str = "ray") -> dict[str, Any]:
    pairs = [(s["local"], s[runtime]) for s in sets]
    local, ray = [p[0] for p in pairs], [p[1] for p in pairs]
    med = statistics.median
    return {
        "runtime": runtime, "agents": local[0]["agents"], "rounds": local[0]["rounds"], "pairs": len(pairs),
        "local_wall_s": med(r["wall_s"] for r in local), "ray_wall_s": med(r["wall_s"] for r in ray),
        "ratio": round(med(b["wall_s"] / a["wall_s"] for a, b in pairs), 2),
        "ratios": [round(b["wall_s"] / a["wall_s"], 2) for a, b in pairs],
        "local_driver_cpu_s": med(r["driver_cpu_s"] for r in local),
        "ray_driver_cpu_s": med(r["driver_cpu_s"] for r in ray),
        "ray_place_s": med(r["place_s"] for r in ray),
        "same_history": all(a["digest"] == b["digest"] for a, b in pairs),
        "same_deliveries": all(a["delivered"] == b["delivered"] for a, b in pairs),
        "deliveries_in_actor": ray[0]["deliveries_in_actor"],
        "deliveries_cross_actor": ray[0]["deliveries_cross_actor"],
        "load": [r["load"] for p in pairs for r in p],
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--agents", type=int, nargs="*", default=[1000, 10000])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--num-cpus", type=int, default=2)
    parser.add_argument("--address", default=None, help='a running Ray cluster ("auto"); default: start a head')
    parser.add_argument("--pickle", action="store_true",
                        help="also Ray with the roles pickled on the driver (not built on the workers)")
    parser.add_argument("--before", default=None, help="also Ray from another checkout (its code as it was)")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "ray.json"))
    parser.add_argument("--case", nargs=2, metavar=("RUNTIME", "AGENTS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        print(json.dumps(run_case(args.case[0], int(args.case[1]), args.rounds, args.num_cpus, args.address)))
        return
    # the head it starts and its drivers must agree on Ray's token authentication: without this, Ray
    # 2.60 refused the drivers here (InvalidAuthToken; ~/.ray held a token). Off for both, as
    # tests/test_ray_cluster.py has it
    if args.address is None:
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    head = Head(args.num_cpus) if args.address is None else None
    address = head.address if head is not None else args.address
    results: dict[str, Any] = {"head": head.address if head is not None else None, "cases": [], "summary": []}
    try:
        runtimes = ["local", "ray", *(["ray-pickle"] if args.pickle else []), *(["ray-before"] if args.before else [])]
        for agents in args.agents:
            sets = []
            for i in range(args.pairs):
                order = runtimes[i % len(runtimes):] + runtimes[:i % len(runtimes)]  # each first in turn
                rows = {}
                for runtime in order:
                    rows[runtime] = case(runtime, agents, args, address)
                    print(json.dumps(rows[runtime]), flush=True)
                    results["cases"].append(rows[runtime])
                sets.append(rows)
            for runtime in runtimes[1:]:
                results["summary"].append(summary(sets, runtime))
                print(json.dumps(results["summary"][-1]), flush=True)
    finally:
        if head is not None:
            head.stop()
    path = Path(args.out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
