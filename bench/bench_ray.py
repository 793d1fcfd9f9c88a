"""The simulation (examples/simulation.py) at 1,000 and 10,000 agents, in process versus on Ray.

    python bench/bench_ray.py                  # 1,000 and 10,000 agents, 3 rounds; writes bench/results/ray.json
    python bench/bench_ray.py --agents 1000    # one size

An instant, deterministic model, so the figures are the framework's and the runtime's own
cost. Each case runs in a fresh interpreter (clean peak-memory figures). The Ray cases start
a local cluster (``num_cpus=2``, loopback) with one actor per CPU and report separately:
start-up (cluster, actors, shipping the roles), the rounds, and per round each worker's time
on its roles' turns — the rest of a round is transport (pickling, routing, the barrier).
Peak memory is the resident high-water mark (VmHWM) of the driver, plus the workers' for Ray,
minus an empty interpreter's, divided by the agents.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))


def vm_hwm_kib(pid: str | int = "self") -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def run_case(runtime: str, agents: int, rounds: int, num_cpus: int, address: str | None = None) -> dict[str, object]:
    import simulation

    from environment.ray_runtime import RayRuntime

    base_kib = vm_hwm_kib()
    start = time.perf_counter()
    rt = RayRuntime(address, num_cpus=num_cpus, roles_per_actor=-(-agents // num_cpus)) if runtime == "ray" else None
    team = simulation.build_team(agents, llm=simulation.instant_model(), runtime=rt, store=None)
    team.run_project(simulation.TOPIC)
    built = time.perf_counter() - start
    round_walls: list[float] = []
    worker_seconds: list[float] = []
    in_actor = shipped = 0
    try:
        for _ in range(rounds):
            t0 = time.perf_counter()
            asyncio.run(team.env.run())
            round_walls.append(time.perf_counter() - t0)
            if rt is not None:
                worker_seconds.append(max(rt.last_round_seconds.values()))
                in_actor += sum(kept for kept, _ in rt.last_round_mail.values())
                shipped += sum(sent for _, sent in rt.last_round_mail.values())
        worker_kib = sum(vm_hwm_kib(pid) for pid in rt.worker_pids().values()) if rt is not None else 0
    finally:
        team.close()
    history = team.env.history.get()
    delivered = simulation.delivered(history, agents)
    # the first Ray round includes starting the cluster, the actors and shipping the roles
    startup = round_walls[0] - (worker_seconds[0] if worker_seconds else 0) if rt is not None else 0.0
    steady = round_walls[1:] if rt is not None else round_walls
    steady_msgs = delivered - agents  # the topic's deliveries belong to round 1
    steady_msgs = steady_msgs * len(steady) // rounds
    return {
        "runtime": runtime, "agents": agents, "rounds": rounds, "messages": len(history), "delivered": delivered,
        "build_s": round(built, 3), "startup_s": round(startup, 3),
        "rounds_s": [round(w, 3) for w in round_walls],
        "wall_s": round(built + sum(round_walls), 3),
        "steady_msgs_per_s": round(steady_msgs / sum(steady)) if steady else None,
        "worker_turns_s": [round(w, 3) for w in worker_seconds],
        "peak_kib_per_agent": round((vm_hwm_kib() - base_kib + worker_kib) / agents, 2),
        "workers": num_cpus if rt is not None else 0,
        "cluster_s": round(rt.startup_seconds.get("cluster", 0), 3) if rt is not None else 0,
        "place_s": round(rt.startup_seconds.get("place", 0), 3) if rt is not None else 0,
        # Ray: the batches of messages the workers received, delivered inside the actor that published
        # them (only named by the driver) / shipped to it by the driver
        "deliveries_in_actor": in_actor, "deliveries_shipped": shipped,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--agents", type=int, nargs="*", default=[1000, 10000])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--num-cpus", type=int, default=2)
    parser.add_argument("--address", default=None, help='a running Ray cluster to join ("auto"); default: start one')
    parser.add_argument("--case", nargs=2, metavar=("RUNTIME", "AGENTS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        print(json.dumps(run_case(args.case[0], int(args.case[1]), args.rounds, args.num_cpus, args.address)))
        return
    results = []
    for agents in args.agents:
        for runtime in ("local", "ray"):
            out = subprocess.run(
                [sys.executable, __file__, "--case", runtime, str(agents), "--rounds", str(args.rounds),
                 "--num-cpus", str(args.num_cpus), *(["--address", args.address] if args.address else [])],
                capture_output=True, text=True, cwd=ROOT, timeout=1800,
            )
            if out.returncode:
                raise SystemExit(f"{runtime} {agents}: {out.stderr[-2000:]}")
            row = json.loads(out.stdout.strip().splitlines()[-1])
            results.append(row)
            print(json.dumps(row))
    path = ROOT / "bench" / "results" / "ray.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
