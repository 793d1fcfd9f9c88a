"""The simulation (examples/simulation.py) at scale, in process: agents, rounds, store on/off.

    python bench/bench_scale.py                          # 10,000 and 100,000 agents, store off and on
    python bench/bench_scale.py --agents 1000000 --store on
    python bench/bench_scale.py --agents 10000 --rounds 3 --json bench/results/scale.json

Each case runs in a fresh interpreter (clean peak-memory figures) with the instant, deterministic
model, so the figures are the framework's own cost. Printed per case: agents, rounds, runtime,
store, build time, wall time of the rounds, messages delivered per second, µs per agent-turn, peak
RSS (VmHWM) and bytes per agent (peak RSS minus the interpreter's after its imports, over the
agents), the bytes a message holds (B/msg: its object, field dict, fields-set and values, an object
several messages share counted once) and the same per message delivered (B/deliv), and a digest
of the history (the same digest at every setting of the same size: the settings change the cost,
never what was said).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import asyncio, gc, hashlib, json, sys, tempfile, time
from pathlib import Path
sys.path[:0] = [{root!r}, {examples!r}]

def hwm():
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0

def message_bytes(messages):
    # what the messages hold, each object counted once however many messages share it (a send_to
    # set, a cause string, a fields-set): the object, its field dict and the dict's values, its fields-set
    seen, total = set(), 0
    for m in messages:
        parts = [m, m.__dict__, m.__pydantic_fields_set__, *m.__dict__.values()]
        for part in parts:
            if part is not None and id(part) not in seen:
                seen.add(id(part))
                total += sys.getsizeof(part)
    return total

import simulation
before = hwm()
agents, rounds, store = {agents}, {rounds}, {store!r}
with tempfile.TemporaryDirectory() as tmp:
    kwargs = {{"store": str(Path(tmp) / "runs.db")}} if store == "on" else {{"store": None}}
    start = time.perf_counter()
    team = simulation.build_team(agents, llm=simulation.instant_model(), **kwargs)
    gc.freeze()  # as examples/simulation.py does after building
    build = time.perf_counter() - start
    history, wall = asyncio.run(simulation.simulate(team, rounds))
    team.close()
    digest = hashlib.sha256()
    for m in history:
        digest.update(f"{{m.sent_from}}|{{m.content}}|{{sorted(m.send_to)}}|{{m.cause_by}}\n".encode())
    delivered = simulation.delivered(history, agents)
    peak = hwm()
    msg_bytes = message_bytes(history)
print(json.dumps({{"agents": agents, "rounds": rounds, "runtime": "local", "store": store, "build_s": build,
                  "wall_s": wall, "delivered": delivered, "msgs_per_s": delivered / wall,
                  "us_per_agent_turn": wall / (agents * rounds) * 1e6, "peak_rss_mb": peak / 2**20,
                  "bytes_per_agent": (peak - before) / agents, "digest": digest.hexdigest()[:16],
                  "msg_bytes": msg_bytes / len(history), "delivered_bytes": msg_bytes / delivered}}))
"""


def run_case(agents: int, rounds: int, store: str) -> dict[str, object]:
    code = CHILD.format(root=str(ROOT), examples=str(ROOT / "examples"), agents=agents, rounds=rounds, store=store)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"the {agents}-agent case failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def report(rows: list[dict[str, object]]) -> str:
    head = f"{'agents':>9} {'rounds':>6} {'store':>5} {'build s':>8} {'wall s':>8} {'msgs/s':>9} " \
           f"{'µs/turn':>8} {'peak MB':>8} {'B/agent':>8} {'B/msg':>6} {'B/deliv':>7}  digest"
    lines = [head]
    for r in rows:
        lines.append(f"{r['agents']:>9,} {r['rounds']:>6} {r['store']:>5} {r['build_s']:>8.2f} {r['wall_s']:>8.2f} "
                     f"{r['msgs_per_s']:>9,.0f} {r['us_per_agent_turn']:>8.0f} {r['peak_rss_mb']:>8.0f} "
                     f"{r['bytes_per_agent']:>8,.0f} {r.get('msg_bytes', 0):>6,.0f} "
                     f"{r.get('delivered_bytes', 0):>7,.0f}  {r['digest']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list[dict[str, object]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--store", choices=["on", "off", "both"], default="both")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows here")
    args = parser.parse_args(argv)
    stores = ["off", "on"] if args.store == "both" else [args.store]
    rows = []
    for agents in args.agents:
        for store in stores:
            rows.append(run_case(agents, args.rounds, store))
            print(report(rows[-1:]).splitlines()[-1], flush=True)
    print(report(rows))
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(rows, indent=1))
    return rows


if __name__ == "__main__":
    main()
