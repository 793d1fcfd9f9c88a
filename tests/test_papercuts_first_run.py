"""Papercuts a newcomer hit on a first run from a clone (issue 31), each fixed and kept fixed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from support import ROOT

from actions import Action, UserRequirement
from environment import Environment, Team
from memory import any_to_str
from rolecast.core.config import Config
from rolecast.errors import BudgetExceeded, ConfigError, UsageError
from rolecast.testing import FunctionLLM, ScriptedLLM
from roles import Role

# ---------------------------------------------------------------- errors read as what they are


def test_an_error_of_run_sync_is_not_raised_during_another_one():
    """run_sync's own errors used to surface "During handling of the above exception" (a RuntimeError
    of asyncio's, from the check for a running loop) before the real one."""
    team = Team(store=None, llm=FunctionLLM(lambda messages: "ok", model="gpt-4o"),
                roles=[Role(name="Ada", actions=[Action()])])
    team.invest(0.0)
    with pytest.raises(BudgetExceeded) as info:
        team.run_sync(n_round=2, idea="x" * 100)
    assert info.value.__context__ is None
    with pytest.raises(UsageError) as missing:
        Team(store=None, roles=[Role(name="Ada", actions=[Action()])]).run_sync()  # no idea
    assert missing.value.__context__ is None


