"""The studio against the fourth hostile probe (issue 32: items 3, 4, 5, 7, 8 and 10's studio parts):
each test is named after the hostile input that broke it, against a real uvicorn on 127.0.0.1."""

from __future__ import annotations

import difflib
import http.client
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
pytest.importorskip("jinja2")

import studio_runs
from studio_runs import get, post

from rolecast.runs import MESSAGE, RUN_STARTED, RUN_STOPPED, RunEvent, SQLiteRunStore
from rolecast.studio import shape
from rolecast.studio.source import MessageView


def write_run(store: Path | str, run_id: str, texts: list[str], *, roles: tuple[str, str] = ("Ada", "Ben"),
              idea: str = "a probe") -> str:
    """A run of one message per text (Ada and Ben in turn), written straight into ``store``."""
    db = SQLiteRunStore(store)
    try:
        now = time.time()
        batch = [RunEvent(run_id, RUN_STARTED, {"team": "T", "idea": idea, "roles": [{"name": r} for r in roles]},
                          0, "", ts=now)]
        for i, text in enumerate(texts):
            sender, other = (roles[0], roles[1]) if i % 2 == 0 else (roles[1], roles[0])
            batch.append(RunEvent(run_id, MESSAGE, {"message": {
                "id": f"m{i}", "content": text, "role": sender, "cause_by": "x.Speak", "sent_from": sender,
                "send_to": [other], "metadata": {}}}, 1 + i // 2, sender, ts=now + i * 1e-3))
        batch.append(RunEvent(run_id, RUN_STOPPED, {"reason": "n_round", "rounds": len(texts) // 2}, len(texts) // 2,
                              "", ts=now + len(texts)))
        db.extend(batch)
    finally:
        db.close()
    return run_id


def views(texts: list[str]) -> list[MessageView]:
    return [MessageView(i + 1, 1 + i // 2, "Ada" if i % 2 == 0 else "Ben", ["Ben" if i % 2 == 0 else "Ada"], t,
                        "Speak") for i, t in enumerate(texts)]


# ------------------------------------------------------------------------- 32.3: /compare is bounded
def test_two_runs_of_4000_near_identical_messages_are_never_handed_to_difflib_whole(monkeypatch):
    """Five texts repeated, one message in 100 changed: difflib (autojunk=False) is quadratic on that;
    it may only ever see small stretches, and the comparison still finds exactly the changed ones."""
    seen: list[int] = []
    real = difflib.SequenceMatcher

    def recording(*args: Any, **kwargs: Any) -> difflib.SequenceMatcher[Any]:
        matcher = real(*args, **kwargs)
        seen.append(len(matcher.a) * len(matcher.b))
        return matcher

    monkeypatch.setattr(difflib, "SequenceMatcher", recording)
    left = [f"I agree {i % 5}." for i in range(4000)]
    right = [f"I changed my mind ({i})." if i % 100 == 0 else t for i, t in enumerate(left)]
    found = shape.compare(views(left), views(right), [], [])
    assert max(seen, default=0) <= 40_000, f"difflib was handed {max(seen):,} pairs of messages"
    changed = [r for r in found.rows if r.kind == "changed"]
    assert [r.right.content for r in changed if r.right] == [f"I changed my mind ({i})." for i in range(0, 4000, 100)]
    assert found.same_messages == 3960 and found.first_difference == 0


def test_a_comparison_whose_client_left_stops_at_its_next_step():
    """The old comparison went on for minutes on a server thread after the page that asked for it closed."""
    from rolecast.studio.align import Abandoned

    left = [f"I agree {i % 5}." for i in range(4000)]
    right = [f"I changed my mind ({i})." if i % 100 == 0 else t for i, t in enumerate(left)]
    asked: list[int] = []

    def gone() -> bool:
        asked.append(1)
        return len(asked) > 3  # the client leaves after the comparison's first steps

    with pytest.raises(Abandoned):
        shape.compare(views(left), views(right), [], [], stop=gone)
    assert len(asked) == 4


def test_a_compare_of_two_runs_that_differ_in_3000_messages_shows_a_bounded_page(tmp_path):
    store = tmp_path / "runs.db"
    a = write_run(store, "all-left", [f"left {i}" for i in range(3000)])
    b = write_run(store, "all-right", [f"right {i}" for i in range(3000)])
    served = studio_runs.serve(store)
    try:
        page = get(served, f"/compare?a={a}&b={b}", timeout=60)
    finally:
        served.stop()
    assert page.status == 200
    assert page.body.count('<tr class="cmp-changed') == shape.MAX_ROWS
    assert f"and {3000 - shape.MAX_ROWS:,} more differing message(s), not shown" in page.body


# ------------------------------------------------------------ 32.4 and 32.10: a POST is checked first
@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory):
    store = tmp_path_factory.mktemp("hostile") / "runs.db"
    write_run(store, "plain", ["Hello.", "Hi."])
    server = studio_runs.serve(store)
    yield server
    server.stop()


def _raw_post(served: studio_runs.Served, headers: dict[str, str], chunks: list[bytes]) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", served.port, timeout=10)
    try:
        conn.putrequest("POST", "/runs/plain/fork", skip_host=True, skip_accept_encoding=True)
        for key, value in {"Host": f"127.0.0.1:{served.port}", "Origin": "null",
                           "Content-Type": "application/x-www-form-urlencoded", **headers}.items():
            conn.putheader(key, value)
        conn.endheaders()
        try:
            for chunk in chunks:
                conn.send(chunk)
        except OSError:
            pass  # (the server answered and closed before all was sent)
        return conn.getresponse().status
    finally:
        conn.close()


def test_a_400_mb_post_with_origin_null_is_refused_before_its_body_is_read(served):
    """Content-Length says 400 MB and a few bytes come: the old studio waited to read them all (and held
    them in memory) before it looked for the CSRF token."""
    assert _raw_post(served, {"Content-Length": str(400 << 20)}, [b"round=1&"]) == 413


def test_a_chunked_post_of_2_mb_without_a_token_stops_being_read_at_the_cap(served):
    piece = b"a" * (256 << 10)
    chunks = [b"%x\r\n%s\r\n" % (len(piece), piece)] * 8 + [b"0\r\n\r\n"]
    assert _raw_post(served, {"Transfer-Encoding": "chunked"}, chunks) == 413


def test_a_post_from_another_port_of_this_machine_is_refused(served):
    """http://127.0.0.1:1 is another origin than the studio's own port (the old check compared names only)."""
    form = {"csrf": served.csrf, "round": "0"}
    other = post(served, "/runs/plain/fork", form, headers={"Origin": "http://127.0.0.1:1"})
    assert other.status == 403 and "Origin" in other.body
    own = post(served, "/runs/plain/fork", form, headers={"Origin": f"http://127.0.0.1:{served.port}"})
    assert own.status == 303


# ------------------------------------------------------------ 32.5: the runs list is cheap and bounded
def test_a_filtered_runs_list_of_300_runs_reads_no_run_again_when_nothing_was_written(tmp_path, monkeypatch):
    """The old studio kept 256 summaries: a filter that looks at 300 runs read every run again on each
    refresh of an open tab (one a second)."""
    from rolecast.studio.source import RunSource

    store = tmp_path / "runs.db"
    db = SQLiteRunStore(store)
    try:
        for r in range(300):
            db.extend([RunEvent(f"r{r:03d}", RUN_STARTED, {"idea": f"idea {r}", "roles": [{"name": "Ada"}]}, 0, ""),
                       RunEvent(f"r{r:03d}", RUN_STOPPED, {"reason": "n_round"}, 1, "")])
    finally:
        db.close()
    source = RunSource(store)
    try:
        assert source.runs("no-such-run") == []
        reads: list[str] = []
        real = source._news
        monkeypatch.setattr(source, "_news", lambda run_id, *a, **k: reads.append(run_id) or real(run_id, *a, **k))
        assert source.runs("no-such-run") == [] and len(source.runs("idea 29")) == 11
        assert reads == []
    finally:
        source.close()


def test_ten_runs_of_600_long_messages_opened_one_after_another_are_not_all_kept(tmp_path, monkeypatch):
    """Each run's page keeps its messages (for the graph); the old studio kept 256 runs' whatever they
    weighed (five runs of 200,000 events: 464 MB). The detailed summaries kept weigh at most the budget."""
    import gc
    import tracemalloc

    from rolecast.studio.source import RunSource

    try:
        from rolecast.studio import summary
    except ImportError:  # (the studio before issue 32: one cache, by count)
        pass
    else:
        monkeypatch.setattr(summary, "DETAIL_BUDGET", 1 << 20)
    store = tmp_path / "runs.db"
    for r in range(10):
        write_run(store, f"long-{r}", [f"{r} {i} " + "x" * 1990 for i in range(600)])
    source = RunSource(store)
    try:
        source.messages("long-0")
        gc.collect()
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        for r in range(10):
            assert len(source.messages(f"long-{r}")) == 600
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0] - before
        tracemalloc.stop()
        assert kept < 4 << 20, f"the studio kept {kept / 2**20:.1f} MB of ten runs' messages"
        assert source.run("long-3").events == 602  # (what it dropped it reads again)
    finally:
        source.close()


# --------------------------------------------------------------- 32.7, 32.10: what a page writes
BIDI = "invoice\u202efdp.exe"


@pytest.fixture(scope="module")
def probed(tmp_path_factory: pytest.TempPathFactory):
    """A store with a message holding a bidi override, one of 50 MB, fenced code with markup in it, and a
    run waiting for an approval whose id holds a '/'."""
    from rolecast.runs.events import APPROVAL_REQUESTED

    store = tmp_path_factory.mktemp("probed") / "runs.db"
    write_run(store, "bidi", [f"open {BIDI}", "no."], roles=("Ev\u202eil", "Ben"))
    write_run(store, "huge", ["x" * (50 << 20), "short"])
    write_run(store, "code", ["Try this:\n```python\nprint('<script>alert(1)</script>')\n```\nthen run it.", "ok"])
    write_run(store, "asks", ["Hi."])
    db = SQLiteRunStore(store)
    try:
        db.append(RunEvent("asks", APPROVAL_REQUESTED, {
            "id": "calc/1", "role": "Ada", "kind": "tool", "name": "calculator",
            "arguments": {"expression": "6 * 7"}, "schema": {"type": "object"}, "round": 1}, 1, "Ada"))
    finally:
        db.close()
    server = studio_runs.serve(store)
    yield server
    server.stop()


def test_a_message_and_a_role_name_with_a_bidi_override_show_it_as_an_escape(probed):
    page = get(probed, "/runs/bidi").body
    assert "\u202e" not in page
    assert "invoice\\u202efdp.exe" in page and "Ev\\u202eil" in page
    assert "\u202e" not in get(probed, "/").body and "\u202e" not in get(probed, "/compare?a=bidi&b=code").body


def test_a_50_mb_message_is_folded_on_the_server(probed):
    page = get(probed, "/runs/huge", timeout=60)
    assert page.status == 200
    assert len(page.body) < 1 << 20, f"the page is {len(page.body) / 2**20:.1f} MB"
    assert f"{(50 << 20) - 20_000:,} more characters" in page.body


def test_fenced_code_in_a_message_is_code_and_still_text(probed):
    page = get(probed, "/runs/code").body
    assert '<pre class="code" data-lang="python"><code>print(&#39;&lt;script&gt;alert(1)&lt;/script&gt;&#39;)' \
           '</code></pre>' in page
    assert "```" not in page and "<script>alert" not in page


def test_an_approval_whose_id_holds_a_slash_is_answered_from_its_form(probed):
    page = get(probed, "/runs/asks").body
    action = '/runs/asks/approvals/calc%2F1'
    assert f'action="{action}"' in page
    answer = post(probed, action, {"csrf": probed.csrf, "verdict": "approve"})
    assert answer.status == 303 and "decided=calc%2F1" in answer.headers["location"]
    assert "No approval pending." in get(probed, "/runs/asks").body


def test_edited_arguments_nested_100000_deep_are_a_400(probed):
    deep = "[" * 100_000 + "]" * 100_000  # (the old studio: RecursionError, HTTP 500)
    answer = post(probed, "/runs/asks/approvals/calc%2F1", {"csrf": probed.csrf, "verdict": "edit",
                                                              "arguments": deep})
    assert answer.status == 400 and "nest deeper than 100 levels" in answer.body


@pytest.mark.parametrize("path, headers", [
    ("/runs/bidi?after=99999999999999999999999", {}),
    ("/api/runs/bidi/events?after=99999999999999999999999", {}),
    ("/api/runs/bidi/events?limit=99999999999999999999999", {}),
    ("/runs/bidi/live", {"Last-Event-ID": "9" * 40}),
])
def test_a_seq_past_what_sqlite_holds_is_a_400(probed, path, headers):
    answer = get(probed, path, headers=headers)
    assert answer.status == 400, answer.body[:300]
    assert "whole number" in answer.body


# ----------------------------------------------------------------------------- 32.10: the loopback rule
@pytest.mark.parametrize("host", ["127.attacker.example", "127.0.0.1.nip.io", "localhost.attacker.example"])
def test_a_host_that_only_starts_like_loopback_needs_a_token(host):
    from rolecast.studio import server

    assert not server.is_loopback(host)
    assert server.access_token(host, None) is not None
    from rolecast.studio.app import allowed_hosts

    assert allowed_hosts(host) is None


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "localhost", "::1", "[::1]"])
def test_loopback_addresses_are_loopback(host):
    from rolecast.studio import server

    assert server.is_loopback(host) and server.access_token(host, None) is None


