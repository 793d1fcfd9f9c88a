"""The live console: plain text off a terminal, rich on one (checked on a real terminal under tmux)."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator

import pytest
from support import ROOT

from actions import Action
from environment import Team
from rolecast.errors import ConfigError
from rolecast.llm.base import BaseLLM, Completion, LLMSettings, Messages, Usage
from rolecast.observe.console import RunConsole
from rolecast.runs.store import RunEvent
from rolecast.testing import ScriptedLLM
from roles import Role


class Say(Action):
    async def run(self, *args):
        return await self._aask("say something")


def team_of_two(llm: BaseLLM) -> Team:
    team = Team(llm=llm, store=None)
    ada = Role(name="Ada", profile="Writer", actions=[Say()])
    ben = Role(name="Ben", profile="Critic", actions=[Say()])
    ben._watch([Say])
    ada._watch(["actions.action.UserRequirement"])
    team.hire([ada, ben])
    return team


async def test_a_team_run_shows_rounds_thinking_messages_and_a_summary_as_plain_text():
    out = io.StringIO()
    team = team_of_two(ScriptedLLM(["first draft", "a critique"]))
    await team.run(n_round=2, idea="write a haiku", console=RunConsole(out))
    lines = out.getvalue().splitlines()
    assert lines[0].startswith(f"── run {team.run_id} · team Team · 2 role(s)")
    assert "idea: write a haiku" in lines
    assert lines.index("── round 1 ──") < lines.index("… Ada (Writer) is thinking on Say")
    assert "Ada (Writer) → everyone · Say" in lines and "    first draft" in lines
    assert lines.index("── round 2 ──") < lines.index("Ben (Critic) → everyone · Say")
    summary = lines[lines.index("── run summary ──") + 1 :]
    assert summary[0].split() == ["role", "messages", "calls", "prompt", "tok", "completion", "tok", "cost"]
    # messages and model calls per role; the scripted model is free
    ada = summary[1].split()
    assert ada[:4] == ["Ada", "(Writer)", "1", "1"] and int(ada[4]) > 0 and int(ada[5]) > 0 and ada[6] == "$0.0000"
    assert summary[2].split()[:4] == ["Ben", "(Critic)", "1", "1"]
    assert summary[3].split()[:3] == ["total", "2", "2"]
    assert summary[-1] == f"stopped: n_round after 2 round(s) · run id {team.run_id}"
    assert "\x1b[" not in out.getvalue()  # no terminal codes off a terminal


async def test_the_console_is_off_by_default_and_shows_a_failure():
    out = io.StringIO()
    team = team_of_two(ScriptedLLM([ValueError("model on fire")]))
    with pytest.raises(Exception):  # noqa: B017 - the team stops on the role's failure
        await team.run(n_round=2, idea="go", console=RunConsole(out))
    text = out.getvalue()
    assert "✗ Ada (Writer) failed: ActionFailed" in text and "model on fire" in text
    assert "stopped: error: ActionFailed after 1 round(s)" in text
    quiet = team_of_two(ScriptedLLM(["x"]))
    await quiet.run(n_round=1, idea="go")  # stdout is not a terminal here: no console subscribed
    assert not [s for s in quiet.run_log._subscribers if isinstance(s, RunConsole)]


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


async def test_a_script_run_in_a_terminal_shows_its_run_unasked_as_metagpt_streams(monkeypatch):
    # a ported MetaGPT script says nothing of a console: run by a person, it shows the run as it goes
    monkeypatch.delenv("ROLECAST_CONSOLE", raising=False)
    monkeypatch.setattr("sys.stdout", Terminal())
    team = team_of_two(ScriptedLLM(["first draft", "a critique"]))
    await team.run(n_round=2, idea="write a haiku")
    shown = sys.stdout.getvalue()
    assert "first draft" in shown and "a critique" in shown and "run summary" in shown
    # console=False (a library's run, a server's) stays quiet on a terminal too
    monkeypatch.setattr("sys.stdout", Terminal())
    await team_of_two(ScriptedLLM(["x", "y"])).run(n_round=2, idea="go", console=False)
    assert sys.stdout.getvalue() == ""


async def test_rolecast_console_turns_the_view_on_or_off_for_every_run_that_does_not_say(monkeypatch):
    monkeypatch.setattr("sys.stdout", io.StringIO())  # a pipe: off unless asked
    monkeypatch.setenv("ROLECAST_CONSOLE", "1")
    await team_of_two(ScriptedLLM(["first draft", "a critique"])).run(n_round=2, idea="go")
    assert "Ada (Writer) → everyone · Say" in sys.stdout.getvalue().splitlines()  # plain lines off a terminal
    monkeypatch.setattr("sys.stdout", Terminal())
    monkeypatch.setenv("ROLECAST_CONSOLE", "0")
    await team_of_two(ScriptedLLM(["x", "y"])).run(n_round=2, idea="go")
    assert sys.stdout.getvalue() == ""
    monkeypatch.setenv("ROLECAST_CONSOLE", "loud")
    with pytest.raises(ConfigError, match="ROLECAST_CONSOLE='loud'"):
        await team_of_two(ScriptedLLM(["x"])).run(n_round=1, idea="go")


def test_model_calls_are_counted_per_role_and_long_messages_clipped():
    out = io.StringIO()
    console = RunConsole(out, max_lines=2)
    console(RunEvent("r", "run_started", {"team": "T", "roles": [{"name": "Ada", "profile": "Writer"}]}))
    for tokens in ((100, 20), (50, 5)):
        console(RunEvent("r", "llm_call", {"usage": {"prompt_tokens": tokens[0], "completion_tokens": tokens[1]},
                                           "cost": 0.01}, 1, "Ada"))
    console(RunEvent("r", "message", {"message": {"content": "a\nb\nc\nd", "sent_from": "Ada",
                                                  "send_to": ["Ben"], "cause_by": "x.Write"}}, 1, "Ada"))
    console(RunEvent("r", "run_stopped", {"reason": "n_round", "rounds": 1, "cost": 0.02}))
    stats = console.roles["Ada"]
    assert (stats.calls, stats.prompt_tokens, stats.completion_tokens, stats.messages) == (2, 150, 25, 1)
    text = out.getvalue()
    assert "Ada (Writer) → Ben · Write\n    a\n    b\n    … (2 more lines)" in text
    assert "$0.0200" in text
    console(RunEvent("r", "message", {"message": {"content": "late"}}))  # closed: ignored
    assert "late" not in out.getvalue()


class StreamingLLM(BaseLLM):
    """A provider that streams its answer in three chunks."""

    reaches_a_model = False  # a test double

    async def _complete(self, messages: Messages, *, stop, settings, structured=None, tools=None) -> Completion:
        return Completion("one two three")

    async def _stream(self, messages: Messages, *, stop, settings: LLMSettings) -> AsyncIterator[str | Usage]:
        for chunk in ("one ", "two ", "three"):
            yield chunk
        yield Usage(5, 3)


async def test_tokens_stream_to_the_terminal_console_only():
    team = team_of_two(StreamingLLM("streamer"))
    tokens: list[tuple[str, str]] = []
    team.run_log.subscribe(lambda e: tokens.append((e.role, e.data["text"])) if e.kind == "llm_token" else None)
    out = io.StringIO()
    history = await team.run(n_round=1, idea="go", console=RunConsole(out, rich=True, width=100))
    assert history[-1].content == "one two three"  # the same answer, streamed
    assert tokens == [("Ada", "one "), ("Ada", "two "), ("Ada", "three")]
    assert "run summary" in out.getvalue() and "Ada (Writer) → everyone · Say" in out.getvalue()
    tokens.clear()
    await team_of_two(StreamingLLM("streamer")).run(n_round=1, idea="go", console=RunConsole(io.StringIO()))
    assert tokens == []  # a plain-text console does not ask for tokens: no streaming


# ----------------------------------------------------------------- a real terminal
def _screen(sock: str, session: str) -> str:
    return subprocess.run(["tmux", "-L", sock, "capture-pane", "-p", "-t", session], capture_output=True,
                          text=True, check=True).stdout


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (apt-get install tmux)")
def test_the_multi_agent_example_in_a_terminal_shows_the_live_console():
    sock, session = f"rolecast-test-{uuid.uuid4().hex[:8]}", "example"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ROLECAST_", "TMUX"))}
    env.update(PYTHONPATH=str(ROOT), TERM="xterm-256color")
    command = (f"cd {ROOT} && python examples/build_customized_multi_agents.py --scripted "
               "'write a function that reverses a string'; echo EXIT=$?; sleep 60")
    subprocess.run(["tmux", "-L", sock, "new-session", "-d", "-s", session, "-x", "120", "-y", "60", command],
                   env=env, check=True)
    try:
        deadline, screen = time.monotonic() + 60, ""
        while time.monotonic() < deadline and "EXIT=" not in screen:
            time.sleep(0.3)
            screen = _screen(sock, session)
        assert "EXIT=0" in screen, screen
        assert "round 1" in screen and "round 2" in screen
        assert "Alice (SimpleCoder) → everyone · SimpleWriteCode" in screen
        assert "def reverse(text):" in screen  # the scripted model wrote about the idea given
        assert "Bob (SimpleTester) → everyone · SimpleWriteTest" in screen
        assert "run summary" in screen
        rows = {line.split("│")[1].split()[0]: line.split("│")[2:] for line in screen.splitlines()
                if line.startswith("│")}
        assert [cell.strip() for cell in rows["Alice"][:2]] == ["1", "1"]  # 1 message, 1 model call
        assert [cell.strip() for cell in rows["total"][:2]] == ["5", "5"]
        assert "stopped: n_round after 5 round(s) · run id" in screen
    finally:
        subprocess.run(["tmux", "-L", sock, "kill-server"], check=False)
