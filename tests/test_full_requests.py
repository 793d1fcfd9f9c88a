"""Every model call's full request in the run log (issue 24's "expandable to its full request"):
every message as sent, the settings, each text kept once per store, read back through
``rolecast.runs.request_of``; older stores still read; deleting runs drops the texts they alone used."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from actions import Action, UserRequirement
from environment import Team
from memory import Message
from rolecast.runs import (
    LLM_CALL,
    MemoryRunStore,
    RunEvent,
    SQLiteRunStore,
    open_store,
    request_of,
    requests_of,
)
from rolecast.runs.events import FORMAT_VERSION
from rolecast.runs.inspection import export_run, show_run
from rolecast.runs.requests import text_key
from rolecast.testing import FunctionLLM
from roles import Role

ROOT = Path(__file__).resolve().parent.parent
#: a long system prompt every call of the chat repeats
BRIEF = "You review pull requests. " + "Be specific: cite the line, say why, propose the fix. " * 60


class Review(Action):
    """A call of several messages: the brief, the conversation so far, a question."""

    name: str = "Review"

    async def run(self, history: list[Message]) -> str:
        messages: list[dict[str, Any]] = [{"role": "system", "content": BRIEF}]
        for m in history:
            messages.append({"role": "assistant" if m.sent_from == self.name else "user", "content": m.content})
        messages.append({"role": "user", "content": f"Round {len(history)}: what next? <b>bold</b>"})
        return await self._aask(messages)


def chat_team(store: Any, seen: list[list[dict[str, Any]]], run_id: str | None = None, **kw: Any) -> Team:
    def answer(messages: list[dict[str, Any]]) -> str:
        seen.append([dict(m) for m in messages])
        return f"answer {len(seen)}: " + "looks fine. " * 5

    team = Team(llm=FunctionLLM(answer), store=store, run_id=run_id, **kw)
    team.hire([Role(name="Ann", actions=[Review()], watch=[UserRequirement, Review]),
               Role(name="Bob", actions=[Review()], watch=[Review])])
    return team


def chat(store: Any, rounds: int = 4, run_id: str | None = None, idea: str = "Please review PR 42.",
         **kw: Any) -> tuple[str, list[list[dict]]]:
    seen: list[list[dict[str, Any]]] = []
    team = chat_team(store, seen, run_id, **kw)
    team.run_sync(n_round=rounds, idea=idea)
    return team.run_id, seen


def texts_rows(db: Path) -> list[tuple[str, str]]:
    return sqlite3.connect(db).execute("SELECT key, text FROM texts").fetchall()


# ------------------------------------------------------------------------------- recording
@pytest.mark.parametrize("kind", ["sqlite", "memory"])
def test_every_call_logs_its_messages_as_sent_and_its_settings(tmp_path, kind):
    store = SQLiteRunStore(tmp_path / "runs.db") if kind == "sqlite" else MemoryRunStore()
    run_id, seen = chat(store)
    calls = list(store.events(run_id, [LLM_CALL]))
    assert len(calls) == len(seen) >= 4 and max(len(s) for s in seen) >= 5  # calls of several messages
    requests = requests_of(store, calls)
    for request, asked in zip(requests, seen, strict=True):
        assert request.full and request.kind == "complete" and request.model == "function"
        assert request.messages == asked  # every message, its role and text, in order
        assert request.settings["max_tokens"] > 0
    assert request_of(store, calls[-1]) == requests[-1]


def test_settings_and_constraints_are_logged(tmp_path):
    store = SQLiteRunStore(tmp_path / "runs.db")
    grammar = 'root ::= "yes" | "no"'
    tools = [{"type": "function", "function": {"name": "calc", "parameters": {"type": "object"}}}]

    class Ask(Action):
        async def run(self, history: list[Message]) -> str:
            messages = [{"role": "user", "content": "yes or no?"}]
            await self.llm.complete(messages, stop=["END"], settings={"temperature": 0.25, "seed": 7},
                                    grammar=grammar)
            done = await self.llm.complete(messages, tools=tools)
            return done.text

    llm = FunctionLLM(lambda m: "yes")
    llm.supports_tools = True
    team = Team(llm=llm, store=store)
    team.hire([Role(name="Q", actions=[Ask()], watch=[UserRequirement])])
    team.run_sync(n_round=1, idea="go")
    first, second = requests_of(store, store.events(team.run_id, [LLM_CALL]))
    assert first.settings["stop"] == ["END"] and first.settings["temperature"] == 0.25
    assert first.settings["seed"] == 7 and first.settings["grammar"] == grammar
    assert second.settings["tools"] == tools and "grammar" not in second.settings


def test_a_text_is_stored_once_however_many_calls_repeat_it(tmp_path):
    db = tmp_path / "runs.db"
    _, seen = chat(str(db), rounds=8)
    assert len(seen) == 8
    rows = texts_rows(db)
    assert [text for _, text in rows].count(BRIEF) == 1  # 8 calls, one copy
    assert len(rows) == len({k for k, _ in rows})
    raw = sqlite3.connect(db)
    # no event holds the whole brief (a call holds its key, and its summary the first 300 characters)
    assert raw.execute("SELECT COUNT(*) FROM events WHERE instr(data, ?) > 0", (BRIEF,)).fetchone()[0] == 0
    assert raw.execute("SELECT COUNT(*) FROM events WHERE instr(data, ?) > 0",
                       (text_key(BRIEF),)).fetchone()[0] == 8
    # a second run in the same store adds no copy either
    chat(str(db), rounds=2)
    assert [text for _, text in texts_rows(db)].count(BRIEF) == 1


def test_the_journal_carries_a_calls_texts_across_a_crash(tmp_path):
    """A staged call (durable in the journal, not yet in the database) whose process dies: the next
    process to open the store writes the call and its texts."""
    db = tmp_path / "runs.db"
    code = f"""
