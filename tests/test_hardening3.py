"""Hardening 3 (issue 26): what a hostile probe and a newcomer broke, each fixed and kept fixed.

Each test names its item of the issue and the hostile input it feeds.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from servers import FakeOpenAIServer, Reply, completion_body, fast_openai_client

from rolecast.errors import LLMAPIError, LLMRateLimitError, LLMResponseError, LLMTimeoutError, UsageError
from rolecast.llm.openai.provider import OpenAILLM

#: item 2's hostile body: 200 kB of nested brackets (100,000 levels)
NESTED_200KB = b"[" * 100_000 + b"]" * 100_000


pytestmark = pytest.mark.usefixtures("close_fast_clients")


def make_llm(url: str, **kwargs: Any) -> OpenAILLM:
    return fast_openai_client(url, **{"max_retries": 1, **kwargs})


# ------------------------------------------------------------------ item 2: bounded, typed decoding
@pytest.mark.allow_model_requests  # a fake server on 127.0.0.1
async def test_item2_a_200kb_nested_array_answer_is_a_response_error_not_recursion(
    fake_openai: FakeOpenAIServer,
) -> None:
    fake_openai.handler = lambda request: Reply(raw=NESTED_200KB)
    with pytest.raises(LLMResponseError, match="nested deeper than 32 levels"):
        await make_llm(fake_openai.url).ask("hi")
    assert len(fake_openai.requests) == 2  # an unusable answer is retried like a 5xx, then typed


@pytest.mark.allow_model_requests  # a fake server on 127.0.0.1
async def test_item2_nesting_under_the_recursion_limit_is_refused_before_the_sdk_builds_it(
    fake_openai: FakeOpenAIServer,
) -> None:
    # 500 levels decode fine in C, but the SDK's model building and repr() recurse in Python
    deep: Any = "x"
    for _ in range(500):
        deep = [deep]
    fake_openai.handler = lambda request: Reply(body={**completion_body("hi"), "extra": deep})
    with pytest.raises(LLMResponseError, match="nested deeper"):
        await make_llm(fake_openai.url, max_retries=0).ask("hi")


@pytest.mark.allow_model_requests  # a fake server on 127.0.0.1
async def test_item2_a_nested_error_body_and_a_nested_stream_event_are_typed(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.push(Reply(status=400, raw=NESTED_200KB))
    with pytest.raises(LLMAPIError) as info:
        await make_llm(fake_openai.url).ask("hi")
    assert info.value.status_code == 400 and isinstance(info.value.body, str)  # the text, not 100,000 lists
    repr(info.value.body)  # (would recurse on the decoded lists)
    fake_openai.push(Reply(sse_lines=[b"data: " + NESTED_200KB, b""]))
    with pytest.raises(LLMResponseError, match="stream event is JSON nested deeper"):
        async for _ in make_llm(fake_openai.url, max_retries=0).stream("hi"):
            pass


@pytest.mark.allow_model_requests  # a fake server on 127.0.0.1
async def test_item2_a_nested_embeddings_body_is_typed(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.handler = lambda request: Reply(raw=NESTED_200KB)
    with pytest.raises(LLMResponseError, match="embeddings is JSON nested deeper"):
        await make_llm(fake_openai.url, max_retries=0).embed(["a"])


@pytest.mark.allow_model_requests  # a fake server on 127.0.0.1
async def test_item2_a_normal_completion_still_reads(fake_openai: FakeOpenAIServer) -> None:
    tool = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    fake_openai.push(Reply(text="Hello"), Reply(text=None, tool_calls=[tool]))
    llm = make_llm(fake_openai.url)
    assert await llm.ask("hi") == "Hello"
    completion = await llm.complete([{"role": "user", "content": "hi"}], tools=[{"type": "function",
                                    "function": {"name": "f", "parameters": {"type": "object"}}}])
    assert completion.tool_calls[0].name == "f" and completion.usage.prompt_tokens == 11


# ------------------------------------------------------------------ item 9: a deadline per call
@pytest.mark.allow_model_requests  # a fake server on 127.0.0.1
async def test_item9_retry_after_3600_with_timeout_2_fails_at_once_saying_why(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.handler = lambda request: Reply(status=429, body={"error": {"message": "slow down"}},
                                           headers={"Retry-After": "3600"})
    llm = make_llm(fake_openai.url, timeout=2.0, max_retries=3, retry_after_max=30.0)
    started = time.monotonic()
    with pytest.raises(LLMRateLimitError, match=r"server asked to wait 3600 s, past the call's deadline"):
        await llm.ask("hi")
    assert time.monotonic() - started < 2.0  # not the 30 s cap, not 3 × 30 s
    assert len(fake_openai.requests) == 1


@pytest.mark.allow_model_requests  # a fake server on 127.0.0.1
async def test_item9_the_deadline_bounds_attempts_and_waits_together(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.handler = lambda request: Reply(delay=3.0)  # every attempt slower than the deadline
    llm = make_llm(fake_openai.url, timeout=2.0, max_retries=3, deadline=1.0)
    started = time.monotonic()
    with pytest.raises(LLMTimeoutError):
        await llm.ask("hi")
    assert time.monotonic() - started < 1.8  # one attempt cut at the deadline, no second one begun


@pytest.mark.allow_model_requests  # a fake server on 127.0.0.1
async def test_item9_a_short_retry_after_inside_the_deadline_is_honoured(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.push(Reply(status=429, body={"error": {"message": "slow down"}}, headers={"Retry-After": "0.3"}),
                Reply(text="ok"))
    llm = make_llm(fake_openai.url, timeout=2.0, max_retries=3)
    started = time.monotonic()
    assert await llm.ask("hi") == "ok"
    assert time.monotonic() - started >= 0.3 and len(fake_openai.requests) == 2


def test_item9_the_default_deadline_is_the_attempts_timeouts_and_is_configurable() -> None:
    from rolecast.core.config import OpenAIConfig
    from rolecast.errors import ConfigError

    llm = OpenAILLM("m", base_url="http://127.0.0.1:9/v1", timeout=2.0, max_retries=3)
    assert llm._total(2.0) == 8.0
    assert OpenAILLM.from_config(OpenAIConfig(base_url="http://127.0.0.1:9/v1", deadline=5)).deadline == 5
    with pytest.raises(ConfigError):
        OpenAILLM("m", base_url="http://127.0.0.1:9/v1", deadline=0)


# ------------------------------------------------------------------ item 5: wrong types
def test_item5_role_actions_given_one_action_class_or_instance_means_a_list_of_one() -> None:
    from actions import Action
    from roles import Role

    class Outline(Action):
        pass

    assert [type(a) for a in Role(name="W", actions=Outline).actions] == [Outline]  # was: 'ModelMetaclass' not iterable
    assert [type(a) for a in Role(name="W", actions=Outline()).actions] == [Outline]
    for wrong in ("Outline", 42, {"Outline": 1}):
        with pytest.raises(UsageError, match="actions= takes a list of Action instances or classes"):
            Role(name="W", actions=wrong)


def test_item5_team_hire_given_one_role_hires_it_and_refuses_what_is_not_a_role() -> None:
    from environment import Team
    from roles import Role

    class Developer(Role):
        pass

    team = Team(store=None)
    team.hire(Developer())  # was: AttributeError: 'tuple' object has no attribute 'name'
    team.hire(Role(name="Tess"))
    assert sorted(team.env.roles) == ["Developer", "Tess"]
    with pytest.raises(UsageError, match=r"only roles .* can be hired, not str 'Bob'"):
        team.hire(["Bob"])
    with pytest.raises(UsageError, match="a list of Role instances, not str"):
        team.hire("Bob")


def test_item5_a_model_name_string_is_resolved_and_anything_else_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
) -> None:
    from environment import Team
    from roles import Role

    monkeypatch.chdir(tmp_path)  # no rolecast.yaml here
    for name in ("OPENAI_BASE_URL", "ROLECAST_MODEL", "ROLECAST_PROVIDER", "ROLECAST_CONFIG", "ROLECAST_MODEL_PATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    team = Team(llm="gpt-4o", store=None)  # was: accepted, then 'str' object has no attribute 'ask' at run time
    model = team.context.given_llm
    assert isinstance(model, OpenAILLM) and model.model == "gpt-4o"
    assert isinstance(Role(name="R", llm="gpt-4o-mini").llm, OpenAILLM)
    for wrong in (42, ["gpt-4o"], object()):
        with pytest.raises(UsageError, match=r"takes a model .* or a model name"):
            Team(llm=wrong, store=None)
    with pytest.raises(UsageError, match=r"Role\(llm=...\) takes a model"):
        Role(name="R", llm=3.5)
    from actions import Action

    with pytest.raises(UsageError, match=r"Action\(llm=...\) takes a model"):
        Action(llm=3.5)
    assert isinstance(Action(llm="gpt-4o-mini").llm, OpenAILLM)
    with pytest.raises(UsageError, match=r"llms\['fast'\] takes a model"):
        Team(llms={"fast": 1}, store=None)


# ------------------------------------------------------------------ item 6: silently accepted
@pytest.mark.parametrize("idea", [None, 123, "", "   ", ["an idea"]])
def test_item6_run_project_refuses_an_idea_that_is_not_text(idea: Any) -> None:
    from environment import Team
    from roles import Role

    team = Team(store=None, roles=[Role(name="A")])
    with pytest.raises(UsageError, match=r"run_project\(\) takes the idea as text"):
        team.run_project(idea)
    assert team.env.history.get() == []  # nothing published (with None the model invented a task)


async def test_item6_a_team_with_no_roles_or_no_idea_is_refused_not_run_for_nothing() -> None:
    from actions import Action
    from environment import Team
    from rolecast.testing import ScriptedLLM
    from roles import Role

    with pytest.raises(UsageError, match="the team has no roles"):
        await Team(store=None).run(n_round=2, idea="write a haiku")  # returned only the user's message
    team = Team(store=None, llm=ScriptedLLM(["a haiku"]), roles=[Role(name="A", actions=[Action()])])
    with pytest.raises(UsageError, match="nothing to start from"):
        await team.run(n_round=2)  # returned []
    history = await team.run(n_round=1, idea="write a haiku")  # and with an idea it runs
    assert [m.content for m in history] == ["write a haiku", "a haiku"]


# ------------------------------------------------------------------ item 7: an invalid state answer
async def test_item7_an_invalid_state_answer_is_an_event_with_the_raw_answer_and_the_role(tmp_path: Path) -> None:
    import io

    from actions import Action
    from environment import Team
    from rolecast.observe.console import RunConsole
    from rolecast.runs import STATE_INVALID, open_store
    from rolecast.testing import ScriptedLLM
    from roles import Role

    class First(Action):
        pass

    class Second(Action):
        pass

    hostile = "I think action 1 is best!\n\x1b[31m"  # not a number: the turn ends
    carl = Role(name="Carl", actions=[First, Second], llm=ScriptedLLM([hostile]))
    carl._set_react_mode("react", 3)
    out = io.StringIO()
    store = tmp_path / "runs.db"
    team = Team(store=store, roles=[carl])
    await team.run(n_round=1, idea="go", console=RunConsole(out))
    events = list(open_store(store).events(team.run_id, [STATE_INVALID]))
    assert [(e.role, e.data["raw"], e.data["n_options"]) for e in events] == [("Carl", hostile, 2)]
    shown = out.getvalue()
    assert "Carl" in shown and "choose the next action" in shown and "I think action 1 is best!" in shown


async def test_item7_an_invalid_state_answer_is_an_event_on_the_roles_turn_span() -> None:
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from actions import Action
    from environment import Team
    from rolecast.observe.tracing import instrument
    from rolecast.testing import ScriptedLLM
    from roles import Role

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    carl = Role(name="Carl", actions=[Action(name="A"), Action(name="B")], llm=ScriptedLLM(["banana"]))
    carl._set_react_mode("react", 3)
    team = Team(store=None, roles=[carl])
    instrument(team, provider)
    await team.run(n_round=1, idea="go")
    turn = next(s for s in exporter.get_finished_spans() if s.name == "turn Carl")
    [event] = [e for e in turn.events if e.name == "state_invalid"]
    assert event.attributes["rolecast.state.raw"] == "banana" and event.attributes["rolecast.role"] == "Carl"


# ------------------------------------------------------------------ item 11: control characters (console)
async def test_item11_the_console_shows_control_characters_in_names_and_ids_escaped() -> None:
    import io

    from actions import Action
    from environment import Team
    from rolecast.observe.console import RunConsole
    from rolecast.runs import RUN_STARTED, RUN_STOPPED, RunEvent
    from rolecast.testing import ScriptedLLM
    from roles import Role

    hostile_name = "Eve\x1b[2J\r\u202eevil"  # clears the screen, overwrites the line, reverses the text
    answer = "ok\x1b[31m red\nsecond line"
    for rich in (False, True):
        out = io.StringIO()
        team = Team(store=None, roles=[Role(name=hostile_name, actions=[Action()], llm=ScriptedLLM([answer]))])
        await team.run(n_round=1, idea="go", console=RunConsole(out, rich=rich, width=200))
        shown = out.getvalue()
        assert "Eve\\x1b[2J\\r\\u202eevil" in shown and "\u202e" not in shown
        assert "ok\\x1b[31m red" in shown and "second line" in shown
        if not rich:  # (rich draws its own colours with ESC and redraws with CR; the plain view does neither)
            assert "\x1b" not in shown and "\r" not in shown
    # a run id from a store written before run ids were checked: it sets the terminal's title
    hostile_id = "run\x1b]0;pwned\x07"
    out = io.StringIO()
    console = RunConsole(out, rich=False)
    console(RunEvent(hostile_id, RUN_STARTED, {"roles": [], "idea": "x"}))
    console(RunEvent(hostile_id, RUN_STOPPED, {"reason": "idle", "rounds": 0}))
    assert "\x1b" not in out.getvalue() and "\x07" not in out.getvalue()
    assert out.getvalue().count("run\\x1b]0;pwned\\x07") == 2  # the header and the summary


# ------------------------------------------------------------------ item 12: the sandbox as root
root_on_linux = pytest.mark.skipif(
    not sys.platform.startswith("linux") or os.geteuid() != 0, reason="the parent must be root on Linux"
)


@root_on_linux
async def test_item12_as_root_model_code_runs_under_an_unprivileged_uid_even_with_the_interpreter_under_root() -> None:
    from actions.tools.sandbox import run_python

    code = "import os, subprocess, sys\nprint(os.getuid(), os.geteuid())\n" \
           "print(subprocess.run([sys.executable, '-c', 'import os; print(os.getuid())'], " \
           "capture_output=True, text=True).stdout.strip())\nopen('/root/owned-by-model', 'w')"
    result = await run_python(code, timeout=30)
    uid, euid, child_uid = result.stdout.split()[:3]
    assert uid == euid == child_uid and int(uid) != 0  # also a child it starts with sys.executable
    assert "PermissionError" in result.stderr and not os.path.exists("/root/owned-by-model")


@root_on_linux
async def test_item12_the_uid_0_warning_says_what_to_do(monkeypatch: pytest.MonkeyPatch) -> None:
    from loguru import logger

    from actions.tools import confinement

    async def nobody_else(uid: int, via_handle: bool = False) -> bool:
        return False  # as on a machine with no /proc handle either

    monkeypatch.setattr(confinement, "_runs_as", nobody_else)
    monkeypatch.setattr(confinement, "_PROBED", {})
    said: list[str] = []
    sink = logger.add(lambda m: said.append(str(m)), level="WARNING")
    logger.enable("actions")  # (a library logs only when the application enables it)
    try:
        assert await confinement.sandbox_uid(None) is None
    finally:
        logger.disable("actions")
        logger.remove(sink)
    [warning] = said
    assert "runs as uid 0 (root) with every capability dropped" in warning
    assert "install Python outside /root" in warning and "pass user=" in warning and sys.executable in warning


# ------------------------------------------------------------------ item 8: the main job's honest summary
def _main_job() -> Any:
    import runpy

    examples = Path(__file__).resolve().parents[1] / "examples"
    sys.path.insert(0, str(examples))  # the example imports its sibling artifact_checks
    try:
        return runpy.run_path(str(examples / "build_customized_multi_agents.py"), run_name="main_job")["main"]
    finally:
        sys.path.remove(str(examples))


def _model(code: str, tests: str) -> Any:
    from rolecast.testing import FunctionLLM

    def answer(messages: list[dict[str, Any]]) -> str:
        prompt = messages[-1]["content"]
        if "Write a python function" in prompt:
            return code
        if "unit tests" in prompt:
            return tests
        return "The tests miss the empty list."

    return FunctionLLM(answer)


PRODUCT = "```python\ndef product(xs):\n    r = 1\n    for x in xs:\n        r *= x\n    return r\n```"


async def test_item8_a_tester_answer_that_never_parses_is_a_failed_artifact_in_the_summary(
    capsys: pytest.CaptureFixture[str],
) -> None:
    hostile = "f'Assertion failed: {assert} …'"  # what the small model kept answering, three times
    main = _main_job()
    await main("product of a list", console=False, llm=_model(PRODUCT, hostile), n_round=4)
    out = capsys.readouterr().out.split("=== artifacts ===")[1]
    assert "code    (Alice): PASSED — parses, defines product(), runs" in out
    assert "tests   (Bob): FAILED — the tests do not parse" in out
    assert "review  (Charlie): PASSED" in out and "2 of 3 artifacts passed their checks; failed: tests" in out
    with pytest.raises(SystemExit) as info:  # --strict makes it the exit status too
        await main("product of a list", console=False, llm=_model(PRODUCT, hostile), n_round=4, strict=True)
    assert info.value.code == 1


async def test_item8_code_that_fails_when_run_and_tests_that_fail_are_said_so(
    capsys: pytest.CaptureFixture[str],
) -> None:
    broken = "```python\ndef product(xs):\n    return 0\n\nraise ValueError('boom at import')\n```"
    wrong = "```python\ndef test_product():\n    assert product([2, 3]) == 6\n\ndef test_empty():\n" \
            "    assert product([]) == 1\n```"
    await _main_job()("product of a list", console=False, llm=_model(broken, wrong), n_round=4)
    out = capsys.readouterr().out.split("=== artifacts ===")[1]
    assert "code    (Alice): FAILED — defines product() but fails when run: ValueError: boom at import" in out
    assert "tests   (Bob): FAILED — parse, but could not be run: ValueError: boom at import" in out
    fixed = PRODUCT.replace("r = 1", "r = 0")  # runs, but wrong: both tests fail
    await _main_job()("product of a list", console=False, llm=_model(fixed, wrong), n_round=4)
    out = capsys.readouterr().out.split("=== artifacts ===")[1]
    assert "tests   (Bob): FAILED — 2 test(s) ran against the code: 0 passed, 2 failed" in out


# ------------------------------------------------------------------ item 13: the README's examples table, generated
def test_item13_the_examples_table_is_written_from_runs_between_markers_and_can_be_rerun(tmp_path: Path) -> None:
    import runpy

    root = Path(__file__).resolve().parents[1]
    script = runpy.run_path(str(root / "bench" / "examples_table.py"), run_name="examples_table")
    readme = tmp_path / "README.md"
    stale = "| `react_agent.py` | 41 s | never follows the ReAct format |"  # what had drifted
    readme.write_text(f"intro\n{script['BEGIN']}\n{stale}\n{script['END']}\nafter\n", encoding="utf-8")
    for _ in range(2):  # a rerun replaces the table, it does not add one
        assert script["main"](["--scripted", "--only", "build_customized_multi_agents.py",
                               "--readme", str(readme), "--write"]) == 0
    text = readme.read_text(encoding="utf-8")
    assert stale not in text and text.count("| example | wall time |") == 1
    assert text.startswith("intro\n") and text.endswith("after\n")
    row = next(line for line in text.splitlines() if line.startswith("| `build_customized_multi_agents.py`"))
    assert row.endswith("| 5 | 0 | 3 of 3 artifacts passed their checks |")  # calls from the run store, exit 0
    assert "Generated by `python bench/examples_table.py --write`" in text
    real = (root / "docs" / "guides" / "embedded-model.md").read_text(encoding="utf-8")
    assert real.count(script["BEGIN"]) == 1 and real.count(script["END"]) == 1  # the docs page holds the markers


# ================================================================== phase 2: the runs package
DOT_INJECTION = 'A" [URL="javascript:alert(1)" image="/etc/passwd"]; "B'  # item 3's hostile role name
MERMAID_INJECTION = "M\nparticipant Evil\nNote over M: pwned"
ESCAPE_NAME = "Eve\x1b[2J\x1b]0;pwned\x07"  # item 11's: clears the screen, sets the terminal's title


def _hostile_run(db: Path, run_id: str = "hostile-1") -> None:
    from actions import Action
    from environment import Team
    from rolecast.testing import ScriptedLLM
    from roles import Role

    roles = [Role(name=name, actions=[Action()], llm=ScriptedLLM([f"hello from {i}\x1b[31m"]))
             for i, name in enumerate((DOT_INJECTION, MERMAID_INJECTION, ESCAPE_NAME))]
    Team(store=db, run_id=run_id, roles=roles).run_sync(n_round=1, idea="go")


# ------------------------------------------------------------------ item 1: run ids
@pytest.mark.parametrize("bad", ["/tmp/x", "../../x", "a/b", "..", ".hidden", "", "a b", "x" * 129, "é", "\ud800"])
def test_item1_a_run_id_that_is_not_a_plain_name_is_a_usage_error(bad: str, tmp_path: Path) -> None:
    from environment import Team
    from rolecast.runs import RunLog, check_run_id, open_store

    with pytest.raises(UsageError, match="is not a run id: use 1 to 128 ASCII letters"):
        check_run_id(bad)
    if bad:  # ("" asks a team or a log for a fresh id)
        with pytest.raises(UsageError, match="is not a run id"):
            Team(store=tmp_path / "runs.db", run_id=bad)
        with pytest.raises(UsageError, match="is not a run id"):
            RunLog(open_store(tmp_path / "runs.db"), bad)


def test_item1_a_failing_run_writes_its_checkpoint_inside_the_store_folder_only(tmp_path: Path) -> None:
    from actions import Action
    from environment import Team
    from rolecast.errors import RolecastError
    from rolecast.testing import ScriptedLLM
    from roles import Role

    outside = tmp_path / "elsewhere"
    with pytest.raises(UsageError):  # an absolute path as a run id wrote team.json there
        Team(store=tmp_path / "store" / "runs.db", run_id=str(outside))
    team = Team(store=tmp_path / "store" / "runs.db", run_id="fails-1",
                roles=[Role(name="A", actions=[Action()], llm=ScriptedLLM([]))])  # no answer: the turn fails
    with pytest.raises(RolecastError) as info:
        team.run_sync(n_round=1, idea="go")
    assert info.value.checkpoint == tmp_path / "store" / "checkpoints" / "fails-1"  # type: ignore[attr-defined]
    assert not outside.exists()


def test_item1_the_cli_refuses_a_bad_run_id_with_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    from rolecast.cli import main

    db = tmp_path / "runs.db"
    _hostile_run(db)
    for bad in ("../hostile-1", "\udced\udca0\udc80"):  # the second: a lone surrogate as argv decodes it
        assert main(["runs", "show", bad, "--store", str(db)]) == 2
        assert "UsageError" in capsys.readouterr().err


# ------------------------------------------------------------------ item 3: graph injection
def test_item3_dot_quotes_and_escapes_every_identifier_and_label(tmp_path: Path) -> None:
    import re

    from rolecast.runs import graph_run, open_store

    db = tmp_path / "runs.db"
    _hostile_run(db)
    dot = graph_run(open_store(db, read_only=True), "hostile-1", "dot")
    string = r'"(?:[^"\\]|\\.)*"'
    node = re.compile(rf"    {string} \[label={string}\];")
    edge = re.compile(rf"    {string} -> {string} \[label={string}\];")
    lines = dot.splitlines()
    assert lines[:2] == ["digraph run {", "    rankdir=LR;"] and lines[-1] == "}"
    assert all(node.fullmatch(line) or edge.fullmatch(line) for line in lines[2:-1]), dot
    assert '[label="A\\" [URL=\\"javascript:alert(1)\\" image=\\"/etc/passwd\\"]; \\"B"];' in dot  # one label
    assert '\\"javascript:alert(1)\\"' in dot  # the name is there, as text of a label
    assert "\x1b" not in dot and "\\\\x1b" in dot  # (the escape written as text, its backslash escaped)


def test_item3_mermaid_names_and_texts_cannot_add_lines(tmp_path: Path) -> None:
    import re

    from rolecast.runs import graph_run, open_store

    db = tmp_path / "runs.db"
    _hostile_run(db)
    mermaid = graph_run(open_store(db, read_only=True), "hostile-1", "mermaid")
    text = r"[A-Za-z0-9 _.,()#;-]*"
    ident = r"[A-Za-z_][A-Za-z0-9_]*"
    allowed = [re.compile(p) for p in (
        "sequenceDiagram", rf"    participant {ident} as {text}", rf"    Note over {ident},{ident}: round \d+",
        rf"    {ident}->>{ident}: {text}",
    )]
    lines = mermaid.splitlines()
    assert all(any(p.fullmatch(line) for p in allowed) for line in lines), mermaid
    participants = [line for line in lines if line.startswith("    participant ")]
    assert len(participants) == 4  # user and the three roles: no "participant Evil" added
    assert not any(line.strip().startswith(("participant Evil", "Note over M")) for line in lines)


# ------------------------------------------------------------------ item 4: lone surrogates
async def test_item4_a_lone_surrogate_in_an_answer_is_stored_escaped_and_read_back_as_the_role_saw_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    import json

    from actions import Action
    from environment import Team
    from rolecast.cli import main
    from rolecast.runs import MESSAGE, open_store
    from rolecast.testing import ScriptedLLM
    from roles import Role

    answer = "half a pair: \ud800 and more"  # not encodable as UTF-8; the turn failed with ActionFailed
    db = tmp_path / "runs.db"
    role = Role(name="A", actions=[Action()], llm=ScriptedLLM([answer]))
    history = await Team(store=db, run_id="surrogate-1", roles=[role]).run(n_round=1, idea="go")
    assert history[-1].content == answer and role.get_memories()[-1].content == answer
    stored = [e.data["message"]["content"] for e in open_store(db, read_only=True).events("surrogate-1", [MESSAGE])]
    assert stored[-1] == answer  # the very string, back from JSON's \ud800 escape
    assert main(["runs", "export", "surrogate-1", "--store", str(db)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(json.loads(line)["data"].get("message", {}).get("content") == answer for line in lines)
    assert main(["runs", "show", "surrogate-1", "--store", str(db)]) == 0
    assert "half a pair: \\ud800 and more" in capsys.readouterr().out  # shown escaped, printable
    with pytest.raises(UsageError, match="is not a run id"):
        Team(store=db, run_id="\ud800")  # was: UnicodeEncodeError


# ------------------------------------------------------------------ item 10: read-only media
def _read_only_mount(folder: Path) -> list[str] | None:
    """A command prefix that runs a command with ``folder`` mounted read-only (root: a private
    mount namespace), or None where that cannot be done here."""
    import shutil
    import subprocess

    if os.geteuid() != 0 or not shutil.which("unshare"):
        return None
    probe = f"mount --bind {folder} {folder} && mount -o remount,bind,ro {folder} && ! touch {folder}/probe"
    if subprocess.run(["unshare", "-m", "sh", "-c", probe], capture_output=True).returncode != 0:
        return None
    return ["unshare", "-m", "sh", "-c", f"mount --bind {folder} {folder} && mount -o remount,bind,ro {folder} && "
            'exec "$0" "$@"']


@pytest.mark.parametrize("command", ["list", "show", "graph", "export"])
def test_item10_the_cli_reads_a_store_on_read_only_media(tmp_path: Path, command: str) -> None:
    import subprocess

    folder = tmp_path / "media"
    folder.mkdir()
    _hostile_run(folder / "runs.db")
    if os.geteuid() == 0:
        prefix = _read_only_mount(folder)
        if prefix is None:
            pytest.skip("cannot mount a folder read-only here")
    else:
        prefix = []
        for path in folder.rglob("*"):
            path.chmod(0o555 if path.is_dir() else 0o444)
        folder.chmod(0o555)
    args = [command] if command == "list" else [command, "hostile-1"]
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([*prefix, sys.executable, "-m", "rolecast.cli", "runs", *args, "--store",
                           str(folder / "runs.db")], capture_output=True, text=True, cwd=root,
                          env={**os.environ, "PYTHONPATH": str(root)})
    assert done.returncode == 0, done.stderr  # was: ConfigError: cannot open the run store
    assert done.stdout.strip()


def test_item10_a_store_opened_read_only_refuses_writes_with_a_store_error(tmp_path: Path) -> None:
    from rolecast.errors import StoreError
    from rolecast.runs import RUN_STARTED, RunEvent, open_store

    db = tmp_path / "runs.db"
    _hostile_run(db)
    store = open_store(db, read_only=True)
    assert [info.run_id for info in store.runs()] == ["hostile-1"]
    with pytest.raises(StoreError, match="opened read-only"):
        store.append(RunEvent("other-1", RUN_STARTED, {}))


# ------------------------------------------------------------------ item 11: control characters (CLI)
def test_item11_runs_list_and_show_print_control_characters_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    from rolecast.cli import main

    db = tmp_path / "runs.db"
    _hostile_run(db)
    assert main(["runs", "list", "--store", str(db)]) == 0
    assert main(["runs", "show", "hostile-1", "--store", str(db)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    assert "Eve\\x1b[2J\\x1b]0;pwned\\x07" in out and "hello from 2\\x1b[31m" in out
    assert "M\\nparticipant Evil\\nNote over M: pwned" in out  # one line, not three


# ------------------------------------------------------------------ item 14: what runs show / export / the planner say
async def test_item14_runs_show_says_what_a_state_choice_was(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    from actions import Action
    from environment import Team
    from rolecast.cli import main
    from rolecast.testing import ScriptedLLM
    from roles import Role

    carl = Role(name="Carl", actions=[Action(name="A"), Action(name="B")], llm=ScriptedLLM(["1", "done", "nonsense"]))
    carl._set_react_mode("react", 3)
    db = tmp_path / "runs.db"
    await Team(store=db, run_id="choice-1", roles=[carl]).run(n_round=1, idea="go")
    assert main(["runs", "show", "choice-1", "--store", str(db)]) == 0
    out = capsys.readouterr().out
    assert "for Carl (choose the next action):" in out and "Carl/:" not in out  # was: Carl/:
    assert "for Carl/B:" in out
    assert 'Carl: the answer to "choose the next action" was \'nonsense\', not a number from -1 to 1' in out  # item 7


async def test_item14_runs_export_gives_n_round_for_a_run_started_by_run_project(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    import json

    from actions import Action
    from environment import Team
    from rolecast.cli import main
    from rolecast.testing import ScriptedLLM
    from roles import Role

    db = tmp_path / "runs.db"
    team = Team(store=db, run_id="rounds-1", roles=[Role(name="A", actions=[Action()], llm=ScriptedLLM(["x"]))])
    team.run_project("go")  # logs the run's start before run() says how many rounds
    await team.run(n_round=5)
    assert main(["runs", "export", "rounds-1", "--store", str(db)]) == 0
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert events[0]["kind"] == "run_started" and events[0]["data"]["n_round"] == 5  # was: null
    assert events[-1]["data"]["n_round"] == 5
    assert main(["runs", "show", "rounds-1", "--store", str(db)]) == 0
    assert "after 1 of 5 round(s)" in capsys.readouterr().out


def test_item14_the_planner_examples_cost_lines_name_who_called() -> None:
    import subprocess

    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "examples/sequential_planner.py", "--scripted"], capture_output=True,
                          text=True, cwd=root, env={**os.environ, "PYTHONPATH": str(root), "ROLECAST_STORE": "none"},
                          timeout=120)
    cost = done.stdout.split("=== cost ===")[1]
    assert "<none>" not in cost  # was: <none>: 2 calls
    assert "planner: 1 calls" in cost and "plan: 2 calls" in cost


def test_item14_calls_outside_any_role_are_named_so_in_a_cost_summary() -> None:
    from rolecast.accounting.cost import CostManager

    costs = CostManager()
    costs.record("gpt-4o-mini", 10, 5)
    assert costs.summary().startswith("outside roles: 1 calls, 10+5 tokens")
