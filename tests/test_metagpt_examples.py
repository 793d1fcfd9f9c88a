"""MetaGPT's own example scripts (tests/metagpt_examples/: geekan/MetaGPT's examples/ at ba28689, and
v0.8.0 where named, with only their imports changed) run on canned models, doing what their text says."""

from __future__ import annotations

import functools
import io
import json
import runpy
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from loguru import logger

import rolecast.const
import rolecast.context
from rolecast.core.config import ProviderConfig
from rolecast.testing import FunctionLLM

EXAMPLES = Path(__file__).resolve().parent / "metagpt_examples"
GUIDE = Path(__file__).resolve().parent / "metagpt_guide"

CODE = "```python\ndef product(xs):\n    out = 1\n    for x in xs:\n        out *= x\n    return out\n\nprint(product([2, 3]))\n```"  # noqa: E501
TESTS = "```python\ndef test_product():\n    assert product([2, 3]) == 6\n```"
DIRECTORY = {"title": "MySQL in an hour", "directory": [{"Install": ["Download"]}, {"Query": ["SELECT", "JOIN"]}]}
NOVEL = {"name": "Reborn in Skyrim", "user_group": "gamers", "outlines": ["Chapter 1: waking"],
         "background": "Tamriel", "character_names": ["Lydia"], "conflict": "dragons", "plot": "a return",
         "ending": "peace"}
CHAPTERS = {"chapters": [{"name": "Chapter 1", "content": "The Dragonborn wakes in Helgen."}]}
ANSWERS = {  # what the prompt asks → the answer; the first match wins
    "### INSTRUCTION": "```python\nclass SimpleTester(Role):\n    name: str = 'Tester'\n```",
    "Just answer pong when ping": "pong",
    "I'm a helpful AI assistant.": "I am an AI assistant.",
    "who are you": "I am a robot",
    "what's your name": "I am an AI assistant.",
    "write python hello world.": "print('hello world')",
    "count from 1 to 10": "\n".join(str(i) for i in range(1, 11)),
    "Write a python function": CODE,
    "unit tests using pytest": TESTS,
    "Review the test cases": "Add a test for an empty list.",
    "table of contents": json.dumps(DIRECTORY),
    "### novel": json.dumps(CHAPTERS),
    "Reborn in Skyrim": json.dumps(NOVEL),
}


def canned(model: str, messages: list[dict[str, Any]]) -> str:
    """Answers as a helpful model would, by what the example's prompt asks."""
    text = "\n".join(str(m["content"]) for m in messages)
    prompt = str(messages[-1]["content"])
    if prompt == "hi":
        return "Hello!"
    if "you are in a debate" in prompt:
        speaker = prompt.split("Suppose you are ", 1)[1].split(",", 1)[0]
        return f"I am {speaker}, and my opponent is wrong about this."
    if "module directory titles" in prompt:
        section = prompt.split("is as follows:\n", 1)[1].split("\n", 1)[0]
        return f"## {section}\nSome detail."
    if "Vote for the candidate" in text:
        return f"({model}) I vote for A."
    if "Do these subtasks" in prompt or "Compile this work" in prompt or "Review this compilation" in prompt:
        return f"({model}) done: {prompt.splitlines()[0]}"
    if "Express your opinion" in text or "Say your opinion" in text:
        speaker = text.split("You are a ", 1)[1].split(",", 1)[0]
        return f"As the {speaker} ({model}): act on the climate now."
    for asked, answer in ANSWERS.items():
        if asked in text:
            return answer
    raise AssertionError(f"the canned model was asked something unexpected: {prompt[:300]!r}")


class Models:
    """Every model a script would configure, canned, one per model name (``default`` when unnamed)."""

    def __init__(self) -> None:
        self.made: dict[str, FunctionLLM] = {}

    def create(self, cfg: ProviderConfig, **kw: Any) -> FunctionLLM:
        name = getattr(cfg, "model", None) or "default"
        if name not in self.made:
            self.made[name] = FunctionLLM(functools.partial(canned, name), model=name)
        return self.made[name]

    @property
    def default(self) -> FunctionLLM:
        return self.made["default"]

    def prompts(self, name: str = "default") -> list[str]:
        return [c.prompt for c in self.made[name].calls]


