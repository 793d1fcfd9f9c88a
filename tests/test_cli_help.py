"""The command line reads like a well-kept tool (issue 47): help everywhere, no internal names."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from rolecast import cli


def _parser() -> argparse.ArgumentParser:
    return cli.build_parser()


def _walk(parser: argparse.ArgumentParser, path: str = "rolecast"):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help for choice in action._choices_actions}
            for name, sub in action.choices.items():
                yield f"{path} {name}", "(command)", helps.get(name)
                yield from _walk(sub, f"{path} {name}")
        elif not isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
            yield path, "/".join(action.option_strings) or action.dest, action.help


def test_every_command_and_argument_has_help_text():
    missing = [f"{path}: {arg}" for path, arg, text in _walk(_parser()) if not text or text == argparse.SUPPRESS]
    assert missing == []


def test_plain_rolecast_prints_help_and_exits_0():
    out = subprocess.run([sys.executable, "-m", "rolecast.cli"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "usage: rolecast" in out.stdout and "commands" in out.stdout
    assert "error" not in out.stderr


@pytest.mark.parametrize("argv", [["runs"], ["runs", "--help"]])
def test_rolecast_runs_shows_no_internal_name(argv, capsys):
    with pytest.raises(SystemExit):
        cli.main(argv)
    shown = capsys.readouterr()
    assert "runs_command" not in shown.out + shown.err and "COMMAND" in shown.out + shown.err


def test_rolecast_aliases_of_the_top_level_packages():
    import rolecast.actions
    import rolecast.environment
    import rolecast.memory
    import rolecast.roles

    import actions
    import environment
    import memory
    import roles

    assert (rolecast.actions, rolecast.roles, rolecast.environment, rolecast.memory) == (
        actions, roles, environment, memory)
    from rolecast.roles import Role

    assert Role is roles.Role


def test_a_project_whose_own_actions_package_shadows_rolecasts_gets_a_clear_error(tmp_path):
    (tmp_path / "actions").mkdir()
    (tmp_path / "actions" / "__init__.py").write_text("# the user's own actions\n")
    out = subprocess.run([sys.executable, "-c", "import rolecast.roles"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode != 0
    assert "ShadowedPackage" in out.stderr and str(tmp_path / "actions") in out.stderr
    assert "Rename yours" in out.stderr


def test_info_prints_no_library_log_lines():
    out = subprocess.run([sys.executable, "-m", "rolecast.cli", "info"], capture_output=True, text=True, timeout=120,
                         env={**__import__("os").environ, "ROLECAST_ALLOW_MODEL_REQUESTS": "0"})
    assert out.returncode == 0, out.stderr
    assert "| INFO" not in out.stdout + out.stderr


def test_info_shows_the_resolved_context_window_not_provider_default():
    out = subprocess.run([sys.executable, "-m", "rolecast.cli", "info"], capture_output=True, text=True, timeout=120,
                         env={**__import__("os").environ, "ROLECAST_ALLOW_MODEL_REQUESTS": "0"})
    window = next(line for line in out.stdout.splitlines() if line.startswith("context_window"))
    assert "(provider default)" not in window and any(ch.isdigit() for ch in window), window


def test_info_context_window_of_a_known_hosted_model(monkeypatch, capsys):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("ROLECAST_MODEL", "gpt-4o")
    monkeypatch.delenv("ROLECAST_PROVIDER", raising=False)
    assert cli.main(["info"]) == 0
    window = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("context_window"))
    assert "128000" in window and "known for this model" in window
