"""A one-role team for HumanEval-style problems: Alice completes the function she is given.

The team of ``humaneval.evalset.yaml`` (``rolecast eval examples/humaneval.evalset.yaml``): one model call
per problem; the problem's hidden tests judge her code in the sandbox.
"""

from __future__ import annotations

from actions import Action, UserRequirement, parse_code
from environment import Team
from roles import Role


class CompleteFunction(Action):
    PROMPT_TEMPLATE: str = """
{instruction}
Return ```python your_code_here ``` with the whole function (its signature too) and NO other texts,
your code:
"""
    name: str = "CompleteFunction"

    async def run(self, instruction: str) -> str:
        return parse_code(await self._aask(self.PROMPT_TEMPLATE.format(instruction=instruction)))


class Completer(Role):
    name: str = "Alice"
    profile: str = "Coder"

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._watch([UserRequirement])
        self.set_actions([CompleteFunction])


def build_team(llm: object = None) -> Team:
    """Alice alone, on the configured model unless ``llm`` is given."""
    team = Team(llm=llm)
    team.hire([Completer()])
    return team
