"""MetaGPT's breakpoint recovery tutorial: a team is serialized, then deserialized and run on.

As in MetaGPT, the roles' classes must be importable where the team is restored: here they
come from the multi-agent tutorial beside this file.
"""

import sys
from pathlib import Path

from environment import Team

sys.path.insert(0, str(Path(__file__).resolve().parent))
from build_customized_multi_agents import SimpleCoder, SimpleReviewer, SimpleTester


async def main(stg_path: str, idea: str = "write a function that calculates the product of a list", n_round: int = 4):
    team = Team()
    team.hire([SimpleCoder(), SimpleTester(), SimpleReviewer()])
    team.invest(investment=3.0)
    team.run_project(idea)
    await team.run(n_round=2)  # the run stops here (interrupted, out of rounds …)
    team.serialize(stg_path=stg_path)

    team = Team.deserialize(stg_path=stg_path)  # later, perhaps in another process
    return await team.run(n_round=n_round - 2)
