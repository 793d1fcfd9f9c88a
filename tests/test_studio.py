"""rolecast studio over HTTP: every route, the token rule, CSRF, escaping, paging and speed, against a
real uvicorn on 127.0.0.1 (started and stopped by the tests) and runs made by real teams on scripted models."""

from __future__ import annotations

import asyncio
import html
import http.client
import json
import os
import re
import sqlite3
import subprocess
import sys
import time
from fnmatch import fnmatch
from pathlib import Path

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
pytest.importorskip("jinja2")

import studio_runs
from studio_runs import HOSTILE, get, post

from rolecast import studio
from rolecast.errors import ConfigError, UsageError
from rolecast.runs import MemoryRunStore, SQLiteRunStore
from rolecast.runs.requests import keys_of
from rolecast.studio import server as studio_server
from rolecast.studio import shape
from rolecast.studio.source import RunSource, status_of
from rolecast.testing import FunctionLLM

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A store with a finished debate, a failed run, a hostile one, a rerun that parts from the debate
    at round 3, and a run of 10,000 events."""
    path = tmp_path_factory.mktemp("studio") / "runs.db"
    made = {"store": str(path)}
    made["debate"] = asyncio.run(studio_runs.debate(path, rounds=4))
    made["failed"] = asyncio.run(studio_runs.failing(path))
    made["hostile"] = asyncio.run(studio_runs.hostile(path))

    def rerun_answer(messages: list[dict]) -> str:  # the same debate, except Ada's second turn
        prompt = messages[-1]["content"]
        speaker = "Ada" if "Suppose you are Ada" in prompt else "Ben"
        turn = prompt.count(f"{speaker}, turn") + 1
        if speaker == "Ada" and turn == 2:
            return "Ada, turn 2: I changed my mind."
        return f"{speaker}, turn {turn}: I argue {'for' if speaker == 'Ada' else 'against'} the motion, " \
               "and my opponent is wrong."

    made["rerun"] = asyncio.run(studio_runs.debate(path, rounds=4, llm=FunctionLLM(rerun_answer)))
    made["big"] = studio_runs.big_run(path)
    made["chat"], made["chat_seen"] = asyncio.run(studio_runs.review_chat(path))  # type: ignore[assignment]
    return made


@pytest.fixture(scope="module")
def served(runs: dict[str, str]):
    server = studio_runs.serve(runs["store"])
    yield server
    server.stop()


# ------------------------------------------------------------------------------------- pages
def test_the_runs_list_shows_every_run_with_its_status_and_totals(served, runs):
    page = get(served, "/")
    assert page.status == 200
    assert page.headers["content-type"].startswith("text/html")
    for name in ("debate", "failed", "hostile", "rerun", "big"):
        assert runs[name] in page.body
    row = re.search(rf'<tr class="run-row status-(\S+)" data-run="{runs["debate"]}">', page.body)
    assert row and row.group(1) == "finished"
    assert re.search(rf'<tr class="run-row status-failed" data-run="{runs["failed"]}">', page.body)
    # filter by status and search
    failed = get(served, "/?status=failed").body
    assert runs["failed"] in failed and runs["debate"] not in failed
    long_one = get(served, "/?q=a+long+DEBATE").body
    assert runs["big"] in long_one and runs["debate"] not in long_one
    nothing = get(served, "/?q=no-such-run-anywhere").body
    assert "No runs match" in nothing


def test_api_runs_lists_runs_as_json(served, runs):
    answer = get(served, "/api/runs")
    assert answer.status == 200 and answer.headers["content-type"] == "application/json"
    listed = {r["run_id"]: r for r in answer.json()["runs"]}
    debate = listed[runs["debate"]]
    assert debate["status"] == "finished" and debate["roles"] == ["Ada", "Ben"]
    assert debate["rounds"] == 4 and debate["calls"] == 4 and debate["tokens"] > 0
    assert listed[runs["failed"]]["status"] == "failed"
    assert listed[runs["failed"]]["stop_reason"].startswith("error")
    assert listed[runs["big"]]["calls"] == 2500
    assert [r["run_id"] for r in get(served, "/api/runs?status=failed").json()["runs"]] == [runs["failed"]]


def test_a_run_page_shows_rounds_turns_and_messages_in_order(served, runs):
    page = get(served, f"/runs/{runs['debate']}")
    assert page.status == 200
    said = re.findall(r'<div class="msg-text">([^<]*)</div>', page.body)
    assert said == [
        "Should cities ban cars?",
        "Ada, turn 1: I argue for the motion, and my opponent is wrong.",
        "Ben, turn 1: I argue against the motion, and my opponent is wrong.",
        "Ada, turn 2: I argue for the motion, and my opponent is wrong.",
        "Ben, turn 2: I argue against the motion, and my opponent is wrong.",
    ]
    assert [int(n) for n in re.findall(r'<section class="round" data-round="(\d+)">', page.body)] == [0, 1, 2, 3, 4]
    # each model call carries its prompt, answer, tokens, cost, latency and source
    calls = page.body.count('<details class="call')
    assert calls == 4
    assert "Suppose you are Ada, in a debate with Ben." in page.body
    assert '<pre class="answer">Ben, turn 2: I argue against' in page.body
    assert "prompt + " in page.body and "latency" in page.body and 'class="src src-live"' in page.body
    # per-role totals and the graph: Ada and Ben each sent two messages, to each other
    assert re.search(r'class="role-0"><td><span class="dot"></span>Ada</td><td class="num">2</td>'
                     r'<td class="num">2</td>', page.body)
    assert 'data-title="Ada → Ben"' in page.body and 'data-title="Ben → Ada"' in page.body
    assert 'data-title="user → Ada"' in page.body
    # a finished run has no live stream
    assert 'data-live="no"' in page.body


def test_a_failed_run_is_highlighted_with_its_error(served, runs):
    page = get(served, f"/runs/{runs['failed']}").body
    assert "turn-failed" in page and "call-failed" in page
    assert "the model fell over" in page
    assert "mark-failed" in page  # the run's stop, in red
    assert re.search(r'<td class="num bad">\d+</td>', page)  # a role's failures in its totals


def test_a_hostile_answer_is_text_everywhere(served, runs):
    for path in (f"/runs/{runs['hostile']}", "/", f"/compare?a={runs['debate']}&b={runs['hostile']}"):
        body = get(served, path).body
        assert "<script>window.__pwned" not in body and "<img src=x" not in body, path
    page = get(served, f"/runs/{runs['hostile']}").body
    assert "&lt;script&gt;window.__pwned = 1&lt;/script&gt;&lt;img src=x onerror=" in page
    # the JSON API gives the text as it is (JSON, not HTML)
    events = get(served, f"/api/runs/{runs['hostile']}/events").json()["events"]
    assert any(e["kind"] == "message" and e["data"]["message"]["content"] == HOSTILE for e in events)
    # the live stream's html too (rendered by the same templates)
    conn = http.client.HTTPConnection("127.0.0.1", served.port, timeout=10)
    conn.request("GET", f"/runs/{runs['hostile']}/live?after=0", headers={"Host": f"127.0.0.1:{served.port}"})
    streamed = json.loads(_next_sse(conn.getresponse()))["html"]
    conn.close()
    assert "&lt;script&gt;window.__pwned" in streamed and "<script>" not in streamed
    # the run id in an error page is escaped too
    missing = get(served, "/runs/%3Cscript%3Ealert(1)%3Cb%3E")
    assert missing.status == 404 and "<script>alert" not in missing.body and "&lt;script&gt;alert" in missing.body


def _prompt_messages(call_html: str) -> list[tuple[str, str]]:
    """(role, text) of each message listed in an expanded call, in order (a long one's full text)."""
    found = []
    for role, body in re.findall(r'<li class="pmsg [^"]*" data-role="([^"]*)">(.*?)</li>', call_html, re.S):
        texts = re.findall(r'<pre class="prompt">(.*?)</pre>', body, re.S)
        found.append((html.unescape(role), html.unescape(texts[0]) if texts else ""))
    return found


def test_an_expanded_call_shows_every_message_in_order_and_the_settings(served, runs):
    seen = runs["chat_seen"]
    assert len(seen) >= 3 and max(len(s) for s in seen) >= 5  # calls of several messages
    page = get(served, f"/runs/{runs['chat']}").body
    calls = re.findall(r'<details class="call[^"]*" data-seq="\d+">(.*?)</details>\s*(?=<details class="call|'
                       r'<div class="message|</div>\s*</article>)', page, re.S)
    assert len(calls) == len(seen)
    for call, asked in zip(calls, seen, strict=True):
        assert _prompt_messages(call) == [(m["role"], m["content"]) for m in asked]
        settings = re.search(r'<pre class="prompt call-settings">(.*?)</pre>', call, re.S)
        assert settings and json.loads(html.unescape(settings.group(1)))["max_tokens"] > 0
    # the long brief is folded (its start shown, the whole text one click away); markup in a prompt is text
    assert '<details class="pmsg-long">' in page and studio_runs.REVIEW_BRIEF[:100] in page
    assert "<script>window.__pwned" not in page and "&lt;script&gt;window.__pwned" in page
    # the JSON API gives the request with its texts in place
    events = get(served, f"/api/runs/{runs['chat']}/events").json()["events"]
    asked = [e["request"]["messages"] for e in events if e["kind"] == "llm_call"]
    assert asked == seen


def test_an_unknown_run_is_a_404_naming_recent_runs(served, runs):
    page = get(served, "/runs/nope")
    assert page.status == 404 and "no run &#39;nope&#39;" in page.body and runs["chat"] in page.body
    assert get(served, "/api/runs/nope").status == 404
    assert get(served, "/api/runs/nope/events").status == 404
    assert get(served, "/runs/nope/live").status == 404
    assert get(served, "/runs/nope/messages?seq=1").status == 404
    assert get(served, f"/runs/{runs['debate']}?after=x").status == 400


def test_api_events_pages_through_a_run_of_ten_thousand_events(served, runs):
    seen: list[int] = []
    after: int | None = 0
    pages = 0
    while after is not None:
        answer = get(served, f"/api/runs/{runs['big']}/events?after={after}&limit=2000")
        assert answer.status == 200
        body = answer.json()
        seen += [e["seq"] for e in body["events"]]
        after = body["next"]
        pages += 1
    assert seen == list(range(1, 10_001)) and pages == 5
    first = get(served, f"/api/runs/{runs['big']}/events?limit=3").json()
    assert [e["kind"] for e in first["events"]] == ["run_started", "round_started", "llm_call"]
    assert first["next"] == 3
    assert first["events"][2]["data"]["response"]["usage"]["prompt_tokens"] == 500
    for bad in ("limit=0", "limit=2001", "after=x", "limit=y"):
        assert get(served, f"/api/runs/{runs['big']}/events?{bad}").status == 400, bad


def test_api_run_gives_per_role_totals(served, runs):
    body = get(served, f"/api/runs/{runs['big']}").json()
    per_role = {r["role"]: r for r in body["per_role"]}
    assert per_role["Ada"]["calls"] == per_role["Ben"]["calls"] == 1250
    assert per_role["Ada"]["tokens"] == 1250 * 620
    assert body["events"] == 10_000 and body["status"] == "finished"


def test_a_run_of_ten_thousand_events_opens_in_under_a_second(runs):
    """A fresh server (nothing read yet) opens the big run: its first page, totals and graph. Bounded by
    the CPU time this process spends (server and client are both in it), which the machine's load
    hardly moves; the wall-clock time is printed, and bounded loosely."""
    cold = studio_runs.serve(runs["store"], read_csrf=False)  # its first request is the one timed
    try:
        began, cpu = time.perf_counter(), time.process_time()
        page = get(cold, f"/runs/{runs['big']}")
        cold_open, cold_cpu = time.perf_counter() - began, time.process_time() - cpu
        began = time.perf_counter()
        get(cold, f"/runs/{runs['big']}?after=5000")
        warm_open = time.perf_counter() - began
    finally:
        cold.stop()
    assert page.status == 200
    assert page.body.count('<details class="call') == 50  # one page: 200 events, a quarter of them calls
    assert "events 1–200 of 10000" in page.body
    assert f'href="/runs/{runs["big"]}?after=9800"' in page.body  # the pager reaches the last page
    graphed = re.search(r"(\d+) messages · click", page.body)
    assert graphed and int(graphed.group(1)) == 2499  # the graph counts the whole run's messages
    print(f"\nbig run: first open {cold_open * 1000:.0f} ms ({cold_cpu * 1000:.0f} ms of CPU), "
          f"another page {warm_open * 1000:.0f} ms")
    assert cold_cpu < 1.0, f"a run of 10,000 events took {cold_cpu:.2f} s of CPU to open"
    assert cold_open < 3.0, f"a run of 10,000 events took {cold_open:.2f} s to open"


def test_the_graph_messages_route_lists_the_messages_of_some_seqs(served, runs):
    page = get(served, f"/runs/{runs['debate']}")
    seqs = re.search(r'<g class="edge role-0" data-seqs="([\d,]+)"[^>]* data-title="Ada → Ben"', page.body)
    assert seqs
    listed = get(served, f"/runs/{runs['debate']}/messages?seq={seqs.group(1)}").body
    assert re.findall(r'<div class="msg-text">([^<]*)</div>', listed) == [
        "Ada, turn 1: I argue for the motion, and my opponent is wrong.",
        "Ada, turn 2: I argue for the motion, and my opponent is wrong.",
    ]
    assert get(served, f"/runs/{runs['debate']}/messages?seq=a,b").status == 400


def test_compare_shows_where_a_rerun_parts_from_its_parent(served, runs):
    page = get(served, f"/compare?a={runs['debate']}&b={runs['rerun']}")
    assert page.status == 200
    assert "The messages part at round 3</b> (Ada), after 3 message(s) in common (4 alike in all)." in page.body
    assert "The first model call that differs: round 3, <b>Ada</b>" not in page.body  # Ada asked the same
    assert "The first model call that differs: round 4, <b>Ben</b> in Speak" in page.body
    first = re.search(r'<tr class="cmp-changed first-diff">(.*?)</tr>', page.body, re.S)
    assert first and "Ada, turn 2: I argue for the motion" in first.group(1) and "I changed my mind" in first.group(1)
    same = get(served, f"/compare?a={runs['debate']}&b={runs['debate']}").body
    assert "The runs agree" in same
    assert get(served, "/compare").status == 200  # the picker
    assert get(served, f"/compare?a={runs['debate']}&b=nope").status == 404


def test_the_live_stream_sends_a_running_runs_new_events_within_a_second(runs, tmp_path):
    """Another process runs a debate into the store; the stream sends each event soon after it is written."""
    run_id = "live-" + os.urandom(4).hex()
    writer = subprocess.Popen(studio_runs.live_command(runs["store"], run_id, rounds=6, delay=0.3),
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    server = studio_runs.serve(runs["store"])
    try:
        deadline = time.time() + 30
        while get(server, f"/api/runs/{run_id}/events").status == 404:  # its first write
            assert time.time() < deadline and writer.poll() is None, writer.stderr and writer.stderr.read()
            time.sleep(0.05)
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=20)
        conn.request("GET", f"/runs/{run_id}/live?after=0", headers={"Host": f"127.0.0.1:{server.port}"})
        response = conn.getresponse()
        assert response.status == 200 and response.getheader("content-type").startswith("text/event-stream")
        lags, statuses, html = [], [], ""
        last = 0
        while True:
            data = _next_sse(response)
            update = json.loads(data)
            assert update["last"] > last
            last = update["last"]
            statuses.append(update["status"])
            html += update["html"]
            written = get(server, f"/api/runs/{run_id}/events?after={last - 1}&limit=1").json()["events"][0]["ts"]
            lags.append(time.time() - written)
            if update["status"] != "running":
                break
        conn.close()
        assert writer.wait(30) == 0
        assert statuses[0] == "running" and statuses[-1] == "finished"
        assert len(statuses) >= 3  # it came in pieces, as written
        said = re.findall(r'<div class="msg-text">([^<]*)</div>', html)
        assert said[:3] == ["Should cities ban cars?", "Ada, turn 1: I argue for the motion, and my opponent is wrong.",
                            "Ben, turn 1: I argue against the motion, and my opponent is wrong."]
        print(f"\nlive: {len(lags)} updates, lag after the write: max {max(lags) * 1000:.0f} ms")
        assert max(lags) < 1.0, lags
    finally:
        writer.kill()
        server.stop()


def _next_sse(response: http.client.HTTPResponse) -> str:
    """The data of the next ``events`` message of a server-sent event stream."""
    event, data = "", []
    while True:
        line = response.readline().decode()
        assert line, "the stream ended"
        line = line.rstrip("\n")
        if not line:
            if event == "events" and data:
                return "\n".join(data)
            event, data = "", []
        elif line.startswith("event: "):
            event = line[7:]
        elif line.startswith("data: "):
            data.append(line[6:])


# ------------------------------------------------------------------------------------ safety
def test_every_page_says_what_the_browser_may_load(served, runs):
    for path in ("/", f"/runs/{runs['debate']}", "/api/runs", "/static/studio.js"):
        headers = get(served, path).headers
        assert "script-src 'self'" in headers["content-security-policy"], path
        assert headers["x-content-type-options"] == "nosniff"
        assert headers["x-frame-options"] == "DENY"
    assert "'unsafe-inline'" not in get(served, "/").headers["content-security-policy"]


def test_a_request_naming_another_host_is_refused(served):
    """DNS rebinding: a page on another site whose name points at 127.0.0.1 cannot read the studio."""
    refused = get(served, "/api/runs", host="evil.example:8765")
    assert refused.status == 403 and "host" in refused.body
    assert get(served, "/api/runs", host=f"localhost:{served.port}").status == 200


def test_state_changing_requests_need_the_pages_csrf_token(served, runs):
    run = runs["debate"]
    assert served.csrf and len(served.csrf) >= 24
    for form in ({"round": "2"}, {"round": "2", "csrf": "wrong"}, {"round": "2", "csrf": ""}):
        refused = post(served, f"/runs/{run}/fork", form)
        assert refused.status == 403 and "CSRF" in refused.body
    refused = post(served, f"/runs/{run}/approvals/a1", {"verdict": "approve"})
    assert refused.status == 403
    other_site = post(served, f"/runs/{run}/fork", {"round": "2", "csrf": served.csrf},
                      headers={"Origin": "http://evil.example"})
    assert other_site.status == 403 and "Origin" in other_site.body
    # with the token (and from the studio's own origin) the request reaches the handler
    allowed = post(served, f"/runs/{run}/fork", {"round": "2", "csrf": served.csrf},
                   headers={"Origin": f"http://127.0.0.1:{served.port}"})
    assert allowed.status in (303, 501)
    # GET cannot change anything
    assert get(served, f"/runs/{run}/fork").status == 405
    assert get(served, f"/runs/{run}/approvals/a1").status == 405


def test_steering_validates_its_input(served, runs):
    run, token = runs["debate"], served.csrf
    for form, says in (
        ({"verdict": "edit", "arguments": "{nope"}, "not JSON"),
        ({"verdict": "edit", "arguments": "[1]"}, "JSON object"),
        ({"verdict": "reject", "reason": " "}, "needs a reason"),
        ({"verdict": "maybe"}, "approve, reject or edit"),
        ({"verdict": "approve"}, "asked no approval"),  # the debate asked none
    ):
        answer = post(served, f"/runs/{run}/approvals/a1", {"csrf": token, **form})
        assert answer.status == 400 and says in answer.body, (form, answer.body[-600:])
    bad_round = post(served, f"/runs/{run}/fork", {"csrf": token, "round": "two"})
    assert bad_round.status == 400 and "whole number" in bad_round.body
    unfinished = post(served, f"/runs/{run}/fork", {"csrf": token, "round": "9"})
    assert unfinished.status == 400 and "did not finish round 9" in unfinished.body


def test_a_pending_approval_is_answered_from_the_page_and_the_rerun_finishes(tmp_path):
    store = tmp_path / "approvals.db"
    run_id = "approve-me"
    status, said = asyncio.run(studio_runs.needs_approval(store, run_id))
    assert status == "waiting" and said == ["What is 6 * 7?"]
    server = studio_runs.serve(store)
    try:
        assert get(server, "/api/runs").json()["runs"][0]["status"] == "waiting for approval"
        page = get(server, f"/runs/{run_id}").body
        assert 'data-approval="Calc-1"' in page and "calculator" in page and "6 * 7" in page
        # the pause is not a failure
        assert '<span class="icon-pause" aria-hidden="true"></span> paused' in page
        assert "turn-failed" not in page and "mark-paused" in page
        assert get(server, "/api/runs").json()["runs"][0]["failures"] == 0
        # an edit the tool's schema refuses is refused, and nothing is written
        bad = post(server, f"/runs/{run_id}/approvals/Calc-1",
                   {"csrf": server.csrf, "verdict": "edit", "arguments": '{"colour": "red"}'})
        assert bad.status == 400 and "&#39;expression&#39; is required" in bad.body
        assert get(server, "/api/runs").json()["runs"][0]["status"] == "waiting for approval"
        edited = post(server, f"/runs/{run_id}/approvals/Calc-1",
                      {"csrf": server.csrf, "verdict": "edit", "arguments": '{"expression": "6 * 8"}'})
        assert edited.status == 303 and edited.headers["location"] == f"/runs/{run_id}?decided=Calc-1#steer"
        after = get(server, f"/runs/{run_id}?decided=Calc-1").body
        assert "No approval pending." in after and "Answered approval" in after
        assert 'class="decision decision-edit"' in after and "by rolecast studio" in after
        assert get(server, "/api/runs").json()["runs"][0]["status"] == "paused"
        again = post(server, f"/runs/{run_id}/approvals/Calc-1", {"csrf": server.csrf, "verdict": "approve"})
        assert again.status == 400 and "answered already" in again.body
        # the script, run again under the run's id, goes on as decided
        status, said = asyncio.run(studio_runs.needs_approval(store, run_id))
        assert status == "finished" and said == ["What is 6 * 7?", "The answer is 48."]
        assert get(server, "/api/runs").json()["runs"][0]["status"] == "finished"
    finally:
        server.stop()


def test_a_rejection_from_the_page_reaches_the_role(tmp_path):
    store = tmp_path / "reject.db"
    asyncio.run(studio_runs.needs_approval(store, "reject-me"))
    server = studio_runs.serve(store)
    try:
        answer = post(server, "/runs/reject-me/approvals/Calc-1",
                      {"csrf": server.csrf, "verdict": "reject", "reason": "no <b>maths</b> today"})
        assert answer.status == 303
    finally:
        server.stop()
    status, said = asyncio.run(studio_runs.needs_approval(store, "reject-me"))
    assert status == "finished"
    assert said[-1] == "The answer is The user rejected this call: no <b>maths</b> today."


def test_forking_from_the_page_makes_a_run_that_starts_where_the_parent_was(served, runs):
    parent = runs["debate"]
    answer = post(served, f"/runs/{parent}/fork", {"csrf": served.csrf, "round": "2"})
    assert answer.status == 303
    fork = answer.headers["location"].rsplit("/", 1)[1]
    assert fork != parent
    page = get(served, f"/runs/{fork}").body
    assert f"fork at round 2 of {parent}" in page
    assert page.count('class="src src-replayed"') == 2 and 'class="src src-live"' not in page
    assert re.findall(r'<div class="msg-text">([^<]*)</div>', page) == [
        "Should cities ban cars?", "Ada, turn 1: I argue for the motion, and my opponent is wrong.",
        "Ben, turn 1: I argue against the motion, and my opponent is wrong."]
    listed = {r["run_id"]: r for r in get(served, "/api/runs").json()["runs"]}
    assert listed[fork]["parent"] == parent and listed[fork]["lineage"] == "fork at round 2"
    # the parent is untouched; the fork, run by its script, goes on live from round 3
    assert listed[parent]["events"] == get(served, f"/api/runs/{parent}").json()["events"]
    asyncio.run(studio_runs.debate(runs["store"], rounds=4, run_id=fork, llm=studio_runs.debate_model()))
    page = get(served, f"/runs/{fork}").body
    assert page.count('class="src src-replayed"') == 2 and page.count('class="src src-live"') == 2
    compare = get(served, f"/compare?a={parent}&b={fork}").body
    # the fork's model started its count again: Ada asks as in the parent (round 3) and answers otherwise
    assert "The messages part at round 3" in compare
    assert "The first model call that differs: round 4, <b>Ben</b>" in compare


def test_a_server_with_a_token_refuses_requests_without_it(runs):
    token = "t" * 12 + os.urandom(8).hex()
    server = studio_runs.serve(runs["store"], token=token)
    try:
        assert get(server, "/api/runs", auth=False).status == 401
        assert get(server, "/", auth=False, headers={"Authorization": "Bearer wrong-token-here"}).status == 401
        assert get(server, "/api/runs", auth=False, headers={"Authorization": f"Bearer {token}"}).status == 200
        # the printed URL: ?token= sets a cookie and sends the browser on without it in the address
        first = get(server, f"/?token={token}&q=Ada", auth=False)
        assert first.status == 303 and first.headers["location"] == "/?q=Ada"
        cookie = first.headers["set-cookie"]
        assert f"rolecast_studio_token={token}" in cookie and "HttpOnly" in cookie and "SameSite=strict" in cookie
        assert get(server, "/", auth=False, headers={"Cookie": f"rolecast_studio_token={token}"}).status == 200
        assert get(server, "/?token=wrong", auth=False).status == 401
        assert get(server, "/static/studio.css", auth=False).status == 401  # nothing is served without it
        # the token does not replace CSRF
        assert post(server, f"/runs/{runs['debate']}/fork", {"round": "1"}).status == 403
    finally:
        server.stop()


def test_the_token_rule():
    assert studio_server.access_token("127.0.0.1", None) is None
    assert studio_server.access_token("localhost", None) is None
    made = studio_server.access_token("0.0.0.0", None)
    assert made and len(made) >= 24 and made != studio_server.access_token("0.0.0.0", None)
    assert studio_server.access_token("192.168.1.5", "a-token-of-my-own-choosing") == "a-token-of-my-own-choosing"
    with pytest.raises(ConfigError, match="at least 16"):
        studio_server.access_token("0.0.0.0", "short")
    with pytest.raises(ConfigError, match="only with an access token"):
        asyncio.run(studio_server.serve(RunSource(MemoryRunStore()), host="0.0.0.0", port=0, token=None))


def test_static_assets_are_served_from_the_package(served):
    js = get(served, "/static/studio.js")
    assert js.status == 200 and "EventSource" in js.body
    css = get(served, "/static/studio.css")
    assert css.status == 200 and css.headers["content-type"].startswith("text/css")
    assert get(served, "/static/favicon.svg").status == 200
    assert get(served, "/static/../app.py").status == 404
    page = get(served, "/").body
    assert "http://" not in page and "https://" not in page  # nothing from the internet


def test_the_wheel_ships_the_templates_and_static_files():
    """Every file under rolecast/studio/templates and static matches pyproject's package-data globs."""
    text = (ROOT / "pyproject.toml").read_text()
    globs = re.search(r'\[tool\.setuptools\.package-data\]\s*rolecast = \[(.*?)\]', text, re.S)
    assert globs
    patterns = [g.strip().strip('"') for g in globs.group(1).split(",") if g.strip()]
    base = ROOT / "rolecast"
    files = [p for folder in ("studio/templates", "studio/static") for p in (base / folder).iterdir()]
    assert len(files) >= 10
    for f in files:
        assert any(fnmatch(str(f.relative_to(base)), pattern) for pattern in patterns), f


# --------------------------------------------------------------------------------- command line
def test_rolecast_studio_serves_the_store_and_starts_in_under_a_second(runs):
    """From the command to its first answer (a static file: what the page costs is measured above). The
    target is a second of the process's CPU time (0.8-1.0 s here, compiling from source as CI does with
    PYTHONDONTWRITEBYTECODE): the figure is printed, and bounded loosely here so that a loaded machine
    cannot fail it (a timed unit test must not flake). The templates compile in a background thread meanwhile."""
    if not os.path.exists("/proc/self/stat"):
        pytest.skip("reads the server's CPU time from /proc (Linux)")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    began = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "rolecast.cli", "studio", "--store", runs["store"], "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        url = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
        assert url, line + (proc.stderr.read() if proc.stderr else "")
        port = int(url.group(1))
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", "/static/favicon.svg", headers={"Host": f"127.0.0.1:{port}"})
        assert conn.getresponse().status == 200
        wall = time.perf_counter() - began
        conn.close()
        with open(f"/proc/{proc.pid}/stat") as stat:  # the child's CPU time so far (Linux)
            fields = stat.read().rsplit(")", 1)[1].split()
        cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    finally:
        proc.terminate()
        proc.wait(10)
    print(f"\nrolecast studio: answering {wall * 1000:.0f} ms after the command started ({cpu * 1000:.0f} ms of CPU)")
    assert cpu < 3.0, f"the studio used {cpu:.2f} s of CPU to start"
    assert wall < 10.0, f"the studio took {wall:.2f} s to start"


def test_rolecast_studio_refuses_a_missing_store(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "rolecast.cli", "studio", "--store", str(tmp_path / "none.db")],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=30)
    assert done.returncode == 2 and "no run store at" in done.stderr


