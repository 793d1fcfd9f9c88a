"""Framework overhead benchmark (no real model: an instant or fixed-delay test double).

    python bench/bench_framework.py            # full run, writes bench/results/framework.json
    python bench/bench_framework.py --quick    # smaller sizes (used by tests/test_bench.py)

Measures:
  (a) the time to ``import roles, actions, environment, memory`` in a fresh interpreter;
  (b) overhead with an instant model: N roles all broadcasting to each other over
      5 rounds (N = 10, 100, 500) — wall time, time per delivered message, peak
      memory (tracemalloc);
  (b2) scheduling: a chain of N roles handing one message along, one hand-over per
      round (N = 50, 200, 2000), the message addressed to the next role; and a chain
      of 2000 roles (50 and 400 with --quick) where each hand-over is a broadcast only
      the next role watches — wall time and time per hand-over (flat in N when only roles
      with news are run and a broadcast is handed only to the roles that watch it);
  (c) concurrency: 20 roles whose model call takes 50 ms each, in one round;
  (d) the react step: one ``_think`` + ``_act`` of a role with an instant model, in µs, and the
      Python function calls it makes (a count: the same under any load).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

from loguru import logger

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import rolecast  # noqa: E402
from actions import Action, UserRequirement  # noqa: E402
from environment import Team  # noqa: E402
from memory import Memory, Message  # noqa: E402
from rolecast.testing import FunctionLLM  # noqa: E402
from roles import Role  # noqa: E402


def import_time(repeats: int = 5) -> dict[str, float]:
    """Median and min seconds for the four user-facing imports in a fresh interpreter."""
    code = (
        "import time; t = time.perf_counter(); "
        "import roles, actions, environment, memory; print(time.perf_counter() - t)"
    )
    samples = []
    for _ in range(repeats):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
        samples.append(float(out.stdout.strip()))
    return {"median_s": statistics.median(samples), "min_s": min(samples)}


class Broadcast(Action):
    """Says something about the latest message it saw (one instant model call)."""

    async def run(self, history: list[Message]) -> str:
        return await self._aask(history[-1].content if history else "")


class Relay(Action):
    """Hands the message to the next role in the chain."""

    next_name: str = ""

    async def run(self, history: list[Message]) -> Message:
        return Message(content=history[-1].content, send_to=self.next_name or "nobody")


def _delivered(team: Team) -> int:
    """Messages observed by roles (each stored once in the observer's memory)."""
    return sum(role.rc.memory.count() for role in team.env.roles.values()) - sum(
        1 for m in team.env.history.get() if m.sent_from in team.env.roles
    )


async def _broadcast(n_roles: int, n_rounds: int) -> dict[str, float]:
    llm = FunctionLLM(lambda messages: "ok")
    team = Team(llm=llm)
    team.hire(
        Role(name=f"R{i}", actions=[Broadcast()], watch=[UserRequirement, Broadcast]) for i in range(n_roles)
    )
    team.run_project("start")
    t0 = time.perf_counter()
    await team.run(n_round=n_rounds)
    wall = time.perf_counter() - t0
    delivered = _delivered(team)
    return {"roles": n_roles, "rounds": n_rounds, "wall_s": wall, "delivered": delivered,
            "us_per_delivered": wall / delivered * 1e6, "model_calls": len(llm.calls)}


class Pass(Action):
    """Broadcasts the message it saw; each role of a broadcast chain has its own subclass."""

    async def run(self, history: list[Message]) -> str:
        return history[-1].content


def _chain_roles(n_roles: int, broadcast: bool) -> list[Role]:
    """Role i reacts to role i-1 only: addressed by name, or (broadcast) by watching its action."""
    if not broadcast:
        return [
            Role(name=f"C{i}", actions=[Relay(next_name=f"C{i + 1}" if i + 1 < n_roles else "")],
                 watch=[UserRequirement] if i == 0 else [])
            for i in range(n_roles)
        ]
    steps = [type(f"Pass{i}", (Pass,), {}) for i in range(n_roles)]
    return [
        Role(name=f"C{i}", actions=[steps[i]()], watch=[UserRequirement] if i == 0 else [steps[i - 1]])
        for i in range(n_roles)
    ]


async def _chain(n_roles: int, broadcast: bool = False) -> dict[str, float]:
    llm = FunctionLLM(lambda messages: "ok")
    team = Team(llm=llm, store=None)
    team.hire(_chain_roles(n_roles, broadcast))
    team.run_project("baton", send_to="" if broadcast else "C0")
    t0 = time.perf_counter()
    history = await team.run(n_round=n_roles + 1)
    wall = time.perf_counter() - t0
    delivered = _delivered(team)
    assert len(history) == n_roles + 1, f"the baton was lost: {len(history)} messages"
    return {"roles": n_roles, "broadcast": broadcast, "rounds": n_roles, "wall_s": wall, "delivered": delivered,
            "us_per_delivered": wall / delivered * 1e6, "us_per_handover": wall / n_roles * 1e6}


async def _stepper(warm_up: int) -> tuple[Role, Memory]:
    """A one-action role with an instant model and one message of history, after ``warm_up`` steps."""
    role = Role(name="Stepper", actions=[Broadcast()], llm=FunctionLLM(lambda messages: "ok"))
    role.remember(Message(content="go", cause_by=UserRequirement))
    memory = role.rc.memory
    for _ in range(warm_up):
        await role.react()
        memory.delete_newest()
    return role, memory


async def _react_step(steps: int = 2000) -> dict[str, float]:
    """µs per react step: ``_think`` + ``_act`` of a one-action role (no model call to choose) with an
    instant model, the history kept at one message (the step's result is forgotten after it)."""
    role, memory = await _stepper(50)
    t0 = time.perf_counter()
    for _ in range(steps):
        await role.react()
        memory.delete_newest()
    wall = time.perf_counter() - t0
    return {"steps": steps, "us_per_step": wall / steps * 1e6}


async def _react_step_calls(steps: int = 20) -> float:
    """Python function calls per react step (as (d)): a count, the same on any machine under any load."""
    role, memory = await _stepper(5)
    calls = 0

    def count(frame: object, event: str, arg: object) -> None:
        nonlocal calls
        if event == "call":
            calls += 1

    # counted with the library's logging as it ships (off): an application that enabled it (a test run
    # in the same process may have) pays loguru's ~30 calls for the step's "to do" line on top
    for name in rolecast._PACKAGES:
        logger.disable(name)
    previous = sys.getprofile()
    sys.setprofile(count)
    try:
        for _ in range(steps):
            await role.react()
            memory.delete_newest()
    finally:
        sys.setprofile(previous)
        for name in rolecast._PACKAGES:
            rolecast.library_logging(name)
    return calls / steps


def measured(coro_factory, repeats: int = 1) -> dict[str, float]:
    """Time ``repeats`` runs as they are (the fastest is kept: a loaded machine only adds), then one
    more under tracemalloc for the peak (which slows it down)."""
    result = min((asyncio.run(coro_factory()) for _ in range(repeats)), key=lambda r: r["wall_s"])
    tracemalloc.start()
    asyncio.run(coro_factory())
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    result["peak_mib"] = peak / 2**20
    return result


async def _concurrency(n_roles: int = 20, delay: float = 0.05) -> dict[str, float]:
    llm = FunctionLLM(lambda messages: "ok", delay=delay)
    team = Team(llm=llm)
    team.hire(Role(name=f"P{i}", actions=[Broadcast()]) for i in range(n_roles))
    team.run_project("go")
    t0 = time.perf_counter()
    await team.env.run()
    wall = time.perf_counter() - t0
    return {"roles": n_roles, "model_delay_s": delay, "wall_s": wall, "model_calls": len(llm.calls),
            "sequential_would_be_s": n_roles * delay}


def run(quick: bool = False) -> dict:
    sizes = [10, 50, 100] if quick else [10, 100, 500]
    results: dict = {"import": import_time(3 if quick else 7), "broadcast": [], "python": sys.version.split()[0]}
    repeats = 3 if quick else 1  # the quick run checks ratios in a test: the best of three of each
    for n in sizes:
        results["broadcast"].append(measured(lambda n=n: _broadcast(n, 5), repeats))
    chains = [50, 200] if quick else [50, 200, 2000]
    results["chains"] = [measured(lambda n=n: _chain(n), repeats) for n in chains]
    results["chain"] = results["chains"][-1 if quick else 1]  # 200 roles (50 with --quick before)
    if quick:
        results["broadcast_chains"] = [measured(lambda n=n: _chain(n, broadcast=True), repeats) for n in (50, 400)]
    else:
        results["broadcast_chain"] = asyncio.run(_chain(2000, broadcast=True))
    results["concurrency"] = asyncio.run(_concurrency())
    results["react_step"] = min((asyncio.run(_react_step(500 if quick else 2000)) for _ in range(3)),
                                key=lambda r: r["us_per_step"])
    results["react_step"]["python_calls_per_step"] = asyncio.run(_react_step_calls())
    return results


def report(results: dict) -> str:
    lines = [
        f"(a) import roles, actions, environment, memory: median {results['import']['median_s'] * 1000:.0f} ms "
        f"(min {results['import']['min_s'] * 1000:.0f} ms)",
        "(b) broadcast, 5 rounds, instant model:",
        f"    {'roles':>6} {'delivered':>10} {'wall s':>8} {'µs/msg':>8} {'peak MiB':>9}",
    ]
    for r in results["broadcast"]:
        lines.append(
            f"    {r['roles']:>6} {r['delivered']:>10} {r['wall_s']:>8.3f} {r['us_per_delivered']:>8.2f} "
            f"{r['peak_mib']:>9.1f}"
        )
    lines.append("(b2) chains, one hand-over per round, instant model:")
    for c in results["chains"]:
        lines.append(
            f"    addressed, {c['roles']:>5} roles: {c['wall_s']:8.3f} s, "
            f"{c['us_per_handover']:7.1f} µs per hand-over, peak {c['peak_mib']:.1f} MiB"
        )
    for c in results.get("broadcast_chains", [results["broadcast_chain"]] if "broadcast_chain" in results else []):
        lines.append(
            f"    broadcast, {c['roles']:>5} roles: {c['wall_s']:8.3f} s, {c['us_per_handover']:7.1f} µs per hand-over"
        )
    k = results["concurrency"]
    lines.append(
        f"(c) {k['roles']} roles x {k['model_delay_s'] * 1000:.0f} ms model call, one round: "
        f"{k['wall_s'] * 1000:.0f} ms (sequential would be {k['sequential_would_be_s'] * 1000:.0f} ms)"
    )
    r = results["react_step"]
    lines.append(f"(d) react step (think + act, instant model): {r['us_per_step']:.1f} µs "
                 f"({r['steps']} steps, best of 3), {r['python_calls_per_step']:.0f} Python calls")
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    res = run(quick=args.quick)
    print(report(res))
    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "framework.json").write_text(json.dumps(res, indent=2))
