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