@pytest.fixture
def models(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Models]:
    made = Models()
    for where in ("rolecast.context", "actions.action", "roles.sdk"):
        monkeypatch.setattr(f"{where}.create_llm", made.create)
    monkeypatch.setattr("rolecast.context._DEFAULT", None)
    monkeypatch.delenv("ROLECAST_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)  # scripts write here
    monkeypatch.syspath_prepend(str(EXAMPLES))
    if "fire" not in sys.modules:  # the scripts import fire for their command line, which the tests skip
        monkeypatch.setitem(sys.modules, "fire", types.ModuleType("fire"))
    yield made


@pytest.fixture
def logs() -> Iterator[list[str]]:
    lines: list[str] = []
    sink = logger.add(lambda m: lines.append(str(m).rstrip("\n")), format="{message}", level="INFO")
    yield lines
    logger.remove(sink)


def load(name: str, run_name: str = "metagpt_example") -> dict[str, Any]:
    return runpy.run_path(str(EXAMPLES / f"{name}.py"), run_name=run_name)


# ------------------------------------------------------------------ LLM()
async def test_ping_asks_the_configured_model_with_a_system_message(models: Models, logs: list[str]) -> None:
    await load("ping")["main"]()
    [call] = models.default.calls
    assert call.messages == [{"role": "system", "content": "Just answer pong when ping."},
                             {"role": "user", "content": "ping?"}]
    assert "A: pong" in logs


async def test_hello_world_uses_every_call_of_metagpts_llm(models: Models, logs: list[str]) -> None:
    await load("hello_world")["main"]()
    calls = models.default.calls
    assert len(calls) == 8  # 2 aask (streamed), aask_batch of 2, acompletion, acompletion_text x2, completion
    assert "A: I am a robot" in logs  # streamed, and whole
    batch = calls[3]  # aask_batch asks its second message with the first exchange as context
    assert [m["content"] for m in batch.messages] == ["hi", "Hello!", "write python hello world."]
    assert "Hello!\nprint('hello world')" in logs
    counted = "\n".join(str(i) for i in range(1, 11))
    assert logs.count(counted) == 1  # acompletion_text; acompletion and completion log a Completion
    assert sum(line.startswith("Completion(text='1\\n2") for line in logs) == 2  # the synchronous one too


async def test_llm_hello_world(models: Models, logs: list[str]) -> None:
    await load("llm_hello_world")["main"]()
    assert len(models.default.calls) == 8
    assert logs[1:4] == ["I am an AI assistant.", "", "I am a robot"]


def test_write_novel_fills_nodes_with_llm(models: Models, capsys: pytest.CaptureFixture[str]) -> None:
    load("write_novel")  # runs at import, as the script does
    novel, chapters = models.prompts()
    assert "Reborn in Skyrim" in novel and "### novel" in chapters
    assert "dragons" in chapters  # the chapters were asked with the novel written first
    assert "The Dragonborn wakes in Helgen." in capsys.readouterr().out


# ------------------------------------------------------------ single agents
def test_build_customized_agent_writes_code_and_runs_it(models: Models, logs: list[str]) -> None:
    load("build_customized_agent")["main"]()
    assert len(models.default.calls) == 1  # by_order: write (the model), then run (no model)
    assert "code_result='6\\n'" in logs


def test_agent_creator_writes_into_the_configured_workspace(models: Models, tmp_path: Path) -> None:
    rolecast.context.config.workspace.path = tmp_path / "ws"
    load("agent_creator", run_name="__main__")  # its main is defined and run under __main__
    assert "class SimpleTester(Role)" in (tmp_path / "ws" / "agent_created_agent.py").read_text()
    example = (rolecast.const.ROLECAST_ROOT / "examples" / "build_customized_agent.py").read_text()
    assert example.strip() and example.strip()[:200] in models.prompts()[0]  # shown the single-agent example


@pytest.mark.parametrize("form", ["write_tutorial", "write_tutorial_08"])
def test_write_tutorial(models: Models, form: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The tutorial assistant writes a table of contents, then each section: three calls in both its
    current form (the actions extended in _act) and MetaGPT 0.8's (set_actions, then super().react())."""
    monkeypatch.setattr(rolecast.const, "TUTORIAL_PATH", tmp_path / "tutorials")
    for module in [m for m in sys.modules if m.startswith("metagpt_tutorial")]:
        monkeypatch.delitem(sys.modules, module)
    load(form, run_name="__main__")
    prompts = models.prompts()
    assert len(prompts) == 3
    assert "table of contents" in prompts[0] and "{'Install': ['Download']}" in prompts[1]
    assert "{'Query': ['SELECT', 'JOIN']}" in prompts[2]
    [document] = (tmp_path / "tutorials").glob("*/MySQL in an hour.md")
    text = document.read_text()
    assert text.startswith("# MySQL in an hour") and text.count("Some detail.") == 2


# ------------------------------------------------------------------- teams
async def test_build_customized_multi_agents(models: Models) -> None:
    await load("build_customized_multi_agents")["main"](n_round=3)
    coder, tester, reviewer = models.prompts()
    assert "Write a python function" in coder and "def product" in tester and "test_product" in reviewer


async def test_build_customized_multi_agents_with_a_human_reviewer(
    models: Models, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("Test negative numbers too.\nexit\n"))
    await load("build_customized_multi_agents")["main"](n_round=4, add_human=True)
    prompts = models.prompts()
    assert not any("Review the test cases" in p for p in prompts)  # the person reviewed
    assert "Test negative numbers too." in prompts[-1]  # and the tester answered the person


def test_debate_takes_turns(models: Models) -> None:
    load("debate")["main"]("Topic: climate change", n_round=4)
    prompts = models.prompts()
    assert [p.split("Suppose you are ", 1)[1].split(",")[0] for p in prompts] == ["Biden", "Trump", "Biden", "Trump"]
    assert "Biden: I am Biden" in prompts[1]  # Trump answered Biden's turn


def test_debate_simple_names_the_environment_and_uses_each_actions_model(models: Models) -> None:
    load("debate_simple")  # runs at import, as the script does
    alex, bob = models.made["gpt-4-turbo"].calls, models.made["gpt-3.5-turbo"].calls
    assert len(alex) == 3 and len(bob) == 2  # five rounds, Alex first (send_to="Alex")
    assert "You are in US election live broadcast with roles(Bob)." in alex[0].messages[0]["content"]
    assert "You are in US election live broadcast with roles(Alex)." in bob[0].messages[0]["content"]
    assert "Democratic candidate (gpt-4-turbo)" in bob[0].prompt  # Bob answered Alex


# ------------------------------------------------------------- guide pages
def test_guide_customize_llms_for_roles_or_actions(models: Models, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Action config > role config > global config, as the page's table says; the environment's
    description in every role's prompt."""
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "gpt-4.yaml").write_text("llm:\n  api_type: openai\n  model: gpt-4o\n  api_key: sk-x\n")
    (tmp_path / "config2.yaml").write_text("llm:\n  api_type: openai\n  model: gpt-4-turbo\n  api_key: sk-x\n")
    monkeypatch.setattr("rolecast.core.config.CONFIG_HOME", tmp_path / "home")
    monkeypatch.setenv("ROLECAST_CONFIG", str(tmp_path / "config2.yaml"))
    runpy.run_path(str(GUIDE / "customize_llms_for_roles_or_actions.py"), run_name="__main__")
    assert "gpt-4o" not in models.made or not models.made["gpt-4o"].calls  # A's own config loses to a1's
    said = {c.messages[0]["content"].split(",")[0]: c for c in models.made["gpt-4-turbo"].calls}
    assert set(said) == {"You are a Democratic candidate", "You are a Voter"}  # a1 (action config), a3 (global)
    b_calls = models.made["gpt-3.5-turbo"].calls  # a2 follows B's config
    assert b_calls and all("Republican candidate" in c.messages[0]["content"] for c in b_calls)
    voter = said["You are a Voter"].messages[0]["content"]
    assert "You are in US election live broadcast with roles(A, B)." in voter


async def test_guide_agent_communication(models: Models, logs: list[str]) -> None:
    """A splits the requirement and publishes the parts itself, its own reply going to no one; B, C
    and D pass the work round until D approves (the page: 3-4 times)."""
    logger.enable("environment")  # to see its warnings
    try:
        env = await runpy.run_path(str(GUIDE / "agent_communication.py"), run_name="guide")["main"]()
    finally:
        logger.disable("environment")
    history = env.history.get()
    subtasks = [m for m in history if m.content.startswith("New user requirements: subtask")]
    assert len(subtasks) == 10 and all(m.cause_by.endswith("AgentAAction") for m in subtasks)
    [dummy] = [m for m in history if m.content == "dummy message"]
    assert dummy.send_to == {rolecast.const.MESSAGE_ROUTE_TO_NONE}
    assert not any("no role has that name" in line for line in logs)  # sent to no one on purpose
    assert [p.split(":")[0] for p in models.prompts()] == ["Do these subtasks", "Compile this work",
                                                           "Review this compilation"] * 2 + [
                                                           "Do these subtasks", "Compile this work"]
    assert history[-1].content == "approved"
