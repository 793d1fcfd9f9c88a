"""The studio shows what fitting a long run to the model's window left out (issue 34): at the call it
fitted, each prompt says "N earlier messages left out (X of Y tokens)", and a compaction's summary call is
marked as a summary. A real team on a scripted model with a 900-token window writes the run; the studio
the tests start on 127.0.0.1 serves it; chromium checks what a person sees (skipped where missing)."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
pytest.importorskip("jinja2")

import studio_runs
from studio_runs import get

from actions import Action, UserRequirement
from environment import Team
from memory import Message
from rolecast.runs import LLM_CALL, SQLiteRunStore
from rolecast.runs.events import HISTORY_FITTED
from rolecast.studio import shape
from rolecast.testing import FunctionLLM
from roles import Role
from roles.fitting import COMPACTED, Compaction

CHROMIUM = studio_runs.CHROMIUM


class Argue(Action):
    name: str = "Argue"

    async def run(self, history: list[Message]) -> str:
        lines = "\n".join(str(m) for m in history)
        return await self._aask(f"Debate so far:\n{lines}\nArgue your side in one paragraph.")


class Rebut(Argue):
    name: str = "Rebut"


def debate_model() -> FunctionLLM:
    calls = [0]

    def answer(messages: list[dict[str, Any]], call: Any) -> str:
        calls[0] += 1
        if call.kind == "choose":
            return str(calls[0] % 2)
        if messages[-1]["content"].startswith("Summarise the conversation"):
            return f"SUMMARY {calls[0]}: both sides argued about cars in the centre."
        return f"Point {calls[0]}: " + "cars crowd the streets and the air, so the centre should be free. " * 3

    return FunctionLLM(answer, context_window=900)


async def long_debate(store: Path, run_id: str, compaction: Compaction | None) -> str:
    roles = [Role(name=name, profile="Debater", goal="win the debate", actions=[Argue(), Rebut()],
                  watch=[UserRequirement, Argue, Rebut], react_mode="react") for name in ("Ada", "Ben")]
    team = Team(llm=debate_model(), roles=roles, store=str(store), run_id=run_id, compaction=compaction)
    await team.run(n_round=8, idea="Ban cars from city centres?")
    return team.run_id


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    path = tmp_path_factory.mktemp("studio-long") / "runs.db"
    return {"store": str(path),
            "fitted": studio_runs.in_thread(long_debate(path, "fitted", None)),
            "compacted": studio_runs.in_thread(long_debate(path, "compacted", Compaction(share=0.5, keep=3)))}


@pytest.fixture(scope="module")
def served(runs: dict[str, str]) -> Iterator[studio_runs.Served]:
    server = studio_runs.serve(runs["store"])
    yield server
    server.stop()


def logged(runs: dict[str, str], run_id: str, kind: str) -> list[Any]:
    store = SQLiteRunStore(runs["store"])
    try:
        return list(store.events(run_id, [kind]))
    finally:
        store.close()


def fitted_marks(page: str) -> dict[int, str]:
    """The page's fitted-prompt marks by the seq of their event, as text."""
    found = re.findall(r'<div class="fitted" data-seq="(\d+)"[^>]*>(.*?)</div>', page, re.S)
    return {int(seq): html.unescape(text).strip() for seq, text in found}


def test_each_fitted_prompt_says_at_its_turn_how_many_messages_and_tokens_were_left_out(served, runs):
    events = logged(runs, "fitted", HISTORY_FITTED)
    assert events  # the 900-token window made the history outgrow it
    page = get(served, "/runs/fitted").body
    marks = fitted_marks(page)
    assert sorted(marks) == [e.seq for e in events]
    for e in events:
        d = e.data
        assert d["omitted"] > 0 and 0 < d["omitted_tokens"] < d["history_tokens"]
        assert (f"{d['omitted']} earlier message{'s' if d['omitted'] != 1 else ''} left out "
                f"({d['omitted_tokens']:,} of {d['history_tokens']:,} tokens)") in marks[e.seq]
        assert f"{d['kept']} kept to fit the 900-token window" in marks[e.seq]
        # at its call: in the turn of its role, right before the model call it fitted
        turn = page[:page.index(f'data-seq="{e.seq}"')].rsplit('<article class="turn', 1)[1]
        assert f'data-role="{e.role}"' in turn
        after = page[page.index(f'data-seq="{e.seq}"'):]
        assert after.index('class="call') < after.index("</article>")
    assert "history_fitted: {" not in page  # not the raw event


def test_a_compaction_summary_call_is_marked_as_a_summary(served, runs):
    calls = logged(runs, "compacted", LLM_CALL)
    summaries = [c for c in calls if c.data.get("action") == COMPACTED]
    assert summaries and all(c.data["response"]["text"].startswith("SUMMARY") for c in summaries)
    page = get(served, "/runs/compacted").body
    marked = re.findall(r'<details class="call ?[^"]*call-summary" data-seq="(\d+)"', page)
    assert sorted(map(int, marked)) == [c.seq for c in summaries]
    assert page.count('<span class="badge-summary">summary</span>') == len(summaries)
    assert page.count("summary of earlier messages (compaction)") == len(summaries)
    # the other calls are not marked
    others = "|".join(str(c.seq) for c in calls if c not in summaries)
    assert not re.search(f'call-summary" data-seq="({others})"', page)


def test_the_note_reads_well_for_each_prompt_and_an_older_event():
    assert shape.fitted_note({"purpose": "state", "kept": 4, "omitted": 12, "window": 1024, "omitted_tokens": 3410,
                              "history_tokens": 4020}) == \
        "the state prompt: 12 earlier messages left out (3,410 of 4,020 tokens), 4 kept to fit the 1,024-token window"
    assert shape.fitted_note({"purpose": "action Rebut", "kept": 2, "omitted": 1, "window": 900}) == \
        "Rebut's history: 1 earlier message left out, 2 kept to fit the 900-token window"
    assert shape.fitted_note({"purpose": "compaction", "omitted": "x"}).startswith(
        "the summary's prompt: 0 earlier messages left out")


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_in_chromium_the_left_out_note_and_the_summary_badge_are_visible(served, runs):
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (the dev extra)")
    with studio_runs.chromium(sync_api) as browser:
        page = browser.new_context(viewport={"width": 1280, "height": 800}).new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(served.url + "/runs/compacted")
        note = page.locator(".turn .fitted").first
        sync_api.expect(note).to_be_visible()
        sync_api.expect(note).to_contain_text(re.compile(r"earlier messages? left out \([\d,]+ of [\d,]+ tokens\)"))
        call = page.locator("details.call-summary").first
        head = call.locator(":scope > summary")
        sync_api.expect(head).to_contain_text("summary of earlier messages (compaction)")
        head.click()
        sync_api.expect(call).to_contain_text("Summary (kept in the role's memory")
        sync_api.expect(call.locator("pre.answer")).to_contain_text("SUMMARY")
        colours = note.evaluate("el => [getComputedStyle(el).backgroundColor, "
                                "getComputedStyle(el).borderLeftWidth]")
        assert colours[0] not in ("rgba(0, 0, 0, 0)", "transparent") and colours[1] != "0px"
        assert errors == []
