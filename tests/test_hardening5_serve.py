"""Hardening 5 (issue 43), the serve part: each test is named after the hostile input that broke it."""

from __future__ import annotations

import httpx
import pytest

pytest.importorskip("a2a")

import serve_teams
from serve_support import served

from rolecast.errors import UsageError
from rolecast.runs import open_store
from rolecast.serve import create_app
from rolecast.serve import runner as runner_module
from rolecast.serve.runner import TeamRunner, team_factory


@pytest.mark.parametrize("last_event_id", ["99999999999999999999999999", "-99999999999999999999999999"])
async def test_a_huge_or_negative_last_event_id_is_a_400_or_from_the_start_never_a_cut_stream(tmp_path, last_event_id):
    with served(create_app(serve_teams.pair, store=tmp_path / "runs.db")) as url:
        async with httpx.AsyncClient(base_url=url, timeout=60) as http:
            run_id = (await http.post("/api/runs", json={"idea": "a riddle", "rounds": 1})).json()["run_id"]
            answer = await http.get(f"/api/runs/{run_id}/stream", headers={"Last-Event-ID": last_event_id})
            if last_event_id.startswith("-"):  # below 0 is 0, as the studio reads it: the whole stream
                assert answer.status_code == 200 and "event: end" in answer.text and "id: 1\n" in answer.text
            else:  # OverflowError mid-stream before
                assert answer.status_code == 400 and "Last-Event-ID" in answer.json()["message"]


async def _settle(runner, *served):
    for one in served:
        await runner.settled(one)


async def test_two_clients_sending_the_same_message_id_get_their_own_tasks(tmp_path):
    with open_store(tmp_path / "runs.db") as store:
        runner = TeamRunner(team_factory(serve_teams.pair), store)
        try:
            a = runner.start("client A's private idea", 1, message_id="m-1")
            b = runner.start("client B's idea", 1, message_id="m-1")  # was handed A's task
            assert b.run_id != a.run_id and b.idea == "client B's idea"
            again = runner.start("client A's private idea", 1, message_id="m-1")  # A retrying: its own task
            assert again.run_id == a.run_id
            await _settle(runner, a, b)
        finally:
            await runner.close()


async def test_a_one_megabyte_idea_is_refused_and_settled_tasks_are_let_go_of(tmp_path, monkeypatch):
    monkeypatch.setattr(runner_module, "KEEP_SETTLED", 2)
    with open_store(tmp_path / "runs.db") as store:
        runner = TeamRunner(team_factory(serve_teams.pair), store)
        try:
            with pytest.raises(UsageError, match="at most 65,536"):
                runner.start("x" * 2**20, 1)
            tasks = [runner.start(f"riddle {i}", 1) for i in range(5)]
            await _settle(runner, *tasks)
            assert len(runner.served) == 2  # kept all five before
            first = runner.find(tasks[0].run_id)  # let go of, found again in the store
            assert first is not None and first.idea == "riddle 0" and first.outcome == "finished"
        finally:
            await runner.close()
