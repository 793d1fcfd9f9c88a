"""An Engineer and a QaEngineer that find their own mistakes (MetaGPT's executable feedback).

    python examples/coding_team.py                       # the requirement below, on the configured model
    python examples/coding_team.py "write a function is_palindrome(text) ..."
    python examples/coding_team.py --scripted            # a canned model: a bug, a bug report, the fix

The Engineer writes the code (sampling ``--k`` candidates and keeping the first that passes the
requirement's ``>>>`` examples, run in rolecast's sandbox); the QaEngineer writes tests, runs them in
the sandbox and sends a bug report back when the code fails; the Engineer rewrites it. Model code never
runs in this process.
"""

from __future__ import annotations

import argparse

from environment import coding_team
from memory import Message
from rolecast.observe.console import run_script
from rolecast.testing import FunctionLLM
from roles import final_code

REQUIREMENT = '''def running_max(numbers: list) -> list:
    """Return the list of the largest number seen so far at each position.
    >>> running_max([1, 3, 2, 5, 4])
    [1, 3, 3, 5, 5]
    >>> running_max([])
    []
    """
'''


def scripted_model() -> FunctionLLM:
    """A canned model: a wrong first answer, tests, and the fix once it reads the bug report."""
    wrong = "def running_max(numbers):\n    return sorted(numbers)"
    right = ("def running_max(numbers):\n    out, best = [], None\n    for n in numbers:\n"
             "        best = n if best is None or n > best else best\n        out.append(best)\n    return out")
    tests = "def test_running_max():\n    assert running_max([2, 1]) == [2, 2]"

    def answer(messages: list[dict], call: object) -> str:
        prompt = messages[-1]["content"]
        if getattr(call, "kind", "") == "choose":
            return "0"
        if "## Bug report" in prompt:
            return f"```python\n{right}\n```"
        if "QA engineer" in prompt:
            return f"```python\n{tests}\n```"
        return f"```python\n{wrong}\n```"

    return FunctionLLM(answer)


async def main(requirement: str, k: int = 3, rounds: int = 3, scripted: bool = False,
               console: bool = True) -> list[Message]:
    team = coding_team(n_candidates=1 if scripted else k, test_round_allowed=rounds,
                       llm=scripted_model() if scripted else None)
    history = await team.run(n_round=2 * rounds + 2, idea=requirement, console=console)
    print("=== the code the team ended with ===")
    print(final_code(history) or "(none)")
    verdict = next((m.content for m in reversed(history) if m.sent_from == "Edward"), "")
    print("=== the QaEngineer's last word ===")
    print(verdict.strip() or "(none)")
    return history


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="an Engineer and a QaEngineer on one requirement")
    parser.add_argument("requirement", nargs="?", default=REQUIREMENT, help="what to write (default: running_max)")
    parser.add_argument("--k", type=int, default=3, help="candidates the Engineer samples (default 3)")
    parser.add_argument("--rounds", type=int, default=3, help="the QaEngineer's test rounds (default 3)")
    parser.add_argument("--scripted", action="store_true", help="a canned model instead of the configured one")
    parser.add_argument("--no-console", action="store_true", help="plain output (no live console)")
    args = parser.parse_args()
    run_script(main(args.requirement, args.k, args.rounds, args.scripted, console=not args.no_console))
