"""The Ray runtime's parts that need no cluster: the workers' mail between them, placement by who talks
to whom, and a worker's model keeping its inner model's window (tests/test_ray_runtime.py runs them on Ray).
"""

from __future__ import annotations

import asyncio
import random
import sys
from pathlib import Path

import pytest

from actions import UserRequirement
from environment.ray_mail import Mailroom, Routing, in_order
from environment.ray_runtime import RayRuntime
from environment.ray_worker import ClusterModel, RoleWorker, WorkerSpec
from memory import Message
from rolecast.testing import FunctionLLM

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
import simulation


def post(sender: str, to: list[str], text: str = "") -> Message:
    return Message(content=text or f"from {sender}", sent_from=sender, send_to=set(to), cause_by=UserRequirement)


class Peer:
    """A stand-in for an actor handle: ``peer.receive.remote(...)`` hands the batch to another mailroom."""

    def __init__(self, room: Mailroom):
        self.receive = self
        self.room = room

    def remote(self, round_no, sender, batch):
        self.room.receive(round_no, sender, batch)


def test_each_actor_keeps_its_own_mail_and_gets_the_rest_in_the_in_process_order():
    names = ["a", "b", "c", "d"]  # a, b on actor 0; c, d on actor 1
    routing = Routing(names, {n: [n] for n in names}, {"a": 0, "b": 0, "c": 1, "d": 1})
    rooms = [Mailroom(0), Mailroom(1)]
    for room in rooms:
        room.connect([Peer(rooms[0]), Peer(rooms[1])], routing)
    # d (ranked last) published before c on actor 1; b's two messages on actor 0
    counts0 = rooms[0].set_outbox([post("b", ["a", "c"], "b1"), post("b", ["d"], "b2"), post("a", ["b"], "a1")], 1)
    counts1 = rooms[1].set_outbox([post("d", ["a"], "d1"), post("c", ["a", "b", "d"], "c1")], 1)
    assert counts0 == (2, 2)  # b1 -> a stays, b1 -> c and b2 -> d leave; a1 -> b stays
    assert counts1 == (1, 3)
    kept = {}
    for room in rooms:
        kept[room.index], out = room.post(2)
        for index, batch in out.items():
            room.peers[index].remote(2, room.index, batch)
    got = [in_order(kept[room.index], asyncio.run(room.collect(2))) for room in rooms]
    # by the sender's rank (a, b, c, d), then as each sent them: not as each actor published them
    assert [(names_, m.content) for names_, m in got[0]] == [
        (["b"], "a1"), (["a"], "b1"), (["a", "b"], "c1"), (["a"], "d1")]
    assert [(names_, m.content) for names_, m in got[1]] == [(["c"], "b1"), (["d"], "b2"), (["d"], "c1")]
    # a batch that comes again (a restarted peer sends it once more) is not delivered twice
    rooms[1].receive(2, 0, [((0, 0, 0), ["c"], post("b", ["c"]))])
    assert 2 not in rooms[1]._incoming
    # what each actor sent is kept for a peer that has to re-execute its rounds
    assert [m.content for _, _, m in rooms[0].sent_to(1)[2]] == ["b1", "b2"]


def test_a_worker_delivers_in_the_hiring_order_whatever_the_order_of_its_roles_turns():
    async def run():
        from ray import cloudpickle

        spec = WorkerSpec(name="w", team_roles=["x", "y", "z"], index=0,
                          default_llm=cloudpickle.dumps(simulation.instant_model()))
        worker = RoleWorker(spec)
        routing = Routing(["x", "y", "z"], {"x": ["x"], "y": ["y"], "z": ["z"]}, {"x": 0, "y": 0, "z": 0})
        worker.connect([None], routing)
        agents = [simulation.Agent(name=n, profile="Agent", followers=[]) for n in ("x", "y", "z")]
        worker.place(spec, cloudpickle.dumps([("role", a) for a in agents]))
        # z published before x (its turn ended first): x's message reaches y first all the same
        worker.mail.set_outbox([post("z", ["y"], "from z"), post("x", ["y"], "from x")], 1)
        await worker.run_round(2, [], (None, 0.0))
        return [m.content for m in worker.bus.roles["y"].rc.memory.get()]

    pytest.importorskip("ray")
    assert asyncio.run(run())[:2] == ["from x", "from z"]


def test_neighbours_place_a_shuffled_ring_in_contiguous_ranges():
    graph = simulation.ring(400, 4)
    names = list(graph)
    random.Random(7).shuffle(names)

    def cross_edges(runtime: RayRuntime) -> int:
        for name in names:
            runtime.add_role(simulation.Agent(name=name, profile="Agent", followers=graph[name]))
        order = runtime._placement_order(0, 100)
        assert sorted(order) == sorted(graph)
        actor = {name: i // 100 for i, name in enumerate(order)}
        return sum(actor[a] != actor[b] for a in graph for b in graph[a])

    by_hiring = cross_edges(RayRuntime(prestart=False))
    by_graph = cross_edges(RayRuntime(prestart=False, neighbours=simulation.followed_by))
    assert by_hiring > 1000  # shuffled: most posts would leave their actor
    assert by_graph <= 60  # a handful of ranges per actor, a few posts across each boundary


def test_a_workers_model_has_its_inner_models_window():
    inner = FunctionLLM(lambda messages: "ok", context_window=1234)
    wrapped = ClusterModel(inner, worker=None)  # type: ignore[arg-type]
    assert wrapped.context_window == 1234
    assert wrapped.context_window_known