def test_rolecast_studio_prints_the_token_it_requires(runs):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ROLECAST_STUDIO_TOKEN": "a-long-enough-token-123"}
    proc = subprocess.Popen([sys.executable, "-m", "rolecast.cli", "studio", "--store", runs["store"], "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    try:
        assert proc.stdout
        first, second = proc.stdout.readline(), proc.stdout.readline()
        assert "?token=a-long-enough-token-123" in first and "access token a-long-enough-token-123" in second
        port = int(re.search(r":(\d+)/", first).group(1))  # type: ignore[union-attr]
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", "/api/runs", headers={"Host": f"127.0.0.1:{port}"})
        assert conn.getresponse().status == 401
        conn.close()
    finally:
        proc.terminate()
        proc.wait(10)


def test_a_missing_studio_extra_is_a_clear_error(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "uvicorn" else real(name, *a))
    with pytest.raises(ConfigError, match=r"needs uvicorn: pip install 'rolecast\[studio\]'"):
        studio.require()


def test_importing_the_studio_package_loads_no_web_framework():
    code = ("import sys, rolecast.cli, rolecast.studio; "
            "print(sorted(m for m in ('starlette', 'uvicorn', 'jinja2') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.stdout.strip() == "[]", out.stderr


# ------------------------------------------------------------------------------- the adapter
def test_the_adapter_reads_a_store_object_as_it_reads_the_file(runs, tmp_path):
    """The SQL path (a SQLite file) and the generic path (any RunStore) give the same answers."""
    memory = MemoryRunStore()
    file_store = SQLiteRunStore(runs["store"])
    try:
        for run_id in (runs["debate"], runs["failed"], runs["rerun"]):
            copies = []
            for e in file_store.events(run_id):
                copy = type(e)(e.run_id, e.kind, e.data, e.round, e.role, ts=e.ts)
                copy.texts = file_store.texts(keys_of(e.data)) if e.kind == "llm_call" else None  # (its prompts)
                copies.append(copy)
            memory.extend(copies)
    finally:
        file_store.close()
    by_file, by_store = RunSource(runs["store"]), RunSource(memory)
    try:
        for run_id in (runs["debate"], runs["failed"], runs["rerun"]):
            assert by_file.run(run_id) == by_store.run(run_id)
            assert by_file.messages(run_id) == by_store.messages(run_id)
            assert by_file.call_keys(run_id) == by_store.call_keys(run_id)
            assert sorted(by_file.role_totals(run_id), key=lambda t: t.role) == \
                sorted(by_store.role_totals(run_id), key=lambda t: t.role)
            assert [e.as_json() for e in by_file.events(run_id, 3, 5)] == \
                [e.as_json() for e in by_store.events(run_id, 3, 5)]
    finally:
        by_file.close()


def test_the_adapter_follows_a_growing_run(tmp_path):
    """A kept summary reads only what was written since, and is then the same as a fresh one."""
    path = tmp_path / "grow.db"
    asyncio.run(studio_runs.debate(path, rounds=2, run_id="grow"))
    source = RunSource(path)
    try:
        before = source.run("grow")
        assert (before.rounds, before.calls, before.status) == (2, 2, "finished")
        asyncio.run(studio_runs.debate(path, rounds=4, run_id="grow"))  # resumed: two more rounds
        after = source.run("grow")
        fresh = RunSource(path)
        try:
            assert after == fresh.run("grow")
            assert source.messages("grow") == fresh.messages("grow")
        finally:
            fresh.close()
        assert after.rounds == 4 and after.events > before.events
    finally:
        source.close()


def test_a_deleted_run_leaves_the_list_and_its_page(tmp_path):
    path = tmp_path / "delete.db"
    asyncio.run(studio_runs.debate(path, rounds=2, run_id="short-lived"))
    asyncio.run(studio_runs.debate(path, rounds=2, run_id="stays"))
    source = RunSource(path)
    try:
        assert {r.run_id for r in source.runs()} == {"short-lived", "stays"}
        assert source.run("short-lived").events > 0
        unchanged = source.runs()  # nothing written since: the kept answers
        assert [r.run_id for r in unchanged] == [r.run_id for r in source.runs()]
        writer = SQLiteRunStore(path)
        try:
            assert writer.delete("short-lived") > 0
        finally:
            writer.close()
        assert [r.run_id for r in source.runs()] == ["stays"]
        with pytest.raises(UsageError, match="no run 'short-lived'"):
            source.run("short-lived")
    finally:
        source.close()


def test_a_missing_or_unreadable_store_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="no run store"):
        RunSource(tmp_path / "nothing.db")
    (tmp_path / "junk.db").write_text("not a database")
    with pytest.raises(ConfigError, match="cannot read the run store"):
        RunSource(tmp_path / "junk.db")
    newer = tmp_path / "newer.db"
    SQLiteRunStore(newer).close()
    with sqlite3.connect(newer) as db:
        db.execute("PRAGMA user_version = 99")
    with pytest.raises(ConfigError, match="payload format 99"):  # never misread
        RunSource(newer)


def test_status_of():
    assert status_of(1, []) == "running"
    assert status_of(1, ["n_round"]) == "finished"
    assert status_of(1, ["idle"]) == "finished"
    assert status_of(1, ["error: ActionFailed"]) == "failed"
    assert status_of(1, ["budget"]) == "failed"
    assert status_of(2, ["n_round"]) == "running"  # resumed since it stopped
    assert status_of(1, [], waiting=True) == "waiting for approval"
    assert status_of(1, [], held=False) == "interrupted"  # nobody holds it: its process died
    assert status_of(1, [], held=None) == "running"  # a store that keeps no leases cannot tell
    assert status_of(1, ["n_round"], held=False) == "finished"


def test_a_run_whose_process_was_killed_shows_as_interrupted(runs):
    """The run's lease names its process: once that process is gone (kill -9), the run is no longer running."""
    run_id = "killed-" + os.urandom(4).hex()
    writer = subprocess.Popen(studio_runs.live_command(runs["store"], run_id, rounds=20, delay=0.3),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    source = RunSource(runs["store"])
    try:
        deadline = time.time() + 30
        while source.last_seq(run_id) < 3:
            assert time.time() < deadline and writer.poll() is None
            time.sleep(0.05)
        assert source.run(run_id).status == "running"
        writer.kill()
        writer.wait(10)
        assert source.run(run_id).status == "interrupted"
        assert source.runs(status="interrupted")[0].run_id == run_id
    finally:
        writer.kill()
        source.close()


def test_shape_groups_a_concurrent_rounds_events_by_role():
    from rolecast.studio.source import EventView

    events = [EventView(1, 0, "round_started", 1, "", {"roles": ["A", "B"]}),
              EventView(2, 0, "llm_call", 1, "A", {}), EventView(3, 0, "llm_call", 1, "B", {}),
              EventView(4, 0, "message", 1, "B", {"message": {"sent_from": "B"}}),
              EventView(5, 0, "message", 1, "A", {"message": {"sent_from": "A"}}),
              EventView(6, 0, "round_finished", 1, "", {}), EventView(7, 0, "run_stopped", 1, "", {})]
    (round_one,) = shape.group(events)
    assert [e.seq for e in round_one.head] == [1] and [e.seq for e in round_one.tail] == [6, 7]
    assert [(t.role, [e.seq for e in t.events]) for t in round_one.turns] == [("A", [2, 5]), ("B", [3, 4])]


# ------------------------------------------------------------------------------ PostgreSQL
def test_the_studio_reads_a_postgresql_store_by_its_url(tmp_path):
    """A team logs to PostgreSQL (started by the test on 127.0.0.1); the studio serves it by URL."""
    pytest.importorskip("psycopg")
    from pg_server import PostgresServer, find_bin

    if find_bin() is None:
        pytest.skip("PostgreSQL is not installed (apt-get install postgresql)")
    pg = PostgresServer().start()
    try:
        run_id = asyncio.run(studio_runs.debate(pg.dsn, rounds=2))
        source = RunSource(pg.dsn)
        try:
            run = source.run(run_id)
            assert (run.status, run.rounds, run.calls, run.roles) == ("finished", 2, 2, ["Ada", "Ben"])
            assert [m.sender for m in source.messages(run_id)] == ["user", "Ada", "Ben"]
            assert [e.seq for e in source.events(run_id, 2, 3)] == [3, 4, 5]
        finally:
            source.close()
        server = studio_runs.serve(pg.dsn)
        try:
            page = get(server, f"/runs/{run_id}").body
            assert "Ben, turn 1: I argue against the motion" in page
            assert get(server, "/api/runs").json()["runs"][0]["run_id"] == run_id
        finally:
            server.stop()
    finally:
        pg.stop()


def test_a_store_urls_password_is_never_shown():
    from rolecast.studio.source import redact

    assert redact("postgresql://ada:s3cret@db.example:5432/runs") == "postgresql://ada:***@db.example:5432/runs"
    assert redact("postgresql://ada@db.example/runs") == "postgresql://ada@db.example/runs"
    assert redact("/tmp/runs.db") == "/tmp/runs.db"