# ------------------------------------------------------------------------ 32.8: read-only media
def _read_only_mount(folder: Path) -> list[str] | None:
    """A command prefix that runs a command with ``folder`` mounted read-only (root: a private mount
    namespace), or None where that cannot be done here (as tests/test_hardening3.py does)."""
    import os
    import shutil
    import subprocess

    if os.geteuid() != 0 or not shutil.which("unshare"):
        return None
    probe = f"mount --bind {folder} {folder} && mount -o remount,bind,ro {folder} && ! touch {folder}/probe"
    if subprocess.run(["unshare", "-m", "sh", "-c", probe], capture_output=True).returncode != 0:
        return None
    return ["unshare", "-m", "sh", "-c", f"mount --bind {folder} {folder} && mount -o remount,bind,ro {folder} && "
            'exec "$0" "$@"']


def test_the_studio_reads_a_store_on_read_only_media(tmp_path):
    import os
    import subprocess
    import sys

    folder = tmp_path / "media"
    folder.mkdir()
    write_run(folder / "runs.db", "on-a-cd", ["Hello.", "Hi."])
    if os.geteuid() == 0:
        prefix = _read_only_mount(folder)
        if prefix is None:
            pytest.skip("cannot mount a folder read-only here")
    else:
        prefix = []
        for path in folder.rglob("*"):
            path.chmod(0o555 if path.is_dir() else 0o444)
        folder.chmod(0o555)
    root = Path(__file__).resolve().parents[1]
    script = ("import sys; from rolecast.studio.source import RunSource; s = RunSource(sys.argv[1]); "
              "print([r.run_id for r in s.runs()], len(s.messages('on-a-cd')))")
    done = subprocess.run([*prefix, sys.executable, "-c", script, str(folder / "runs.db")], capture_output=True,
                          text=True, cwd=root, env={**os.environ, "PYTHONPATH": str(root)})
    assert done.returncode == 0, done.stderr  # was: ConfigError: ... unable to open database file
    assert done.stdout.strip() == "['on-a-cd'] 2"


