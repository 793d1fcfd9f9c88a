"""rolecast serve: a team over A2A, driven by the official a2a-sdk client, and over the HTTP API, on
127.0.0.1; each task a durable run (scripted models: rolecast.testing)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

pytest.importorskip("a2a")

import serve_teams
from a2a.client import A2AClientError
from a2a.types import a2a_pb2 as pb
from a2a.utils.errors import A2AError
from serve_support import client, served, text_message

from environment import Team
from rolecast.runs import RUN_STOPPED, inspection, open_store
from rolecast.serve import create_app

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "a-token-of-at-least-16-chars"
#: what the a2a-sdk client raises: the A2A error the server answered with, or its own
PROTOCOL_ERRORS = (A2AError, A2AClientError)


def state(task: pb.Task) -> str:
    return pb.TaskState.Name(task.status.state).removeprefix("TASK_STATE_")


async def send(c, request) -> pb.Task:
    async for response in c.send_message(request):
        assert response.HasField("task")
        return response.task
    raise AssertionError("no answer")


async def poll(c, task_id: str, wanted: str, tries: int = 400) -> pb.Task:
    for _ in range(tries):
        task = await c.get_task(pb.GetTaskRequest(id=task_id))
        if state(task) == wanted:
            return task
        await asyncio.sleep(0.05)
    raise AssertionError(f"task {task_id} never became {wanted}: {state(task)}")


async def test_the_card_send_get_and_the_run_in_the_store(tmp_path):
    db = tmp_path / "runs.db"
    with served(create_app(serve_teams.pair, store=db, name="pair team")) as url:
        c = await client(url, streaming=False)
        card = c._card
        assert card.name == "pair team" and card.description == "a writer and a reviewer"
        assert [(s.id, s.description) for s in card.skills] == [
            ("Writer", "write a short answer to the idea"), ("Reviewer", "review the writer's answer")]
        assert card.capabilities.streaming and not card.security_schemes
        task = await send(c, text_message("a haiku about tea"))
        assert state(task) == "COMPLETED"
        assert [(a.name, a.parts[0].text) for a in task.artifacts] == [
            ("Reviewer", "reviewed: written: a haiku about tea")]
        assert [m.parts[0].text for m in task.history] == [
            "a haiku about tea", "written: a haiku about tea", "reviewed: written: a haiku about tea"]
        got = await c.get_task(pb.GetTaskRequest(id=task.id))
        assert state(got) == "COMPLETED" and got.artifacts == task.artifacts
    store = open_store(db)
    assert task.id in inspection.list_runs(store)  # the task is a run: `rolecast runs list` shows it
    assert [e.data["reason"] for e in store.events(task.id, [RUN_STOPPED])] == ["idle"]
    store.close()


async def test_streaming_sends_a_status_update_per_message_then_artifacts_then_the_final_state(tmp_path):
    with served(create_app(serve_teams.pair, store=tmp_path / "runs.db")) as url:
        c = await client(url)
        kinds, updates, artifacts, last = [], [], [], None
        async for response in c.send_message(text_message("a limerick", rounds=3)):
            kind = response.WhichOneof("payload")
            kinds.append(kind)
            if kind == "status_update":
                last = response.status_update
                if last.status.HasField("message"):
                    meta = dict(last.status.message.metadata)
                    action = meta["action"].rsplit(".", 1)[-1]
                    updates.append((meta["sender"], action, last.status.message.parts[0].text))
            elif kind == "artifact_update":
                artifacts.append(response.artifact_update.artifact.parts[0].text)
    assert kinds == ["task", "status_update", "status_update", "artifact_update", "status_update"]
    assert updates == [("Writer", "Write", "written: a limerick"),
                       ("Reviewer", "Review", "reviewed: written: a limerick")]
    assert artifacts == ["reviewed: written: a limerick"]
    assert last is not None and pb.TaskState.Name(last.status.state) == "TASK_STATE_COMPLETED"


async def test_cancel_stops_the_run_and_its_log_says_why(tmp_path, monkeypatch):
    monkeypatch.setenv("GATE", str(tmp_path / "never"))
    db = tmp_path / "runs.db"
    with served(create_app(serve_teams.gated, store=db)) as url:
        c = await client(url, streaming=False)
        request = text_message("wait forever")
        request.configuration.return_immediately = True
        task = await send(c, request)
        assert state(task) == "WORKING"
        cancel = pb.CancelTaskRequest(id=task.id)
        cancel.metadata.update({"reason": "the user changed their mind"})
        cancelled = await c.cancel_task(cancel)
        assert state(cancelled) == "CANCELED"
        assert cancelled.status.message.parts[0].text == "the user changed their mind"
        with pytest.raises(PROTOCOL_ERRORS, match=r"cancel+ed already"):
            await c.cancel_task(pb.CancelTaskRequest(id=task.id))
    store = open_store(db)
    reasons = [e.data["reason"] for e in store.events(task.id, [RUN_STOPPED])]
    assert reasons == ["cancelled: the user changed their mind"]
    store.close()


async def test_a_deferred_approval_is_input_required_and_answering_the_task_resumes_the_run(tmp_path):
    with served(create_app(serve_teams.approval, store=tmp_path / "runs.db")) as url:
        c = await client(url, streaming=False)
        task = await send(c, text_message("what is 6 times 7?"))
        assert state(task) == "INPUT_REQUIRED"
        asked = task.status.message
        assert "Calc-1" in asked.parts[0].text and "calculator" in asked.parts[0].text
        with pytest.raises(PROTOCOL_ERRORS, match="approve"):
            await send(c, text_message("maybe", task_id=task.id, message_id="m-2"))
        done = await send(c, text_message("approve", task_id=task.id, message_id="m-3"))
        assert state(done) == "COMPLETED"
        assert "the calculator says 42" in done.artifacts[0].parts[0].text


async def test_an_approval_answered_by_rolecast_runs_approve_resumes_the_task(tmp_path):
    db = tmp_path / "runs.db"
    with served(create_app(serve_teams.approval, store=db)) as url:
        c = await client(url, streaming=False)
        task = await send(c, text_message("what is 6 times 7?"))
        assert state(task) == "INPUT_REQUIRED"
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        command = [sys.executable, "-m", "rolecast.cli", "runs", "edit", task.id, "Calc-1", "--args",
                   '{"expression": "6 * 8"}', "--store", str(db)]
        done = await asyncio.to_thread(subprocess.run, command, capture_output=True, text=True, env=env, cwd=ROOT,
                                       timeout=120)
        assert done.returncode == 0, done.stderr
        finished = await poll(c, task.id, "COMPLETED")
        assert "the calculator says 48" in finished.artifacts[0].parts[0].text


async def test_a_token_is_needed_by_everything_but_the_card(tmp_path):
    app = create_app(serve_teams.pair, store=tmp_path / "runs.db", token=TOKEN)
    with served(app) as url:
        async with httpx.AsyncClient() as raw:
            card = (await raw.get(f"{url}/.well-known/agent-card.json")).json()
            assert card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"] == "bearer"
            assert card["securityRequirements"] == [{"schemes": {"bearer": {}}}]
            refused = await raw.post(f"{url}/a2a", json={"jsonrpc": "2.0", "id": 1, "method": "GetTask",
                                                         "params": {"id": "x"}})
            assert refused.status_code == 401
            assert (await raw.post(f"{url}/api/runs", json={"idea": "x"})).status_code == 401
            wrong = await raw.get(f"{url}/api/runs/x", headers={"Authorization": "Bearer wrong-token-wrong-token"})
            assert wrong.status_code == 401
        anonymous = await client(url, streaming=False)
        with pytest.raises(PROTOCOL_ERRORS):
            await send(anonymous, text_message("hello"))
        allowed = await client(url, streaming=False, token=TOKEN)
        assert state(await send(allowed, text_message("hello"))) == "COMPLETED"
    with served(create_app(serve_teams.pair, store=tmp_path / "runs.db")) as url:  # loopback: loopback names only
        async with httpx.AsyncClient() as raw:
            rebound = await raw.get(f"{url}/api/runs/x", headers={"Host": "evil.example:80"})
            assert rebound.status_code == 403


async def test_hostile_input_gets_protocol_errors_never_a_traceback(tmp_path):
    db = tmp_path / "runs.db"
    other = Team(llm=serve_teams.FunctionLLM(lambda m: "hi", model="gpt-4o-mini"), roles=[serve_teams.Writer()],
                 store=db, run_id="task-not-served-here")
    await other.run(1, idea="someone else's run")
    with served(create_app(serve_teams.pair, store=db)) as url:
        async with httpx.AsyncClient(timeout=60) as raw:
            rpc = f"{url}/a2a"
            headers = {"A2A-Version": "1.0"}
            huge = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {
                "messageId": "big", "role": "ROLE_USER", "parts": [{"text": "x" * 10_000_000}]}}}
            too_big = await raw.post(rpc, json=huge, headers=headers)
            assert too_big.status_code == 413 and too_big.json()["error"]["code"] == -32600
            broken = await raw.post(rpc, content=b'{"jsonrpc": "2.0", "id": 1, "method": ',
                                    headers={**headers, "content-type": "application/json"})
            assert broken.json()["error"]["code"] == -32700
            unknown = await raw.post(rpc, json={"jsonrpc": "2.0", "id": 2, "method": "tasks/explode"}, headers=headers)
            assert unknown.json()["error"]["code"] == -32601
            bad = await raw.post(rpc, json={"jsonrpc": "2.0", "id": 3, "method": "GetTask", "params": {"id": [1]}},
                                 headers=headers)
            assert bad.json()["error"]["code"] == -32602
            empty = await raw.post(rpc, json={"jsonrpc": "2.0", "id": 4, "method": "SendMessage", "params": {
                "message": {"messageId": "e", "role": "ROLE_USER", "parts": [{"text": "  "}]}}}, headers=headers)
            assert empty.json()["error"]["code"] == -32602 and "no text" in empty.json()["error"]["message"]
            for body in (too_big.text, broken.text, unknown.text, bad.text, empty.text):
                assert "Traceback" not in body
            api_bad = await raw.post(f"{url}/api/runs", json={"idea": "x", "round": 2})
            assert api_bad.status_code == 400 and "unknown field(s) ['round']" in api_bad.json()["message"]
            as_form = await raw.post(f"{url}/api/runs", data={"idea": "x"})
            assert as_form.status_code == 415
        c = await client(url, streaming=False)
        with pytest.raises(PROTOCOL_ERRORS, match="no task 'task-not-served-here'"):
            await c.get_task(pb.GetTaskRequest(id="task-not-served-here"))
        with pytest.raises(PROTOCOL_ERRORS, match="no task"):
            await c.cancel_task(pb.CancelTaskRequest(id="../../etc/passwd"))


async def test_several_tasks_at_once_are_several_runs(tmp_path):
    db = tmp_path / "runs.db"
    with served(create_app(serve_teams.pair, store=db)) as url:
        c = await client(url, streaming=False)
        tasks = await asyncio.gather(*(send(c, text_message(f"idea {i}", message_id=f"m-{i}")) for i in range(12)))
    assert [state(t) for t in tasks] == ["COMPLETED"] * 12
    assert sorted(t.artifacts[0].parts[0].text for t in tasks) == sorted(
        f"reviewed: written: idea {i}" for i in range(12))
    store = open_store(db)
    assert len({t.id for t in tasks} & {r.run_id for r in store.runs()}) == 12
    store.close()


async def test_the_same_message_id_again_meets_the_task_it_started(tmp_path):
    db = tmp_path / "runs.db"
    with served(create_app(serve_teams.pair, store=db)) as url:
        c = await client(url, streaming=False)
        first = await send(c, text_message("once", message_id="same"))
        again = await send(c, text_message("once", message_id="same"))
    assert first.id == again.id
    store = open_store(db)
    assert len(store.runs()) == 1
    store.close()


def sse(text: str) -> list[dict]:
    found = []
    for block in text.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line and not line.startswith(":"))
        if "data" in fields:
            found.append({"id": fields.get("id"), "event": fields.get("event"), "data": json.loads(fields["data"])})
    return found


async def test_the_http_api_starts_a_run_and_streams_its_events_resumably(tmp_path):
    with served(create_app(serve_teams.pair, store=tmp_path / "runs.db")) as url:
        async with httpx.AsyncClient(base_url=url, timeout=60) as http:
            started = await http.post("/api/runs", json={"idea": "a riddle", "rounds": 3})
            assert started.status_code == 201
            run_id = started.json()["run_id"]
            whole = sse((await http.get(f"/api/runs/{run_id}/stream")).text)
            assert whole[-1]["event"] == "end" and whole[-1]["data"]["status"] == "finished"
            events = [e["data"] for e in whole if e["event"] == "run_event"]
            assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
            assert events[0]["kind"] == "run_started" and events[-1]["kind"] == "run_stopped"
            # a dropped connection goes on from the last event it saw (Last-Event-ID), nothing twice
            rest = sse((await http.get(f"/api/runs/{run_id}/stream", headers={"Last-Event-ID": "4"})).text)
            assert [e["data"]["seq"] for e in rest if e["event"] == "run_event"] == [e["seq"] for e in events[4:]]
            # the same shapes as the studio's JSON
            page = (await http.get(f"/api/runs/{run_id}/events", params={"after": 0, "limit": 2000})).json()
            assert page["events"] == events
            listed = (await http.get("/api/runs")).json()["runs"]
            assert [r["run_id"] for r in listed] == [run_id]
            header = (await http.get(f"/api/runs/{run_id}")).json()
            assert header["status"] == "finished" and header["roles"] == ["Writer", "Reviewer"]
            missing = await http.get("/api/runs/no-such-run/stream")
            assert missing.status_code == 404


async def test_the_http_api_answers_an_approval(tmp_path):
    with served(create_app(serve_teams.approval, store=tmp_path / "runs.db")) as url:
        async with httpx.AsyncClient(base_url=url, timeout=60) as http:
            run_id = (await http.post("/api/runs", json={"idea": "what is 6 times 7?"})).json()["run_id"]
            stream = sse((await http.get(f"/api/runs/{run_id}/stream")).text)
            assert stream[-1]["data"]["status"] == "waiting"
            refused = await http.post(f"/api/runs/{run_id}/approvals/Calc-1", json={"verdict": "reject"})
            assert refused.status_code == 400 and "needs a reason" in refused.json()["message"]
            answered = await http.post(f"/api/runs/{run_id}/approvals/Calc-1",
                                       json={"verdict": "reject", "reason": "no maths today"})
            assert answered.status_code == 200 and answered.json()["decision"]["verdict"] == "reject"
            after = max(e["data"]["seq"] for e in stream if e["event"] == "run_event")
            resumed = sse((await http.get(f"/api/runs/{run_id}/stream", params={"after": after})).text)
            assert resumed[-1]["data"]["status"] == "finished"
            said = [e["data"]["data"]["message"]["content"] for e in resumed
                    if e["event"] == "run_event" and e["data"]["kind"] == "message"]
            assert any("no maths today" in text for text in said)


async def test_a_team_hires_a_served_team_and_a_resume_asks_it_nothing_again(tmp_path):
    from rolecast.runs import LLM_CALL

    remote_db = tmp_path / "remote.db"
    with served(create_app(serve_teams.pair, store=remote_db)) as url:
        first = await serve_teams.hiring(url, str(tmp_path / "a.db"), "hire-1").run(4, idea="a poem about rivers")
        again = await serve_teams.hiring(url, str(tmp_path / "a.db"), "hire-1").run(4, idea="a poem about rivers")
        rerun = serve_teams.hiring(url, str(tmp_path / "a.db"), "hire-1")
        rerun = Team(llm=rerun.context.given_llm, roles=list(rerun.env.roles.values()), store=str(tmp_path / "a.db"),
                     run_id="hire-2", reuse="hire-1")  # a rerun of hire-1: its answers reused
        reused = await rerun.run(4, idea="a poem about rivers")
        assert reused[-1].content == first[-1].content and rerun.run_log.reused_calls == 2
    assert [(m.sent_from, m.content) for m in first] == [(m.sent_from, m.content) for m in again] == [
        ("user", "a poem about rivers"), ("Remote", "reviewed: written: a poem about rivers"),
        ("Closer", "closed: reviewed: written: a poem about rivers")]
    remote = open_store(remote_db)
    assert len(remote.runs()) == 1  # the resume answered the remote call from the log
    remote.close()
    store = open_store(tmp_path / "a.db")
    calls = [e for e in store.events("hire-1", [LLM_CALL]) if e.role == "Remote"]
    assert len(calls) == 1 and calls[0].data["model"] == f"a2a:{url}"
    store.close()


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def _wait(predicate, what: str, seconds: float = 60.0) -> None:
    import time

    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def test_a_hiring_team_killed_mid_run_resumes_with_no_remote_call_repeated(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "GATE": str(tmp_path / "gate-b"), "CALLS": str(tmp_path / "calls-b"),
           "GATE_A": str(tmp_path / "gate-a"), "CALLS_A": str(tmp_path / "calls-a")}
    server = subprocess.Popen([sys.executable, "-m", "rolecast.cli", "serve", "tests.serve_teams:gated", "--port", "0",
                               "--store", str(tmp_path / "remote.db")], stdout=subprocess.PIPE, text=True, env=env,
                              cwd=ROOT)
    try:
        line = server.stdout.readline() if server.stdout else ""
        url = line.split(" at ", 1)[1].split()[0]
        script = [sys.executable, str(ROOT / "tests" / "scripts" / "hire_remote.py"), url, str(tmp_path / "a.db"), "k"]

        first = subprocess.Popen(script, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _wait(lambda: _lines(tmp_path / "calls-b") == 1, "the remote team's model call")
        first.kill()  # kill -9 while the remote agent works on the call
        first.wait()
        (tmp_path / "gate-b").touch()

        second = subprocess.Popen(script, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _wait(lambda: _lines(tmp_path / "calls-a") == 1, "the closer's model call")
        second.kill()  # kill -9 after the remote call is in the log
        second.wait()
        (tmp_path / "gate-a").touch()

        third = subprocess.run(script, env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert third.returncode == 0, third.stderr
    finally:
        server.terminate()
        server.wait(30)
    said = [json.loads(line) for line in third.stdout.splitlines()]
    assert said[-1] == {"from": "Closer", "content": "closed: written: a poem about rivers"}
    assert _lines(tmp_path / "calls-b") == 1  # the remote team's model: asked once in all
    remote = open_store(tmp_path / "remote.db")
    assert len(remote.runs()) == 1  # one task, one run: the resent message met the task it started
    remote.close()


async def test_the_app_mounts_in_a_users_starlette_app_with_the_studio_and_serves_a_team_object(tmp_path):
    from starlette.applications import Starlette
    from starlette.responses import PlainTextResponse
    from starlette.routing import Mount, Route

    team = serve_teams.pair()  # a Team (not a function): copied for each task
    served_app = create_app(team, store=tmp_path / "runs.db", studio=True, token=TOKEN, name="pair")
    outer = Starlette(routes=[Route("/", lambda request: PlainTextResponse("the user's own app")),
                              Mount("/team", app=served_app)])
    with served(outer) as url:
        async with httpx.AsyncClient(timeout=60) as raw:
            assert (await raw.get(f"{url}/")).text == "the user's own app"
            card = (await raw.get(f"{url}/team/.well-known/agent-card.json")).json()
            assert card["supportedInterfaces"][0]["url"] == f"{url}/team/a2a"
            assert (await raw.get(f"{url}/team/")).status_code == 401  # the studio: the token too
            page = await raw.get(f"{url}/team/", headers={"Authorization": f"Bearer {TOKEN}"})
            assert page.status_code == 200 and "Runs" in page.text
        c = await client(f"{url}/team", streaming=False, token=TOKEN)
        first = await send(c, text_message("one", message_id="m-1"))
        second = await send(c, text_message("two", message_id="m-2"))
    assert [state(t) for t in (first, second)] == ["COMPLETED"] * 2, first.status
    assert [t.artifacts[0].parts[0].text for t in (first, second)] == [
        "reviewed: written: one", "reviewed: written: two"]
    assert team.env.run_log is None  # the team given was only copied


def test_the_command_names_what_it_cannot_serve(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "rolecast.cli", "serve", "tests.serve_teams:pairr", "--store",
                           str(tmp_path / "runs.db")], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert done.returncode == 2 and "did you mean 'pair'" in done.stderr
    done = subprocess.run([sys.executable, "-m", "rolecast.cli", "serve", "tests.serve_teams:Write", "--store",
                           str(tmp_path / "runs.db")], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert done.returncode == 2 and "must return a Team" in done.stderr


async def test_a_client_of_a2a_0_3_is_served_too(tmp_path):
    with served(create_app(serve_teams.pair, store=tmp_path / "runs.db")) as url:
        async with httpx.AsyncClient(timeout=60) as raw:
            card = (await raw.get(f"{url}/.well-known/agent-card.json")).json()
            assert card["url"] == f"{url}/a2a" and card["protocolVersion"] == "0.3"
            message = {"messageId": "old", "role": "user", "parts": [{"kind": "text", "text": "an old idea"}]}
            sent = (await raw.post(f"{url}/a2a", json={"jsonrpc": "2.0", "id": 1, "method": "message/send",
                                                      "params": {"message": message}})).json()
            assert sent["result"]["status"]["state"] == "completed"
            assert sent["result"]["artifacts"][0]["parts"] == [
                {"kind": "text", "text": "reviewed: written: an old idea"}]


async def test_a_waiting_task_outlives_its_server_and_a_paused_one_can_be_cancelled(tmp_path):
    db = tmp_path / "runs.db"
    with served(create_app(serve_teams.approval, store=db)) as url:
        c = await client(url, streaming=False)
        first = await send(c, text_message("what is 6 times 7?", message_id="m-1"))
        second = await send(c, text_message("what is 6 times 7, again?", message_id="m-2"))
    assert state(first) == state(second) == "INPUT_REQUIRED"
    with served(create_app(serve_teams.approval, store=db)) as url:  # a new server process on the same store
        c = await client(url, streaming=False)
        again = await c.get_task(pb.GetTaskRequest(id=first.id))
        assert state(again) == "INPUT_REQUIRED" and "Calc-1" in again.status.message.parts[0].text
        done = await send(c, text_message("approve", task_id=first.id, message_id="m-3"))
        assert state(done) == "COMPLETED" and "the calculator says 42" in done.artifacts[0].parts[0].text
        cancel = pb.CancelTaskRequest(id=second.id)
        cancel.metadata.update({"reason": "no longer needed"})
        assert state(await c.cancel_task(cancel)) == "CANCELED"
    store = open_store(db)
    assert [e.data["reason"] for e in store.events(second.id, [RUN_STOPPED])] == [
        "waiting: approval Calc-1", "cancelled: no longer needed"]
    store.close()


async def test_a_remote_agent_that_cannot_answer_fails_the_roles_action_with_a_typed_error(tmp_path):
    import socket

    from rolecast.errors import ActionFailed, UsageError
    from roles import RemoteAgent

    with pytest.raises(UsageError, match="http"):
        RemoteAgent(url="ftp://example.org")
    with pytest.raises(UsageError, match="takes no llm"):
        RemoteAgent(url="http://127.0.0.1:1", llm=serve_teams.FunctionLLM(lambda m: "x"))
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there
    nobody = Team(roles=[RemoteAgent(url=f"http://127.0.0.1:{port}", name="Gone")], store=None)
    with pytest.raises(ActionFailed, match=f"127.0.0.1:{port}"):
        await nobody.run(2, idea="hello?")
    with served(create_app(serve_teams.approval, store=tmp_path / "remote.db")) as url:
        asking = Team(roles=[RemoteAgent(url=url, name="Calc")], store=None)
        with pytest.raises(ActionFailed, match=r"INPUT_REQUIRED.*Calc-1"):
            await asking.run(2, idea="what is 6 times 7?")


async def test_streaming_an_answer_and_subscribing_to_a_running_task(tmp_path, monkeypatch):
    with served(create_app(serve_teams.approval, store=tmp_path / "runs.db")) as url:
        c = await client(url)
        finals = [r.status_update.status for r in [r async for r in c.send_message(text_message("6 times 7?"))]
                  if r.HasField("status_update")]
        assert pb.TaskState.Name(finals[-1].state) == "TASK_STATE_INPUT_REQUIRED"
        task_id = finals[-1].message.task_id
        answered = [r async for r in c.send_message(text_message("approve", task_id=task_id, message_id="m-2"))]
        kinds = [r.WhichOneof("payload") for r in answered]
        assert kinds[0] == "task" and kinds[-2:] == ["artifact_update", "status_update"]
        assert "the calculator says 42" in answered[-2].artifact_update.artifact.parts[0].text
        assert pb.TaskState.Name(answered[-1].status_update.status.state) == "TASK_STATE_COMPLETED"
    gate = tmp_path / "gate"
    monkeypatch.setenv("GATE", str(gate))
    with served(create_app(serve_teams.gated, store=tmp_path / "gated.db")) as url:
        c = await client(url)
        request = text_message("slowly")
        request.configuration.return_immediately = True
        plain = await client(url, streaming=False)
        task = await send(plain, request)
        seen = []
        async for response in c.subscribe(pb.SubscribeToTaskRequest(id=task.id)):
            seen.append(response.WhichOneof("payload"))
            if len(seen) == 1:
                gate.touch()  # the team goes on once someone follows it
        assert seen[0] == "task" and seen[-2:] == ["artifact_update", "status_update"]
        assert state(await plain.get_task(pb.GetTaskRequest(id=task.id))) == "COMPLETED"
