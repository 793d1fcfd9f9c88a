"""The ``rolecast`` command line reads like a well-kept tool: help with no arguments, help text
on every command and argument, no internal names, quiet logs where the output is the answer,
the packages under rolecast's name, and a clear error when a project's folder shadows them."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rolecast import cli

ROOT = Path(__file__).resolve().parent.parent


def _run(*args: str, cwd: Path | None = None, pythonpath: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": pythonpath or str(ROOT)}
    env.pop("OPENAI_API_KEY", None)
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=120)


def test_rolecast_alone_prints_help_and_exits_0(capsys):
    assert cli.main([]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: rolecast")
    for command in ("info", "ask", "choose", "runs", "eval", "studio", "serve"):
        assert f"    {command} " in out


def test_runs_shows_no_internal_name():
    result = _run("-m", "rolecast.cli", "runs")
    assert result.returncode == 2
    assert "runs_command" not in result.stderr
    assert "SUBCOMMAND" in result.stderr


def _undocumented(parser: argparse.ArgumentParser, path: str) -> list[str]:
    missing = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help for choice in action._choices_actions}
            for name, child in action.choices.items():
                if not helps.get(name):
                    missing.append(f"{path} {name}")
                missing += _undocumented(child, f"{path} {name}")
        elif not isinstance(action, (argparse._HelpAction, argparse._VersionAction)) and not action.help:
            missing.append(f"{path} {'/'.join(action.option_strings) or action.dest}")
    return missing


def test_every_command_and_argument_has_help_text():
    parser = cli.build_parser()
    assert _undocumented(parser, "rolecast") == []
    # the walk reaches every level: runs' subcommands and their arguments are in it
    runs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices["runs"]
    assert "show" in next(a for a in runs._actions if isinstance(a, argparse._SubParsersAction)).choices


def test_info_logs_nothing_and_shows_the_resolved_context_window():
    result = _run("-m", "rolecast.cli", "info")
    assert result.returncode == 0, result.stderr
    assert "| INFO" not in result.stderr and "INFO" not in result.stderr
    window = next(line for line in result.stdout.splitlines() if line.startswith("context_window"))
    assert "(provider default)" not in window
    assert any(ch.isdigit() for ch in window), window


def test_info_context_window_of_a_known_hosted_model(monkeypatch, capsys):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("ROLECAST_MODEL", "gpt-4o")
    monkeypatch.delenv("ROLECAST_PROVIDER", raising=False)
    assert cli.main(["info"]) == 0
    window = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("context_window"))
    assert "128000" in window and "known for this model" in window


def test_quiet_commands_enable_logging_at_warning(monkeypatch):
    levels = []
    monkeypatch.setattr(cli, "enable_logging", levels.append)
    monkeypatch.setattr(cli, "_info", lambda: 0)
    cli.main(["info"])
    cli.main(["-v", "info"])
    assert levels == ["WARNING", "DEBUG"]


def test_packages_have_rolecast_aliases():
    import rolecast.actions
    import rolecast.actions.structured
    import rolecast.environment
    import rolecast.memory
    import rolecast.roles

    import actions
    import actions.structured
    import environment
    import memory
    import roles

    assert rolecast.actions is actions and rolecast.actions.structured is actions.structured
    assert rolecast.roles is roles and rolecast.environment is environment and rolecast.memory is memory
    from rolecast.roles import Role

    assert Role is roles.Role


@pytest.mark.parametrize("statement", ["import rolecast.actions", "from roles import Role"])
def test_a_project_actions_folder_is_a_clear_error(tmp_path, statement):
    (tmp_path / "actions").mkdir()
    (tmp_path / "actions" / "__init__.py").write_text("X = 1\n")
    result = _run("-c", statement, cwd=tmp_path, pythonpath=f"{tmp_path}{os.pathsep}{ROOT}")
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("rolecast.errors.ConfigError:")
    assert str(tmp_path / "actions") in last and "shadows" in last