def test_a_script_failing_in_run_sync_prints_one_traceback(tmp_path: Path) -> None:
    code = ("from environment import Team\nfrom roles import Role\nfrom actions import Action\n"
            "Team(store=None, roles=[Role(name='Ada', actions=[Action()])]).run_sync()\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert "UsageError: nothing to start from" in done.stderr
    assert "During handling of the above exception" not in done.stderr
    assert "no running event loop" not in done.stderr


def test_a_typo_in_the_configuration_says_did_you_mean_on_real_lines(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        Config.from_data({"llm": {"provider": "local", "n_thread": 1}}, source="rolecast.yaml")
    text = str(info.value)
    assert text.splitlines()[0] == "rolecast.yaml is invalid:"
    assert "llm.n_thread: unknown setting (did you mean 'n_threads'?)" in text
    assert "llm.local" not in text  # pydantic's union tag is not a key the user wrote
    (tmp_path / "rolecast.yaml").write_text("llm:\n  provider: local\n  n_thread: 1\n")
    done = subprocess.run([sys.executable, "-m", "rolecast.cli", "info"], capture_output=True, text=True,
                          cwd=tmp_path, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert "\\n" not in done.stderr  # a literal backslash-n
    assert "rolecast.yaml is invalid:\n  llm.n_thread: unknown setting (did you mean 'n_threads'?)" in done.stderr


def test_a_typo_in_a_service_and_at_the_top_level_is_named_as_written() -> None:
    with pytest.raises(ConfigError) as info:
        Config.from_data({"services": {"fast": {"provider": "openai", "base_ur": "x"}}, "llms": {}})
    text = str(info.value)
    assert "services.fast.base_ur: unknown setting (did you mean 'base_url'?)" in text
    assert "llms: unknown setting (did you mean 'llm'?)" in text


# ---------------------------------------------------------------- nothing silently ignored


def test_watch_takes_a_class_bare_name_when_one_action_has_it() -> None:
    assert Role(watch=["UserRequirement"]).rc.watch == Role(watch=[UserRequirement]).rc.watch


async def test_a_role_watching_a_bare_name_reacts() -> None:
    llm = ScriptedLLM(["hello"])
    team = Team(store=None, roles=[Role(name="Ada", watch=["UserRequirement"], actions=[Action()], llm=llm)])
    await team.run(n_round=1, idea="greet")
    assert len(llm.calls) == 1


def test_watch_by_an_ambiguous_or_unknown_bare_name_is_a_usage_error() -> None:
    def elsewhere() -> type[Action]:
        class Twin(Action):  # another class of the same name (another dotted path)
            pass
        return Twin

    class Twin(Action):
        pass

    assert any_to_str(elsewhere()) != any_to_str(Twin)
    with pytest.raises(UsageError, match="ambiguous"):
        Role(watch=["Twin"])
    with pytest.raises(UsageError, match="names no Action class"):
        Role(watch=["UserRequirment"])


async def test_a_role_with_no_actions_and_no_act_of_its_own_stops_the_run_at_its_start() -> None:
    team = Team(store=None, roles=[Role(name="Mute"), Role(name="Ada", actions=[Action()], llm=ScriptedLLM(["x"]))])
    with pytest.raises(UsageError, match="Mute has no actions and no _act of its own"):
        await team.run(n_round=1, idea="go")

    class Echo(Role):
        async def _act(self):  # acts without an action: allowed
            return "echo"

    await Team(store=None, roles=[Echo(name="Echo")]).run(n_round=1, idea="go")


@pytest.mark.parametrize(("call", "wanted"), [
    (lambda: Team(store=None).run_sync(n_rounds=3), "Team.run_sync() got unexpected keyword argument 'n_rounds' "
                                                    "(did you mean 'n_round'?)"),
    (lambda: Team(store=None).run_project(ideas="x"), "(did you mean 'idea'?)"),
    (lambda: Team(store=None).invest(investmen=1.0), "(did you mean 'investment'?)"),
    (lambda: Role().set_actions(action=[]), "(did you mean 'actions'?)"),
    (lambda: Environment().add_roles(role=[]), "(did you mean 'roles'?)"),
])
def test_a_typo_in_a_method_keyword_says_did_you_mean(call, wanted) -> None:
    with pytest.raises(UsageError) as info:
        call()
    assert wanted in str(info.value)


async def test_a_typo_in_an_async_method_keyword_says_did_you_mean() -> None:
    with pytest.raises(UsageError, match=r"\(did you mean 'n_round'\?\)"):
        await Team(store=None).run(n_rouns=1)
    with pytest.raises(UsageError, match=r"\(did you mean 'with_message'\?\)"):
        await Role(actions=[Action()], llm=ScriptedLLM(["x"])).run(with_mesage="hi")


# ---------------------------------------------------------------- the test suite's own papercut


def test_logging_enabled_in_process_follows_stderr_when_it_is_replaced(monkeypatch: pytest.MonkeyPatch) -> None:
    """`rolecast.cli.main` called in-process (as tests do, under capsys) enables logging on the stderr
    of that moment; once that stream was closed, every later line was "Logging error in Loguru
    Handler … I/O operation on closed file" instead of the line."""
    import io

    from loguru import logger

    import rolecast

    monkeypatch.setattr(rolecast, "_enabled_level", rolecast._enabled_level)
    first, second = io.StringIO(), io.StringIO()
    monkeypatch.setattr(sys, "stderr", first)
    try:
        rolecast.enable_logging("INFO")
        first.close()  # (what pytest does to capsys's stream at the end of a test)
        monkeypatch.setattr(sys, "stderr", second)
        logger.info("after the first stream closed")
        assert "after the first stream closed" in second.getvalue()
        assert "Logging error" not in second.getvalue()
    finally:
        logger.remove()
        for name in rolecast._PACKAGES:
            logger.disable(name)


# ---------------------------------------------------------------- the README works from a clone


def test_the_examples_table_counts_the_calls_of_an_example_that_runs_no_team(tmp_path: Path) -> None:
    """Four rows showed `?` calls: only a team's run store was counted. And simulation.py was missing."""
    import runpy

    script = runpy.run_path(str(ROOT / "bench" / "examples_table.py"), run_name="examples_table")
    assert "simulation.py" in [name for name, _ in script["EXAMPLES"]]
    assert all("--no-console" not in args for _, args in script["EXAMPLES"])  # as a newcomer runs them
    row = script["run_example"]("build_customized_agent.py", [], scripted=True, timeout=300)
    assert row.status == 0 and row.calls == 1, row
    assert "| 1 | 0 |" in row.markdown()


def test_the_readme_installs_extras_from_the_clone() -> None:
    """rolecast is not on PyPI: `pip install "rolecast[studio]"` fails in a fresh venv (the README and the
    docs pages it leads to)."""
    readme = "\n".join(p.read_text(encoding="utf-8") for p in [ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
    import re

    assert re.findall(r'pip install "rolecast\[', readme) == []
    for extra in ("studio", "memory", "ray", "otel", "mcp"):
        assert f'pip install -e ".[{extra}]"' in readme, extra