import os
from rolecast.runs import SQLiteRunStore, RunEvent
store = SQLiteRunStore({str(db)!r})
event = RunEvent("crash", "llm_call", {{"fingerprint": "f", "request": {{"kind": "complete"}},
                 "response": {{"text": "ok"}}, "messages": [["system", "k1"], ["user", "k2"]], "settings": {{}}}})
event.texts = {{"k1": "a system prompt", "k2": "a question\\nover two lines"}}
assert store.stage([event])
os._exit(0)  # (no write to the database, no cleanup: as kill -9)
"""
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, timeout=60,
                   env={**os.environ, "PYTHONPATH": str(ROOT)})
    store = SQLiteRunStore(db)
    (call,) = store.events("crash", [LLM_CALL])
    assert [m["content"] for m in request_of(store, call).messages] == [
        "a system prompt", "a question\nover two lines"]
    store.close()


# ---------------------------------------------------------------------------------- readers
def test_runs_show_calls_and_export_print_the_full_request(tmp_path, capsys):
    db = tmp_path / "runs.db"
    run_id, seen = chat(str(db), rounds=3)
    store = open_store(str(db), read_only=True)
    assert store is not None
    shown = show_run(store, run_id, calls=True)
    assert BRIEF[:200] in shown and "[1 system]" in shown and '"max_tokens"' in shown
    assert BRIEF[:200] not in show_run(store, run_id)  # (the plain timeline stays short)
    lines = [json.loads(line) for line in export_run(store, run_id)]
    exported = [line["request"]["messages"] for line in lines if line["kind"] == LLM_CALL]
    assert exported == seen
    store.close()


def to_format_2(db: Path) -> None:
    """Make a store look as rolecast wrote it before full requests were kept: no texts table, calls
    without messages, settings or constraints, user_version 2."""
    raw = sqlite3.connect(db)
    rows = raw.execute("SELECT run_id, seq, data FROM events WHERE kind = 'llm_call'").fetchall()
    for run_id, seq, data in rows:
        old = {k: v for k, v in json.loads(data).items() if k not in ("messages", "settings", "constraints")}
        raw.execute("UPDATE events SET data = ? WHERE run_id = ? AND seq = ?", (json.dumps(old), run_id, seq))
    raw.execute("DROP TABLE texts")
    raw.execute("PRAGMA user_version = 2")
    raw.commit()
    raw.close()


def test_a_store_of_the_format_before_still_reads_and_resumes(tmp_path):
    db = tmp_path / "runs.db"
    run_id, seen = chat(str(db), rounds=3)
    to_format_2(db)
    reader = open_store(str(db), read_only=True)  # (read-only: no texts table is made)
    assert reader is not None and reader.format == 2
    calls = list(reader.events(run_id, [LLM_CALL]))
    old = request_of(reader, calls[0])
    assert not old.full and old.messages == [] and old.summary["n_messages"] == len(seen[0])
    assert old.summary["last"] == seen[0][-1]["content"]
    assert "logged before full requests were kept" in show_run(reader, run_id, calls=True)
    reader.close()
    # resumed under its id with more rounds: the recorded calls are answered from the log, the new
    # ones go live and are logged whole
    again, more = chat(str(db), rounds=5, run_id=run_id)
    assert again == run_id and len(more) == 2
    store = SQLiteRunStore(db)
    assert sqlite3.connect(db).execute("PRAGMA user_version").fetchone()[0] == FORMAT_VERSION
    requests = requests_of(store, store.events(run_id, [LLM_CALL]))
    assert [r.full for r in requests] == [False] * 3 + [True] * 2
    assert [r.messages for r in requests[3:]] == more
    store.close()


def test_the_studio_shows_a_call_of_the_older_format_by_its_summary(tmp_path):
    pytest.importorskip("jinja2")
    from rolecast.studio.source import RunSource

    db = tmp_path / "runs.db"
    run_id, _ = chat(str(db), rounds=2)
    to_format_2(db)
    source = RunSource(str(db))
    try:
        views = [v for v in source.events(run_id) if v.kind == LLM_CALL]
        assert views and all(v.request is not None and not v.request.full for v in views)
    finally:
        source.close()


# ----------------------------------------------------------------------------- keeping it small
def _shared_and_own(store: Any) -> tuple[str, str, set[str]]:
    """Two runs sharing the brief, each with texts of its own; (run a, run b, a's own keys)."""
    a, _ = chat(store, rounds=2, run_id="run-a", idea="Please review PR 1.")
    b, _ = chat(store, rounds=3, run_id="run-b", idea="Please review PR 2.")

    def keys(run: str) -> set[str]:
        found: set[str] = set()
        for event in store.events(run, [LLM_CALL]):
            found |= {ref[1] for ref in event.data["messages"]}
        return found

    return a, b, keys(a) - keys(b)


@pytest.mark.parametrize("kind", ["sqlite", "memory"])
def test_deleting_and_pruning_runs_drops_the_texts_only_they_used(tmp_path, kind):
    store = SQLiteRunStore(tmp_path / "runs.db") if kind == "sqlite" else MemoryRunStore()
    a, b, own = _shared_and_own(store)
    assert own and store.texts(own).keys() == own
    store.delete(a)
    assert store.texts(own) == {}  # a's own texts went with it
    assert store.texts([text_key(BRIEF)]) == {text_key(BRIEF): BRIEF}  # the shared one stays
    assert all(r.full and None not in [m["content"] for m in r.messages]
               for r in requests_of(store, store.events(b, [LLM_CALL])))  # b reads whole
    assert store.prune(keep=0) == [b]
    assert store.texts([text_key(BRIEF)]) == {}
    if kind == "sqlite":
        assert texts_rows(tmp_path / "runs.db") == []


def test_a_rerun_reusing_answers_and_a_fork_read_their_calls_whole(tmp_path):
    db = tmp_path / "runs.db"
    parent, seen = chat(str(db), rounds=3, run_id="parent")
    rerun, more = chat(str(db), rounds=3, run_id="rerun", reuse="parent")
    assert more == []  # every call answered from the parent's log
    store = SQLiteRunStore(db)
    reused = list(store.events(rerun, [LLM_CALL]))
    assert reused and all("reused" in e.data for e in reused)
    assert [r.messages for r in requests_of(store, reused)] == seen
    store.delete(parent)  # the rerun refers to the same texts: they stay
    assert [r.messages for r in requests_of(store, store.events(rerun, [LLM_CALL]))] == seen
    store.close()


def test_a_call_event_without_a_store_of_texts_reads_as_missing_text():
    """A store that keeps no texts (a backend of its own): the messages' roles, their texts None."""
    data = {"request": {"kind": "complete"}, "messages": [["user", "k"]], "settings": {"max_tokens": 5}}
    request = request_of(lambda keys: {}, RunEvent("r", LLM_CALL, data))
    assert request.full and request.messages == [{"role": "user", "content": None}]


def test_recording_can_be_turned_off_per_log(tmp_path):
    """RunLog(record_requests=False): calls keep their summary only (as before format 3)."""
    from rolecast.runs.log import RunLog

    store = MemoryRunStore()
    log = RunLog(store, "quiet", record_requests=False)
    log.record_call("R", {"fingerprint": "f", "request": {"kind": "complete"}, "response": {"text": ""}},
                    ([{"role": "user", "content": "hi"}], {}, 10))
    (event,) = store.events("quiet", [LLM_CALL])
    assert "messages" not in event.data and store.texts([text_key("hi")]) == {}
    asyncio.run(asyncio.sleep(0))
