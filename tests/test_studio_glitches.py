"""The studio's glitches a newcomer saw in chromium (issue 31), each checked in chromium as they saw it:
a studio the tests start on 127.0.0.1, Debian's chromium driven by Playwright (skipped where either is
missing, as tests/test_studio_browser.py is)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
pytest.importorskip("jinja2")
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (the dev extra)")

import studio_runs  # noqa: E402

from rolecast.runs import LLM_CALL, MESSAGE, RUN_STARTED, RUN_STOPPED, RunEvent, SQLiteRunStore  # noqa: E402
from rolecast.studio.source import RunSource  # noqa: E402

CHROMIUM = studio_runs.CHROMIUM
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")

CODE = "Run this:\n```python\nprint('<b>hi</b>')\n```\nand tell me."
COMMAND = {"argv": ["examples/debate.py", "--rounds", "3"], "cwd": "/home/ann/project"}


def _written_run(store: Path) -> str:
    """A run whose script recorded its command, with a state-choice call and fenced code in a message."""
    db = SQLiteRunStore(store)
    now = time.time()
    try:
        db.extend([
            RunEvent("chooser", RUN_STARTED, {"team": "T", "idea": "code please", "roles": [{"name": "Ann"}],
                                              "command": COMMAND}, 0, "", ts=now),
            RunEvent("chooser", LLM_CALL, {
                "action": "", "model": "", "fingerprint": "0" * 32,
                "request": {"kind": "choose", "n_messages": 1, "system": "", "last": "Pick 0 or 1."},
                "response": {"text": "0", "usage": {"prompt_tokens": 12, "completion_tokens": 1}},
                "cost": 0.0, "latency": 0.1}, 1, "Ann", ts=now + 1),
            RunEvent("chooser", MESSAGE, {"message": {
                "id": "m1", "content": CODE, "role": "Ann", "cause_by": "x.Write", "sent_from": "Ann",
                "send_to": ["<all>"], "metadata": {}}}, 1, "Ann", ts=now + 2),
            RunEvent("chooser", RUN_STOPPED, {"reason": "n_round", "rounds": 1}, 1, "", ts=now + 3),
        ])
    finally:
        db.close()
    return "chooser"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    path = tmp_path_factory.mktemp("studio-glitches") / "runs.db"
    made = {"store": str(path)}
    made["debate"] = studio_runs.in_thread(studio_runs.debate(path, rounds=4))
    made["waiting"] = studio_runs.in_thread(studio_runs.needs_approval(path, "approve-me")) and "approve-me"
    made["written"] = _written_run(path)
    source = RunSource(path)
    try:
        made["fork"] = source.fork(made["debate"], 1)
    finally:
        source.close()
    return made


@pytest.fixture(scope="module")
def served(runs: dict[str, str]) -> Iterator[studio_runs.Served]:
    server = studio_runs.serve(runs["store"])
    yield server
    server.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with studio_runs.chromium(sync_api) as launched:
        yield launched


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A laptop's window: 1280 x 800."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    opened = context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda exc: errors.append(str(exc)))
    yield opened
    context.close()
    assert errors == [], f"the page reported errors: {errors}"


def test_the_paused_mark_is_drawn_not_a_missing_glyph(page, served, runs):
    """⏸ (U+23F8) is in none of the fonts a fresh Debian has: chromium drew an empty box."""
    page.goto(served.url + f"/runs/{runs['waiting']}")
    mark = page.locator(".pause", has_text="paused").first
    sync_api.expect(mark).to_be_visible()
    assert "\u23f8" not in mark.inner_text()
    icon = mark.locator(".icon-pause")
    box = icon.bounding_box()
    assert box is not None and box["width"] > 4 and box["height"] > 4
    bars = icon.evaluate("el => [getComputedStyle(el).borderLeftWidth, getComputedStyle(el).borderRightWidth]")
    assert all(float(w.removesuffix("px")) > 0 for w in bars)


def test_the_approval_buttons_are_on_a_1280x800_first_screen(page, served, runs):
    page.goto(served.url + f"/runs/{runs['waiting']}")
    for name in ("approve", "reject", "edit"):
        box = page.locator(f'button[value="{name}"]').bounding_box()
        assert box is not None and box["y"] + box["height"] <= 800, f"{name}: {box}"


def test_a_forks_timeline_says_where_it_came_from_in_words(page, served, runs):
    page.goto(served.url + f"/runs/{runs['fork']}")
    timeline = page.locator("#timeline")
    sync_api.expect(timeline).to_contain_text(f"forked from run {runs['debate']} at the end of round 1")
    assert "lineage: {" not in timeline.inner_text()
    link = timeline.locator(".mark-lineage a")
    assert link.get_attribute("href") == f"/runs/{runs['debate']}"


def test_a_state_choice_call_is_labelled_with_what_it_chose(page, served, runs):
    page.goto(served.url + f"/runs/{runs['written']}")
    summary = page.locator("details.call summary").first
    sync_api.expect(summary).to_contain_text("model call · choose the next action")
    assert "· ·" not in summary.inner_text()


def test_fenced_code_in_a_message_is_monospace_without_its_fences(page, served, runs):
    page.goto(served.url + f"/runs/{runs['written']}")
    message = page.locator(".msg-text", has_text="Run this:")
    code = message.locator("pre.code code")
    sync_api.expect(code).to_have_text("print('<b>hi</b>')")  # markup in code is text
    assert "```" not in message.inner_text()
    font = code.evaluate("el => getComputedStyle(el).fontFamily")
    assert "mono" in font.lower(), font
    assert message.locator("b").count() == 0


def test_continue_this_run_shows_the_command_the_run_recorded(page, served, runs):
    page.goto(served.url + f"/runs/{runs['written']}")
    command = page.locator("#continue-command").inner_text()
    assert "your_script.py" not in command
    assert "cd /home/ann/project && " in command and "python examples/debate.py --rounds 3" in command


def test_the_compare_picker_starts_with_two_different_runs(page, served, runs):
    page.goto(served.url + "/compare")
    left = page.locator('select[name="a"]').input_value()
    right = page.locator('select[name="b"]').input_value()
    assert left != right
    page.goto(served.url + f"/compare?b={runs['fork']}")  # a fork: its parent on the left
    assert page.locator('select[name="a"]').input_value() == runs["debate"]