def test_the_compare_benchmark_lines_up_16000_near_identical_messages_in_seconds_not_minutes():
    """bench/bench_studio.py's alignment at its largest size, with a bound 30x what it takes here (0.16 s
    on a loaded 2-core machine; difflib took 38 s for 8,000): a return to quadratic time fails it."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    import bench_studio

    assert bench_studio.align_seconds(16_000) < 5.0


# ------------------------------------------------------------------- 32.9 (the studio's part): a damaged row
def test_a_payload_that_is_text_not_json_damages_its_run_only(tmp_path):
    """One row whose payload is not JSON (and one a JSON list): the old runs list failed for every run
    (SQLite's json_extract: "malformed JSON"), and the run's page was an HTTP 500."""
    import sqlite3

    store = tmp_path / "runs.db"
    write_run(store, "good", ["Hello.", "Hi."])
    write_run(store, "hurt", ["Hello.", "Hi."])
    with sqlite3.connect(store) as db:
        db.execute("INSERT INTO events (run_id, seq, ts, kind, round, role, data) VALUES "
                   "('hurt', 100, 0, 'message', 1, 'Ada', 'this is not {json'), "
                   "('hurt', 101, 0, 'run_stopped', 1, '', '[1, 2]')")
    served = studio_runs.serve(store)
    try:
        listed = get(served, "/")
        assert listed.status == 200 and 'data-run="good"' in listed.body
        assert "2 damaged" in listed.body
        assert {r["run_id"] for r in get(served, "/api/runs").json()["runs"]} == {"good", "hurt"}
        page = get(served, "/runs/hurt")
        assert page.status == 200
        assert "event #100</b> (message) cannot be read: its payload is not JSON" in page.body
        assert "(run_stopped) cannot be read: its payload is a JSON list, not an object" in page.body
        assert get(served, "/runs/good").status == 200
    finally:
        served.stop()


def test_a_filtered_runs_list_over_a_store_object_reads_no_unchanged_run_again(monkeypatch):
    """A PostgreSQL store (or any store object) has no data_version: the old list read every event of
    every run on each refresh; a run whose event count has not changed is not read again."""
    from rolecast.runs import MemoryRunStore
    from rolecast.studio.source import RunSource

    store = MemoryRunStore()
    for r in range(5):
        store.extend([RunEvent(f"m{r}", RUN_STARTED, {"idea": f"idea {r}", "roles": [{"name": "Ada"}]}, 0, ""),
                      RunEvent(f"m{r}", RUN_STOPPED, {"reason": "n_round"}, 1, "")])
    source = RunSource(store)
    assert source.runs("no-such-run") == []
    reads: list[str] = []
    real = source._news
    monkeypatch.setattr(source, "_news", lambda run_id, *a, **k: reads.append(run_id) or real(run_id, *a, **k))
    assert source.runs("no-such-run") == []
    assert reads == []
    store.append(RunEvent("m3", RUN_STARTED, {"idea": "idea 3", "roles": [{"name": "Ada"}]}, 2, ""))
    assert [r.run_id for r in source.runs("idea 3")] == ["m3"] and reads == ["m3"]
    assert source.run("m3").status in ("running", "interrupted")
