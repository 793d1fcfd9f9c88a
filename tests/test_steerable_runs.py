"""Steerable runs: edit a script and rerun it paying only for what changed (reuse), fork a run at a
round (the past served from the log, the parent untouched), and the lineage shown by the CLI."""

from __future__ import annotations

import io
import zlib
from collections import Counter

import pytest

from actions import Action, UserRequirement
from environment import Team
from rolecast.cli import main
from rolecast.errors import UsageError
from rolecast.observe.console import RunConsole
from rolecast.runs import LLM_CALL, SQLiteRunStore, open_store
from rolecast.runs.lineage import fork_run, lineage_of
from rolecast.testing import FunctionLLM
from roles import Role

REVIEW_PROMPT = {"text": "review"}


class Write(Action):
    async def run(self, history):
        return await self._aask(f"write about: {history[-1].content[-60:]}")


class Check(Action):
    async def run(self, history):
        # the same question twice: a rerun must get the parent's two answers in their order
        first = await self._aask(f"test: {history[-1].content[-60:]}")
        second = await self._aask(f"test: {history[-1].content[-60:]}")
        return f"{first} / {second}"


class Review(Action):
    async def run(self, history):
        return await self._aask(f"{REVIEW_PROMPT['text']}: {history[-1].content[-60:]}")


def model(calls: Counter) -> FunctionLLM:
    """Deterministic: the answer is the prompt's hash and how often that prompt was asked (1, 2 …)."""
    seen: Counter = Counter()

    def answer(messages):
        prompt = messages[-1]["content"]
        calls[prompt.split(":", 1)[0]] += 1
        seen[prompt] += 1
        return f"a{zlib.crc32(prompt.encode()):08x}-{seen[prompt]}"

    return FunctionLLM(answer, model="gpt-4o-mini")


def chain(calls: Counter, store, run_id: str, **kw) -> Team:
    coder = Role(name="Coder", actions=[Write()], watch=[UserRequirement])
    tester = Role(name="Tester", actions=[Check()], watch=[Write])
    reviewer = Role(name="Reviewer", actions=[Review()], watch=[Check])
    return Team(llm=model(calls), roles=[coder, tester, reviewer], store=store, run_id=run_id, **kw)


def said(history) -> list[tuple[str, str]]:
    return [(m.sent_from, m.content) for m in history]


@pytest.fixture(autouse=True)
def _prompt():
    REVIEW_PROMPT["text"] = "review"
    yield
    REVIEW_PROMPT["text"] = "review"


async def test_a_rerun_with_a_changed_reviewer_prompt_pays_only_for_the_reviewer(tmp_path, capsys):
    db = tmp_path / "runs.db"
    first = Counter()
    await chain(first, db, "v1").run(4, idea="a function that adds two numbers")
    assert first == {"write about": 1, "test": 2, "review": 1}

    REVIEW_PROMPT["text"] = "review strictly"
    again = Counter()
    rerun = chain(again, db, "v2", reuse="v1")
    screen = io.StringIO()
    history = await rerun.run(4, idea="a function that adds two numbers", console=RunConsole(screen, rich=False))
    assert "model calls: 1 live, 3 reused (saved $" in screen.getvalue()  # the console's summary
    assert again == {"review strictly": 1}  # no coder or tester call reached the model
    assert (rerun.run_log.reused_calls, rerun.run_log.live_calls) == (3, 1)
    store = SQLiteRunStore(db)
    parent_cost = sum(e.data["cost"] for e in store.events("v1", [LLM_CALL]) if e.role != "Reviewer")
    assert rerun.run_log.saved_cost == pytest.approx(parent_cost) and parent_cost > 0
    assert rerun.cost_manager.total.calls == 1  # only the live call is paid for

    fresh = await chain(Counter(), tmp_path / "fresh.db", "fresh").run(4, idea="a function that adds two numbers")
    assert said(history) == said(fresh)  # the same as a fresh run of the changed script

    assert lineage_of(store, "v2").describe() == "reuses v1"
    assert main(["runs", "show", "v2", "--store", str(db)]) == 0
    shown = capsys.readouterr().out
    assert "reuses the answers of v1" in shown and "3 reused" in shown and "1 live" in shown and "saved $" in shown
    assert main(["runs", "list", "--store", str(db)]) == 0
    assert "reuses v1" in capsys.readouterr().out

    # the rerun resumed under its own id asks nothing again, and reuses nothing twice
    resumed_calls = Counter()
    resumed = chain(resumed_calls, db, "v2", reuse="v1")
    assert said(await resumed.run(4, idea="a function that adds two numbers")) == said(history)
    assert resumed_calls == {} and resumed.run_log.reused_calls == 0
    store.close()


