"""A social-network simulation: N agents post, read their neighbours' posts and react, round after round.

    python examples/simulation.py --agents 6 --rounds 3                   # the embedded model
    python examples/simulation.py --agents 2000 --rounds 3 --model instant
    python examples/simulation.py --agents 2000 --rounds 3 --model instant --runtime ray

Each agent follows ``--neighbours`` others on a ring (the next and previous ones). In
round 1 every agent reads the topic and posts; from then on each agent reads the posts
of those it follows and posts a reaction, addressed to its followers. The same script
runs in this process (``--runtime local``) or on a local Ray cluster (``--runtime ray``),
with the same history. Prints one summary line: agents, rounds, messages posted and
delivered, wall time, messages delivered per second.

``--model embedded`` runs the embedded SmolLM2 model (slow: keep N small); ``instant``
answers at once with a deterministic rule, to measure the framework itself.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import hashlib
import time
from dataclasses import dataclass

from actions import Action, UserRequirement
from environment import Team
from environment.ray_runtime import RayRuntime
from memory import Memory, Message
from rolecast import enable_logging
from rolecast.llm.base import BaseLLM, Messages
from rolecast.testing import FunctionLLM
from roles import Role

TOPIC = "Should our town build a new library or a new park?"
#: how many of the latest messages an agent reads (and keeps) when it posts
READS = 3


class Post(Action):
    """Write a short post reacting to the latest posts this agent read."""

    name: str = "Post"
    PROMPT: str = "You are {me}. Recent posts you read:\n{posts}\nWrite a one-sentence post with your opinion."

    async def run(self, history: list[Message]) -> str:
        posts = "\n".join(f"- {m.sent_from or 'user'}: {m.content[:160]}" for m in history[-READS:])
        me = self.owner.name if self.owner is not None else "someone"
        return (await self._aask(self.PROMPT.format(me=me, posts=posts))).strip()[:240]


class Agent(Role):
    """A member of the network: posts to its followers whenever it read something new."""

    #: whom it posts to: one frozenset, which every post it sends holds as its ``send_to`` (kept as given)
    followers: frozenset[str] = frozenset()

    def __init__(self, **kwargs: object):
        super().__init__(**kwargs)
        self._watch([UserRequirement, Post])
        # Post holds no state of its own: every agent holds the one shared Post (Action.shared), and
        # runs it as itself (its name, model and prompt); an agent that changed it would get its own
        self.set_actions([Post])
        # Post reads the last 3 messages: the role keeps those (the run log keeps them all)
        self.rc.memory = Memory(window=READS)

    async def _act(self) -> Message:
        message = await super()._act()
        message.send_to = self.followers
        return message


def describe(role: Role) -> dict[str, object] | None:
    """The keywords that make an agent: a Ray worker builds it from them (nothing pickled per agent)."""
    if not isinstance(role, Agent):
        return None
    return {"name": role.name, "profile": role.profile, "followers": sorted(role.followers)}


def followed_by(role: Role) -> list[str]:
    """Whom an agent posts to: Ray places the agents that talk on one actor."""
    return sorted(getattr(role, "followers", ()))


def ray_runtime(address: str | None = None, **kwargs: object) -> RayRuntime:
    """The Ray runtime for the simulation: agents placed by who follows whom, built on the workers."""
    options: dict[str, object] = {"neighbours": followed_by, "describe": describe, **kwargs}
    return RayRuntime(address, **options)  # type: ignore[arg-type]


def ring(n: int, k: int) -> dict[str, list[str]]:
    """Who reads whom: agent i's followers are the k nearest agents on a ring (both sides)."""
    names = [f"agent{i}" for i in range(n)]
    k = min(k, n - 1)
    out: dict[str, list[str]] = {}
    for i, name in enumerate(names):
        steps = [s for d in range(1, k // 2 + 2) for s in (d, -d)][:k]
        out[name] = [names[(i + s) % n] for s in steps]
    return out


def instant_reply(messages: Messages) -> str:
    """A deterministic, instant 'opinion' derived from what the agent read."""
    text = str(messages[-1].get("content", ""))
    digest = hashlib.blake2s(text.encode(), digest_size=4).hexdigest()
    side = "library" if int(digest, 16) % 2 else "park"
    return f"I lean towards the {side} ({digest})."


def instant_model() -> BaseLLM:
    # keep_calls=False: the double does not keep every prompt it answered (a million per round)
    return FunctionLLM(instant_reply, model="instant", keep_calls=False)


def build_team(
    n: int, *, neighbours: int = 4, llm: BaseLLM | None = None, runtime: object = None, **team: object
) -> Team:
    """N agents on a ring; ``team`` goes to :class:`Team` (``store=``, ``run_id=`` …)."""
    team_ = Team(llm=llm, runtime=runtime, **team)  # type: ignore[arg-type]
    graph = ring(n, neighbours)
    team_.hire([Agent(name=name, profile="Agent", followers=followers) for name, followers in graph.items()])
    return team_


@dataclass
class Summary:
    agents: int
    rounds: int
    runtime: str
    posted: int
    delivered: int
    wall: float

    @property
    def rate(self) -> float:
        return self.delivered / self.wall if self.wall else 0.0

    def line(self) -> str:
        return (f"agents={self.agents} rounds={self.rounds} runtime={self.runtime} posted={self.posted} "
                f"delivered={self.delivered} wall={self.wall:.2f}s msgs/s={self.rate:.0f}")


async def simulate(team: Team, rounds: int) -> tuple[list[Message], float]:
    start = time.perf_counter()
    history = await team.run(n_round=rounds, idea=TOPIC)
    return history, time.perf_counter() - start


def delivered(history: list[Message], n: int) -> int:
    """Messages delivered: the topic reaches every agent, each post reaches its addressees."""
    return sum(n if m.sent_from == "user" else len(m.send_to) for m in history)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--neighbours", type=int, default=4)
    parser.add_argument("--runtime", choices=["local", "ray"], default="local")
    parser.add_argument("--model", choices=["embedded", "instant"], default=None,
                        help="default: embedded up to 10 agents, instant above")
    parser.add_argument("--roles-per-actor", type=int, default=None)
    parser.add_argument("--num-cpus", type=int, default=2)
    parser.add_argument("--address", default=None,
                        help='a running Ray cluster to join ("auto": the one `ray start --head` started here)')
    parser.add_argument("--scripted", action="store_true", help="the instant model (as --model instant)")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()
    if args.verbose:
        enable_logging("INFO")
    model = "instant" if args.scripted else args.model or ("embedded" if args.agents <= 10 else "instant")
    llm = instant_model() if model == "instant" else None  # None: the configured (embedded) model
    runtime: object = args.runtime
    if args.runtime == "ray":
        runtime = ray_runtime(args.address, roles_per_actor=args.roles_per_actor, num_cpus=args.num_cpus)
    team = build_team(args.agents, neighbours=args.neighbours, llm=llm, runtime=runtime)
    # the agents live as long as the run: the collector need not walk them again and again (at
    # 200,000 agents five full collections took a quarter of the run; bench/bench_scale.py)
    gc.freeze()
    try:
        history, wall = asyncio.run(simulate(team, args.rounds))
    finally:
        team.close()
    posts = sum(1 for m in history if m.sent_from != "user")
    print(Summary(args.agents, args.rounds, args.runtime, posts, delivered(history, args.agents), wall).line())


if __name__ == "__main__":
    main()
