"""Issue 43 (hardening 5), serve / A2A / RemoteAgent: each test is a hostile input (or a conformance
check of the A2A TCK) that today's server or RemoteAgent got wrong; servers on 127.0.0.1 only."""

from __future__ import annotations

import asyncio
import json
import re
import time

import httpx
import pytest

pytest.importorskip("a2a")

import serve_teams
from a2a.types import a2a_pb2 as pb
from serve_support import client, served, text_message
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from test_serve import poll, send, sse, state

from rolecast.errors import LLMAPIError, LLMError, LLMResponseError, LLMTimeoutError, UsageError
from rolecast.serve import create_app
from rolecast.serve import runner as serve_runner
from roles.remote import A2AModel, RemoteAgent

A2A = {"A2A-Version": "1.0"}


def rpc(method: str, params: dict, id_: int = 1) -> dict:
    return {"jsonrpc": "2.0", "id": id_, "method": method, "params": params}


def message(text: str, message_id: str = "m-1", **more) -> dict:
    return {"message": {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": text}], **more}}


async def ask(model: A2AModel, text: str) -> str:
    return (await model._complete([{"role": "user", "content": text}], stop=None, settings=None)).text


# ------------------------------------------------------------------ 1
async def test_a_second_client_reusing_a_message_id_gets_its_own_task_not_the_first_clients(tmp_path):
    with served(create_app(serve_teams.pair, store=tmp_path / "runs.db")) as url:
        a = await client(url, streaming=False)
        b = await client(url, streaming=False)
        first = await send(a, text_message("client A's secret plan", message_id="shared-id"))
        other = await send(b, text_message("client B's idea", message_id="shared-id"))
        again = await send(a, text_message("client A's secret plan", message_id="shared-id"))
    assert other.id != first.id
    assert other.history[0].parts[0].text == "client B's idea"
    assert "secret" not in str(other)
    assert again.id == first.id  # (the same client's same message, sent again: its task, not a new run)


# ------------------------------------------------------------------ 2
async def test_a_huge_or_negative_last_event_id_on_the_http_stream(tmp_path):
    with served(create_app(serve_teams.pair, store=tmp_path / "runs.db")) as url:
        async with httpx.AsyncClient(timeout=60) as raw:
            started = (await raw.post(f"{url}/api/runs", json={"idea": "tea"})).json()
            stream = f"{url}/api/runs/{started['run_id']}/stream"
            huge = await raw.get(stream, headers={"Last-Event-ID": "9" * 40})
            assert huge.status_code == 400 and "Last-Event-ID" in huge.json()["message"]
            negative = await raw.get(stream, headers={"Last-Event-ID": "-99999999999999999999999"})
    assert negative.status_code == 200  # (below 0 reads from the start, as the studio does)
    events = sse(negative.text)
    assert events[0]["data"]["seq"] == 1 and events[-1]["event"] == "end"


# ------------------------------------------------------------------ 3
async def test_the_studios_own_approve_form_is_not_refused_415_and_its_csrf_still_counts(tmp_path):
    with served(create_app(serve_teams.approval, store=tmp_path / "runs.db", studio=True)) as url:
        async with httpx.AsyncClient(timeout=60) as raw:
            run_id = (await raw.post(f"{url}/api/runs", json={"idea": "six times seven"})).json()["run_id"]
            assert sse((await raw.get(f"{url}/api/runs/{run_id}/stream")).text)[-1]["data"]["status"] == "waiting"
            page = (await raw.get(f"{url}/runs/{run_id}")).text
            csrf = re.search(r'name="csrf" value="([^"]+)"', page).group(1)
            approval = "Calc-1"
            forged = await raw.post(f"{url}/runs/{run_id}/approvals/{approval}", data={"verdict": "approve"})
            assert forged.status_code == 403  # (no CSRF token: the studio's rule holds)
            other_site = await raw.post(f"{url}/runs/{run_id}/approvals/{approval}",
                                        data={"verdict": "approve", "csrf": csrf},
                                        headers={"Origin": "http://evil.example"})
            assert other_site.status_code == 403
            approved = await raw.post(f"{url}/runs/{run_id}/approvals/{approval}",
                                      data={"verdict": "approve", "csrf": csrf})
            assert approved.status_code == 303
            assert (await raw.post(f"{url}/api/runs", data={"idea": "x"})).status_code == 415  # (the API: JSON)


# ------------------------------------------------------------------ 4
async def test_an_http_idea_of_a_million_characters_is_refused(tmp_path):
    with served(create_app(serve_teams.pair, store=tmp_path / "runs.db")) as url:
        async with httpx.AsyncClient(timeout=60) as raw:
            refused = await raw.post(f"{url}/api/runs", json={"idea": "x" * 1_000_000})
    assert refused.status_code == 400 and "at most 100,000" in refused.json()["message"]


async def test_settled_tasks_leave_memory_and_are_read_from_the_store_again(tmp_path, monkeypatch):
    monkeypatch.setattr(serve_runner, "KEEP_SETTLED", 2)
    app = create_app(serve_teams.pair, store=tmp_path / "runs.db")
    with served(app) as url:
        c = await client(url, streaming=False)
        tasks = [await send(c, text_message(f"idea {i} " + "z" * 50_000, message_id=f"m-{i}")) for i in range(6)]
        assert len(app.runner.served) <= 2  # (six settled tasks, two kept)
        oldest = await c.get_task(pb.GetTaskRequest(id=tasks[0].id))
    assert state(oldest) == "COMPLETED" and oldest.history[0].parts[0].text.startswith("idea 0 ")
    assert oldest.artifacts == tasks[0].artifacts


# ------------------------------------------------------------------ hostile remotes (5, 6, 7)
def _card(url: str, *, streaming: bool = True) -> dict:
    from a2a.server.request_handlers.response_helpers import agent_card_to_dict

    return agent_card_to_dict(pb.AgentCard(
        name="hostile", description="a hostile agent", version="1", default_input_modes=["text/plain"],
        default_output_modes=["text/plain"], capabilities=pb.AgentCapabilities(streaming=streaming),
        supported_interfaces=[pb.AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")]))


def hostile(mode: str, seen: list[dict] | None = None, rpc_url: str | None = None) -> Starlette:
    """An A2A agent that misbehaves: ``drip`` sends a byte of its stream now and then for ever, ``huge``
    answers with a 20 MB task; ``seen`` gets each request's headers."""

    async def card(request: Request) -> Response:
        return JSONResponse(_card(rpc_url or f"{request.url.scheme}://{request.url.netloc}/a2a"))

    async def endpoint(request: Request) -> Response:
        if seen is not None:
            seen.append(dict(request.headers))
        body = await request.json()
        if mode == "drip":
            async def drip():
                while True:
                    yield b": "
                    await asyncio.sleep(0.2)
            return StreamingResponse(drip(), media_type="text/event-stream")
        task = {"id": "t-1", "contextId": "c-1", "status": {"state": "TASK_STATE_COMPLETED"},
                "artifacts": [{"artifactId": "a", "parts": [{"text": "x" * 20_000_000}]}]}
        event = json.dumps({"jsonrpc": "2.0", "id": body.get("id"), "result": {"task": task}})
        return StreamingResponse(iter([f"data: {event}\n\n".encode()]), media_type="text/event-stream")

    return Starlette(routes=[Route("/.well-known/agent-card.json", card), Route("/a2a", endpoint, methods=["POST"])])


async def test_a_remote_that_drips_bytes_stops_at_the_deadline():
    with served(hostile("drip")) as url:
        began = time.monotonic()
        with pytest.raises(LLMTimeoutError, match=r"within 1\.5 s"):
            await asyncio.wait_for(ask(A2AModel(url, timeout=1.5), "hello"), 20)
        assert time.monotonic() - began < 4.0


async def test_a_twenty_megabyte_answer_is_refused_while_it_is_read():
    with served(hostile("huge")) as url:
        with pytest.raises(LLMResponseError, match="more than"):
            await asyncio.wait_for(ask(A2AModel(url, max_answer=10_000), "hello"), 30)


async def test_an_answer_longer_than_max_answer_is_a_typed_error(tmp_path):
    with served(create_app(serve_teams.pair, store=tmp_path / "runs.db")) as url:
        with pytest.raises(LLMResponseError, match="at most 50"):
            await ask(A2AModel(url, max_answer=50), "a poem about " + "rivers " * 20)
        assert "rivers" in await ask(A2AModel(url, max_answer=1000), "a poem about rivers")
    with pytest.raises(UsageError, match="timeout"):
        RemoteAgent(url="http://127.0.0.1:1", timeout=0)
    with pytest.raises(UsageError, match="max_answer"):
        RemoteAgent(url="http://127.0.0.1:1", max_answer=-1)


async def test_the_token_is_not_sent_to_another_host_the_card_names():
    seen_elsewhere: list[dict] = []
    with served(hostile("huge", seen_elsewhere)) as elsewhere:
        other_host = elsewhere.replace("127.0.0.1", "localhost") + "/a2a"
        home_seen: list[dict] = []
        with served(hostile("huge", home_seen, rpc_url=other_host)) as home:
            with pytest.raises(LLMError):
                await ask(A2AModel(home, token="secret-token-of-the-home-agent", max_answer=10), "hello")
    assert seen_elsewhere and all("authorization" not in h for h in seen_elsewhere)


# ------------------------------------------------------------------ 17
async def test_a_chunked_body_over_the_limit_is_413_and_deep_nesting_is_invalid_request(tmp_path):
    async def chunks():
        yield b'{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {"parts": [{"text": "'
        for _ in range(40):
            yield b"x" * 65_536
        yield b'"}]}}}'

    with served(create_app(serve_teams.pair, store=tmp_path / "runs.db")) as url:
        async with httpx.AsyncClient(timeout=60) as raw:
            chunked = await raw.post(f"{url}/a2a", content=chunks(),
                                     headers={**A2A, "content-type": "application/json"})
            deep = await raw.post(f"{url}/a2a", content=("[" * 100_000 + "]" * 100_000).encode(),
                                  headers={**A2A, "content-type": "application/json"})
            nested = await raw.post(f"{url}/a2a", json=rpc("SendMessage", message("hi", metadata={"a": json.loads(
                "[" * 200 + "]" * 200)})), headers=A2A)
    assert chunked.status_code == 413 and chunked.json()["error"]["code"] == -32600
    assert deep.json()["error"]["code"] == -32600 and deep.status_code == 400
    assert nested.json()["error"]["code"] == -32600


# ------------------------------------------------------------------ A2A conformance (the TCK's MUSTs)
async def test_list_tasks_is_served(tmp_path):
    with served(create_app(serve_teams.pair, store=tmp_path / "runs.db")) as url:
        c = await client(url, streaming=False)
        done = [await send(c, text_message(f"idea {i}", message_id=f"m-{i}")) for i in range(3)]
        listed = await c.list_tasks(pb.ListTasksRequest(page_size=2))
        rest = await c.list_tasks(pb.ListTasksRequest(page_size=2, page_token=listed.next_page_token))
    assert listed.total_size == 3 and len(listed.tasks) == 2 and listed.next_page_token
    assert [t.id for t in [*listed.tasks, *rest.tasks]] == [t.id for t in reversed(done)]
    assert not rest.next_page_token


async def test_a_finished_task_refuses_a_subscription_and_a_message(tmp_path):
    with served(create_app(serve_teams.pair, store=tmp_path / "runs.db")) as url:
        async with httpx.AsyncClient(timeout=60) as raw:
            task = (await raw.post(f"{url}/a2a", json=rpc("SendMessage", message("tea")), headers=A2A)).json()
            task_id = task["result"]["task"]["id"]
            follow = await raw.post(f"{url}/a2a", json=rpc("SubscribeToTask", {"id": task_id}), headers=A2A)
            more = await raw.post(f"{url}/a2a", json=rpc("SendMessage", message("more", "m-2", taskId=task_id)),
                                  headers=A2A)
    assert "-32004" in follow.text  # UnsupportedOperation (on the stream or as its answer)
    assert more.json()["error"]["code"] == -32004


async def test_an_image_part_is_content_type_not_supported(tmp_path):
    with served(create_app(serve_teams.pair, store=tmp_path / "runs.db")) as url:
        async with httpx.AsyncClient(timeout=60) as raw:
            image = {"message": {"messageId": "img", "role": "ROLE_USER", "parts": [
                {"raw": "iVBORw0KGgo=", "mediaType": "image/png"}, {"text": "what is this?"}]}}
            answer = await raw.post(f"{url}/a2a", json=rpc("SendMessage", image), headers=A2A)
    assert answer.json()["error"]["code"] == -32005


async def test_a_message_without_message_id_and_a_negative_history_length_are_refused(tmp_path):
    with served(create_app(serve_teams.pair, store=tmp_path / "runs.db")) as url:
        async with httpx.AsyncClient(timeout=60) as raw:
            no_id = {"message": {"role": "ROLE_USER", "parts": [{"text": "hi"}]}}
            anonymous = await raw.post(f"{url}/a2a", json=rpc("SendMessage", no_id), headers=A2A)
            task = (await raw.post(f"{url}/a2a", json=rpc("SendMessage", message("tea")), headers=A2A)).json()
            negative = await raw.post(f"{url}/a2a", json=rpc("GetTask", {"id": task["result"]["task"]["id"],
                                                                          "historyLength": -1}), headers=A2A)
            sent_negative = await raw.post(f"{url}/a2a", json=rpc("SendMessage", {
                **message("coffee", "m-3"), "configuration": {"historyLength": -5}}), headers=A2A)
    assert anonymous.json()["error"]["code"] == -32602 and "messageId" in anonymous.text
    assert negative.json()["error"]["code"] == -32602 and "historyLength" in negative.text
    assert sent_negative.json()["error"]["code"] == -32602


async def test_a_tasks_status_timestamp_is_when_it_changed_not_when_it_is_read(tmp_path):
    with served(create_app(serve_teams.pair, store=tmp_path / "runs.db")) as url:
        c = await client(url, streaming=False)
        task = await send(c, text_message("tea"))
        await asyncio.sleep(1.1)
        later = await c.get_task(pb.GetTaskRequest(id=task.id))
    assert later.status.timestamp == task.status.timestamp
    assert abs(later.status.timestamp.ToSeconds() - time.time()) > 1.0


async def test_a_form_body_on_the_a2a_endpoint_is_content_type_not_supported(tmp_path):
    with served(create_app(serve_teams.pair, store=tmp_path / "runs.db")) as url:
        async with httpx.AsyncClient(timeout=60) as raw:
            form = await raw.post(f"{url}/a2a", data={"jsonrpc": "2.0"}, headers=A2A)
    assert form.status_code == 415 and form.json()["error"]["code"] == -32005


async def test_post_to_the_a2a_endpoint_with_a_trailing_slash_is_served(tmp_path):
    with served(create_app(serve_teams.pair, store=tmp_path / "runs.db")) as url:
        async with httpx.AsyncClient(timeout=60) as raw:
            answer = await raw.post(f"{url}/a2a/", json=rpc("SendMessage", message("tea")), headers=A2A)
    assert answer.status_code == 200 and answer.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_the_cards_skills_have_modes_and_the_card_can_be_cached(tmp_path):
    with served(create_app(serve_teams.pair, store=tmp_path / "runs.db")) as url:
        async with httpx.AsyncClient(timeout=60) as raw:
            card = await raw.get(f"{url}/.well-known/agent-card.json")
            again = await raw.get(f"{url}/.well-known/agent-card.json", headers={"If-None-Match": card.headers["etag"]})
    assert all(s["inputModes"] == ["text/plain"] and s["outputModes"] == ["text/plain"] for s in card.json()["skills"])
    assert "max-age" in card.headers["cache-control"] and card.headers["etag"]
    assert again.status_code == 304 and not again.content


async def test_remote_agent_streams_instead_of_polling_and_cancels_the_remote_task(tmp_path, monkeypatch):
    gate = tmp_path / "gate"
    monkeypatch.setenv("GATE", str(gate))
    methods: list[str] = []
    app = create_app(serve_teams.gated, store=tmp_path / "runs.db")

    async def counting(scope, receive, send_):
        if scope["type"] == "http" and scope["method"] == "POST":
            body = b""
            more = True
            while more:
                part = await receive()
                body += part.get("body", b"")
                more = part.get("more_body", False)
            methods.append(json.loads(body).get("method", ""))

            given = False

            async def again():
                nonlocal given
                if given:
                    return await receive()
                given = True
                return {"type": "http.request", "body": body, "more_body": False}

            await app(scope, again, send_)
            return
        await app(scope, receive, send_)

    with served(counting) as url:
        model = A2AModel(url)
        call = asyncio.ensure_future(ask(model, "a slow poem"))
        for _ in range(600):  # (until the remote task works, held by the gate)
            if app.runner.served:
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.3)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        before = list(methods)
        c = await client(url, streaming=False)
        task_id = next(iter(app.runner.served))
        await poll(c, task_id, "CANCELED")
        gate.touch()
        mark = len(methods)
        answered = await ask(A2AModel(url), "a quick poem")
    assert answered == "written: a quick poem"
    assert before == ["SendStreamingMessage", "CancelTask"]  # (streamed, never polled; cancelled when cancelled)
    assert methods[mark:] == ["SendStreamingMessage"]


async def test_the_errors_are_typed_for_an_unreachable_remote():
    with pytest.raises(LLMAPIError):
        await ask(A2AModel("http://127.0.0.1:9", timeout=5), "hello")