async def test_reuse_refuses_a_run_that_is_not_there_or_a_run_id_with_another_origin(tmp_path):
    db = tmp_path / "runs.db"
    with pytest.raises(UsageError, match="no run 'ghost'"):
        chain(Counter(), db, "x", reuse="ghost").run_log  # noqa: B018
    await chain(Counter(), db, "mine").run(2, idea="x")
    with pytest.raises(UsageError, match="exists already as a run of its own"):
        chain(Counter(), db, "mine", reuse="mine2").run_log  # noqa: B018
    with pytest.raises(UsageError, match="needs both"):
        chain(Counter(), db, "y", fork="mine")
    with pytest.raises(UsageError, match="not both"):
        chain(Counter(), db, "y", fork="mine", at=1, reuse="mine")


def loop_team(calls: Counter, store, run_id: str, **kw) -> Team:
    """A coder and a reviewer answering each other: one call per round, for as many rounds as asked."""
    coder = Role(name="Coder", actions=[Write()], watch=[UserRequirement, Review])
    reviewer = Role(name="Reviewer", actions=[Review()], watch=[Write])
    return Team(llm=model(calls), roles=[coder, reviewer], store=store, run_id=run_id, **kw)


def snapshot(store, run_id):
    return [(e.seq, e.kind, e.round, e.role, e.text) for e in store.events(run_id)]


async def test_a_fork_at_round_2_serves_rounds_1_and_2_from_the_log_and_leaves_the_parent_alone(tmp_path):
    db = tmp_path / "runs.db"
    parent_calls = Counter()
    parent = await loop_team(parent_calls, db, "p").run(5, idea="a parser")
    assert sum(parent_calls.values()) == 5
    store = SQLiteRunStore(db)
    before = snapshot(store, "p")
    parent_rounds = {e.data["message"]["id"]: e.round for e in store.events("p", ["message"])}

    calls = Counter()
    fork = loop_team(calls, db, "p-fork", fork="p", at=2)
    early = await fork.run(2)
    assert sum(calls.values()) == 0  # rounds 1-2 are the parent's, from the log
    assert said(early) == [said(parent)[i] for i, m in enumerate(parent) if parent_rounds[m.id] <= 2]
    assert [m.id for m in early] == [m.id for m in parent][: len(early)]

    rest = loop_team(calls, db, "p-fork", fork="p", at=2)  # the same fork, run on: live from round 3
    full = await rest.run(5)
    assert sum(calls.values()) == 3
    assert said(full) == said(parent)  # (the same deterministic model: the same story)
    assert snapshot(store, "p") == before  # the parent is never written
    assert lineage_of(store, "p-fork").describe() == "fork of p at round 2"
    store.close()


async def test_a_fork_with_a_changed_script_keeps_the_parents_past_and_goes_its_own_way_after(tmp_path, capsys):
    db = tmp_path / "runs.db"
    parent = await loop_team(Counter(), db, "p").run(4, idea="a parser")
    assert main(["runs", "fork", "p", "--at", "2", "--run-id", "f", "--store", str(db)]) == 0
    assert "f" in capsys.readouterr().out
    REVIEW_PROMPT["text"] = "review harshly"  # the reviewer of round 2 asked "review: …"
    calls = Counter()
    forked = await loop_team(calls, db, "f").run(4)  # (a fork made by the CLI resumes by its id)
    assert calls == {"write about": 1, "review harshly": 1}  # rounds 3 and 4 only
    assert said(forked)[:3] == said(parent)[:3] and said(forked)[3:] != said(parent)[3:]
    assert main(["runs", "list", "--store", str(db)]) == 0
    assert "fork of p at round 2" in capsys.readouterr().out


def test_forking_asks_for_a_finished_round_and_a_new_run_id(tmp_path):
    store = open_store(tmp_path / "runs.db")
    with pytest.raises(UsageError, match="no run 'nope'"):
        fork_run(store, "nope", 1)
    loop_team(Counter(), store, "p").run_sync(2, idea="x")
    with pytest.raises(UsageError, match="did not finish round 3"):
        fork_run(store, "p", 3)
    made = fork_run(store, "p", 1, "f1")
    with pytest.raises(UsageError, match="exists already"):
        fork_run(store, "p", 1, "f1")
    assert made == "f1" and fork_run(store, "p", 0) != "p"
