"""The MetaGPT helpers its examples import: LLM(), the global config, rolecast.const, OutputParser, File,
and what set_env and run_project do as in MetaGPT."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import rolecast.context
from actions import Action
from environment import Environment, Team
from rolecast.const import MESSAGE_ROUTE_TO_ALL, MESSAGE_ROUTE_TO_NONE, ROLECAST_ROOT, TUTORIAL_PATH
from rolecast.context import LLM, Context
from rolecast.core.config import LLMConfig
from rolecast.core.files import File
from rolecast.core.output_parser import OutputParser
from rolecast.errors import OutputParseError, UsageError
from rolecast.testing import FunctionLLM, ScriptedLLM
from roles import Role


def test_llm_is_the_configured_default_model(monkeypatch: pytest.MonkeyPatch) -> None:
    default = ScriptedLLM(["pong"])
    monkeypatch.setattr(rolecast.context, "_DEFAULT", Context(llm=default))
    assert LLM() is default
    own = ScriptedLLM([])
    assert LLM(context=Context(llm=own)) is own
    made: list[object] = []
    monkeypatch.setattr(rolecast.context, "create_llm", lambda cfg, **kw: made.append(cfg) or own)
    assert LLM(LLMConfig(api_type="openai", model="gpt-4o", api_key="sk-x")) is own
    assert made[0].model == "gpt-4o"  # type: ignore[attr-defined]
    with pytest.raises(UsageError, match="LLMConfig"):
        LLM("gpt-4o")  # type: ignore[arg-type]


def test_synchronous_completion_outside_and_inside_an_event_loop() -> None:
    llm = FunctionLLM(lambda messages: f"echo {messages[-1]['content']}")
    assert llm.completion([{"role": "user", "content": "a"}]).text == "echo a"

    async def inside() -> str:
        return llm.completion([{"role": "user", "content": "b"}]).text

    assert asyncio.run(inside()) == "echo b"


def test_global_config_is_the_default_contexts(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(rolecast.context, "_DEFAULT", None)
    from rolecast.context import config

    assert config is rolecast.context.default_context().config
    assert config.workspace.path == ROLECAST_ROOT / "workspace"
    assert TUTORIAL_PATH == ROLECAST_ROOT / "data" / "tutorial_docx"
    assert (MESSAGE_ROUTE_TO_ALL, MESSAGE_ROUTE_TO_NONE) == ("<all>", "<none>")
    path = tmp_path / "cfg.yaml"
    path.write_text(f"workspace:\n  path: {tmp_path / 'ws'}\n")
    from rolecast.core.config import Config

    assert Config.from_yaml(path).workspace.path == tmp_path / "ws"


def test_output_parser_as_metagpt_documents_it() -> None:
    text = 'xxx [1, 2, ["a", "b", [3, 4]], {"x": 5, "y": [6, 7]}] xxx'
    assert OutputParser.extract_struct(text, list) == [1, 2, ["a", "b", [3, 4]], {"x": 5, "y": [6, 7]}]
    assert OutputParser.extract_struct('xxx {"x": 1, "y": {"a": 2}} xxx', dict) == {"x": 1, "y": {"a": 2}}
    assert OutputParser.extract_struct("{'ok': True, 'n': None}", "dict") == {"ok": True, "n": None}
    assert OutputParser.extract_struct("no structure", list) == []
    assert OutputParser.parse_code("Here:\n```python\nprint(1)\n```\nDone") == "print(1)\n"
    assert OutputParser.parse_code("```json\n{}\n```\n```python\nx = 1\n```", lang="python") == "x = 1\n"
    with pytest.raises(OutputParseError):
        OutputParser.parse_code("no code")
    answer = "## Required Python packages:\n```python\n['flask']\n```\n## Task list\n['a.py', 'b.py']\n"
    assert OutputParser.parse_blocks(answer)["Task list"] == "['a.py', 'b.py']"
    assert OutputParser.parse_data(answer) == {"Required Python packages": "['flask']\n", "Task list": ["a.py", "b.py"]}
    mapped = OutputParser.parse_data_with_mapping(f"[CONTENT]\n{answer}[/CONTENT]", {"Task list": (list[str], ...)})
    assert mapped["Task list"] == ["a.py", "b.py"]
    assert OutputParser.parse_python_code("```python\ndef f():\n    return 1\n```") == "def f():\n    return 1\n"
    assert OutputParser.parse_str('name = "value"') == "value"


async def test_file_writes_and_reads(tmp_path: Path) -> None:
    path = await File.write(tmp_path / "a" / "b", "doc.md", "# Title")
    assert path == tmp_path / "a" / "b" / "doc.md"
    assert await File.read(path, chunk_size=2) == b"# Title"
    with pytest.raises(FileNotFoundError):  # not logged and swallowed, as MetaGPT did
        await File.read(tmp_path / "missing")


def test_set_env_refreshes_the_identity_prompt_but_keeps_one_given() -> None:
    own = Action(name="Own")
    own.set_prefix("You are a judge.")
    alex = Role(name="Alex", profile="Host", actions=[Action(name="Say"), own])
    bob = Role(name="Bob", profile="Guest", actions=[Action(name="Say")])
    assert "You are in" not in alex.actions[0].prefix
    Environment(desc="a quiz show").add_roles([alex, bob])
    assert alex.actions[0].prefix.endswith("You are in a quiz show with roles(Bob).")
    assert bob.actions[0].prefix.endswith("You are in a quiz show with roles(Alex).")  # both named, as MetaGPT
    assert own.prefix == "You are a judge."


def test_run_project_publishes_as_metagpt() -> None:
    team = Team(roles=[Role(name="Alex", actions=[Action(name="Say")])])
    team.run_project("an idea")
    [idea] = team.env.history.get()
    assert (idea.role, idea.sent_from, str(idea)) == ("Human", "user", "Human: an idea")
