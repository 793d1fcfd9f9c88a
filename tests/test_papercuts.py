"""The small things a new user trips over, each fixed and kept fixed."""

from __future__ import annotations

import subprocess
import sys

import pytest
from support import ROOT

from actions import Action, parse_code
from actions.perform import perform
from environment import Team
from rolecast.errors import ActionFailed, LLMConnectionError, ScriptExhausted, UsageError
from rolecast.testing import ScriptedLLM, ordinal
from roles import Role


def test_enable_logging_works_whatever_the_import_order():
    code = (
        "from rolecast import enable_logging\n"
        "enable_logging('INFO')\n"  # before the packages are imported
        "from environment import Team\n"
        "Team(store=None).invest(2.5)\n"  # environment.team logs the investment at INFO
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert "environment.team:invest" in out.stderr and "investment: $2.5" in out.stderr
    quiet = subprocess.run([sys.executable, "-c", code.replace("enable_logging('INFO')\n", "")],
                           capture_output=True, text=True, cwd=ROOT, check=True)
    assert "investment" not in quiet.stderr  # a library stays quiet unless the application asks


def test_script_exhausted_says_2nd_not_2th():
    assert [ordinal(n) for n in (1, 2, 3, 4, 11, 12, 13, 21, 22, 101, 111)] == [
        "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "101st", "111th"]


async def test_script_exhausted_message_counts_right():
    llm = ScriptedLLM(["one"])
    await llm.ask("a")
    with pytest.raises(ScriptExhausted, match="called a 2nd time"):
        await llm.ask("b")


def test_team_on_error_typo_is_a_usage_error():
    with pytest.raises(UsageError, match=r"Team\(on_error='bogus'\): choose \"stop\", \"continue\" or \"recover\""):
        Team(on_error="bogus")  # type: ignore[arg-type]


async def test_a_role_without_goal_gets_no_empty_goal_in_its_prompt():
    llm = ScriptedLLM(["ok"])
    role = Role(name="Ada", profile="Helper", actions=[Action()], llm=llm)
    await role.run("hi")
    assert llm.calls[0].messages[0]["content"] == "You are a Helper, named Ada. "
    llm = ScriptedLLM(["ok"])
    await Role(name="Ada", profile="Helper", goal="help", actions=[Action()], llm=llm).run("hi")
    assert llm.calls[0].messages[0]["content"] == "You are a Helper, named Ada, your goal is help. "


async def test_a_synchronous_run_is_accepted():
    class Upper(Action):
        def run(self, text: str) -> str:
            return text.upper()

    class Later(Action):
        def run(self, text: str):  # a plain def returning an awaitable is awaited
            return self._aask(text)

    assert await Upper().run("hi") == "HI"
    assert await Later(llm=ScriptedLLM(["answer"])).run("q") == "answer"


def test_an_async_generator_run_is_a_clear_usage_error():
    with pytest.raises(UsageError, match="must be a method, `async def run"):
        class Gen(Action):
            async def run(self):
                yield "x"


@pytest.mark.parametrize(("text", "code"), [
    ("```python\ndef f():\n    return 1\n```", "def f():\n    return 1"),
    ("```python\ndef f():\n    return 1", "def f():\n    return 1"),  # the model hit the token cap
    ("Here:\n```py\nx = 1\n```\nand\n```\ny\n```", "x = 1"),
    ("```\nx = 1\n```", "x = 1"),
    ("```x = 1```", "x = 1"),
    ("```python", ""),
    ("x = 1", "x = 1"),
])
def test_parse_code_never_leaves_a_fence(text, code):
    assert parse_code(text) == code


async def test_a_connection_error_in_an_action_is_an_action_failed():
    class Ask(Action):
        async def run(self, *args):
            return await self._aask("hi")

    role = Role(name="Ada", actions=[Ask()], llm=ScriptedLLM([LLMConnectionError("could not reach http://127.0.0.1:9")]))
    with pytest.raises(ActionFailed) as info:
        await perform(role, role.actions[0])
    assert info.value.role == "Ada" and info.value.action == "Ask"
    assert isinstance(info.value.__cause__, LLMConnectionError)
    assert "http://127.0.0.1:9" in str(info.value)
