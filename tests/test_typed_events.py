"""Typed events: every kind's payload has a documented type, read through one module; a store of the
format before (1) still reads and resumes; a store of a newer format is refused, never misread."""

from __future__ import annotations

import json
import sqlite3
import typing

import pytest

from actions import Action, UserRequirement
from environment import Team
from rolecast.cli import main
from rolecast.errors import ConfigError
from rolecast.runs import EVENT_KINDS, LLM_CALL, RUN_STARTED, SQLiteRunStore
from rolecast.runs import events as ev
from rolecast.testing import FunctionLLM
from roles import Role


class Say(Action):
    async def run(self, history):
        return await self._aask(f"say: {history[-1].content}")


def pair(calls: list[str], db, run_id: str) -> Team:
    def answer(messages):
        calls.append(messages[-1]["content"])
        return f"re {messages[-1]['content'][-30:]}"

    a = Role(name="A", actions=[Say()], watch=[UserRequirement, Say])
    return Team(llm=FunctionLLM(answer, model="gpt-4o-mini"), roles=[a], store=db, run_id=run_id)


def test_every_kind_has_a_documented_payload_type():
    assert set(ev.PAYLOADS) == set(EVENT_KINDS)
    for kind, cls in ev.PAYLOADS.items():
        assert typing.is_typeddict(cls), kind
        assert kind in ev.__doc__ and cls.__name__ in ev.__doc__  # the module's table names each
    assert set(typing.get_type_hints(ev.LLMCallData)) >= {"fingerprint", "request", "response", "cost", "reused"}


async def test_what_a_run_writes_reads_back_through_the_typed_accessors(tmp_path):
    db = tmp_path / "runs.db"
    await pair([], db, "t").run(2, idea="hello")
    store = SQLiteRunStore(db)
    start = ev.run_started(next(store.events("t", [RUN_STARTED])))
    assert start["format"] == ev.FORMAT_VERSION and start["roles"][0]["class"].endswith("Role")
    call = next(store.events("t", [LLM_CALL]))
    assert ev.llm_call(call)["fingerprint"] and ev.usage(call)["prompt_tokens"] > 0
    for event in store.events("t"):  # every payload has only the fields its type declares
        assert set(ev.payload(event)) <= set(typing.get_type_hints(ev.PAYLOADS[event.kind])), event.kind
    store.close()


async def test_a_store_of_the_format_before_still_reads_and_resumes(tmp_path, capsys):
    db = tmp_path / "old.db"
    calls: list[str] = []
    first = await pair(calls, db, "old").run(3, idea="hello")
    made = len(calls)
    # make it a format-1 file: no lease table, no version, payloads without the format-2 fields
    raw = sqlite3.connect(db)
    raw.execute("DROP TABLE leases")
    for seq, data in raw.execute("SELECT seq, data FROM events WHERE kind = 'run_started'").fetchall():
        stripped = {k: v for k, v in json.loads(data).items() if k != "format"}
        raw.execute("UPDATE events SET data = ? WHERE run_id = 'old' AND seq = ?", (json.dumps(stripped), seq))
    raw.execute("PRAGMA user_version = 0")
    raw.commit()
    raw.close()

    store = SQLiteRunStore(db)
    assert store.format == 1  # read as what it is; new events are written in this version's format
    assert [r.run_id for r in store.runs()] == ["old"]
    store.close()
    assert main(["runs", "show", "old", "--store", str(db)]) == 0
    assert "model gpt-4o-mini for A/Say" in capsys.readouterr().out
    again = await pair(calls, db, "old").run(3, idea="hello")
    assert len(calls) == made and [m.content for m in again] == [m.content for m in first]
    assert sqlite3.connect(db).execute("PRAGMA user_version").fetchone()[0] == ev.FORMAT_VERSION


def test_a_store_of_a_newer_format_is_refused(tmp_path):
    db = tmp_path / "new.db"
    SQLiteRunStore(db).close()
    raw = sqlite3.connect(db)
    raw.execute(f"PRAGMA user_version = {ev.FORMAT_VERSION + 1}")
    raw.commit()
    raw.close()
    with pytest.raises(ConfigError, match="upgrade rolecast"):
        SQLiteRunStore(db)
    with pytest.raises(ValueError):
        ev.upgrade(LLM_CALL, {}, ev.FORMAT_VERSION + 1)
