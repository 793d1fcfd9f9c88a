"""rolecast studio in a real browser: Debian's chromium driven by Playwright's Python wheel
(``executable_path``: no browser download), against a studio the tests start on 127.0.0.1.

Skipped when chromium or playwright is missing (``.ci/run`` installs chromium when it can). Each
page visited is kept as a screenshot under ``tests/artifacts/studio/`` (git-ignored)."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
pytest.importorskip("jinja2")
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (the dev extra)")

import studio_runs  # noqa: E402

CHROMIUM = studio_runs.CHROMIUM
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
ARTIFACTS = Path(__file__).resolve().parent / "artifacts" / "studio"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    path = tmp_path_factory.mktemp("studio-browser") / "runs.db"
    made = {"store": str(path)}
    # (in a thread: Playwright's sync API runs an event loop in this one once a browser is open)
    made["debate"] = studio_runs.in_thread(studio_runs.debate(path, rounds=4))
    made["hostile"] = studio_runs.in_thread(studio_runs.hostile(path))
    made["failed"] = studio_runs.in_thread(studio_runs.failing(path))
    made["chat"], made["chat_seen"] = studio_runs.in_thread(studio_runs.review_chat(path))
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
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    opened = context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda exc: errors.append(str(exc)))
    opened.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    opened.expected_errors = []  # what a test provokes on purpose (a refused form: HTTP 400)
    yield opened
    context.close()
    errors = [e for e in errors if not any(allowed in e for allowed in opened.expected_errors)]
    assert errors == [], f"the page reported errors: {errors}"


def shot(page: Any, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def test_the_runs_list_shows_a_finished_debate(page, served, runs):
    page.goto(served.url + "/")
    row = page.locator(f'tr[data-run="{runs["debate"]}"]')
    sync_api.expect(row).to_be_visible()
    sync_api.expect(row.locator(".badge").first).to_have_text("finished")
    sync_api.expect(row).to_contain_text("Should cities ban cars?")
    sync_api.expect(row.locator(".chip")).to_have_text(["Ada", "Ben"])
    sync_api.expect(page.locator(f'tr[data-run="{runs["failed"]}"] .badge').first).to_have_text("failed")
    shot(page, "runs-list")
    # search narrows the list
    page.fill('input[name="q"]', "HTML")
    page.click('form.filters button[type="submit"]')
    sync_api.expect(page.locator("tr.run-row")).to_have_count(1)
    sync_api.expect(page.locator("tr.run-row")).to_contain_text("Is HTML text?")


def test_a_debate_page_shows_both_debaters_in_order(page, served, runs):
    page.goto(served.url + f"/runs/{runs['debate']}")
    sync_api.expect(page.locator("#run-status")).to_have_text("finished")
    turns = page.locator("article.turn")
    assert [t.strip() for t in turns.locator(".turn-role").all_inner_texts()] == ["user", "Ada", "Ben", "Ada", "Ben"]
    texts = page.locator(".msg-text").all_inner_texts()
    assert texts[1:] == [
        "Ada, turn 1: I argue for the motion, and my opponent is wrong.",
        "Ben, turn 1: I argue against the motion, and my opponent is wrong.",
        "Ada, turn 2: I argue for the motion, and my opponent is wrong.",
        "Ben, turn 2: I argue against the motion, and my opponent is wrong.",
    ]
    # each role has its own colour
    ada, ben = (turns.nth(i).evaluate("el => getComputedStyle(el).borderLeftColor") for i in (1, 2))
    assert ada != ben
    shot(page, "run-debate")


def test_expanding_a_model_call_shows_its_prompt(page, served, runs):
    page.goto(served.url + f"/runs/{runs['debate']}")
    call = page.locator("details.call").first
    prompt = call.locator("pre.prompt", has_text="Suppose you are Ada")
    sync_api.expect(prompt).to_be_hidden()
    call.locator("summary").click()
    sync_api.expect(prompt).to_be_visible()
    sync_api.expect(call.locator("pre.answer")).to_have_text(
        "Ada, turn 1: I argue for the motion, and my opponent is wrong.")
    sync_api.expect(call).to_contain_text("completion")  # tokens, cost, latency, source
    sync_api.expect(call.locator(".src")).to_have_text("live")
    shot(page, "run-call-expanded")
    page.click("#expand-all")
    assert page.locator("details.call[open]").count() == 4
    page.click("#collapse-all")
    assert page.locator("details.call[open]").count() == 0


def test_an_expanded_call_lists_every_message_of_its_request(page, served, runs):
    """A call of several messages: each with its role, in order; the long system prompt folded until
    clicked; markup in a message shown as text; the settings."""
    asked = runs["chat_seen"][-1]
    assert len(asked) >= 5
    page.goto(served.url + f"/runs/{runs['chat']}")
    call = page.locator("details.call").last
    messages = call.locator("li.pmsg")
    sync_api.expect(messages.first).to_be_hidden()
    call.locator("summary").first.click()
    sync_api.expect(messages).to_have_count(len(asked))
    assert [messages.nth(i).get_attribute("data-role") for i in range(len(asked))] == [m["role"] for m in asked]
    for i, message in enumerate(asked):
        if len(message["content"]) <= 600:
            sync_api.expect(messages.nth(i).locator("pre.prompt")).to_have_text(message["content"])
    brief = messages.filter(has_text="You review pull requests.").first
    full = brief.locator("details.pmsg-long pre.prompt")
    sync_api.expect(full).to_be_hidden()  # folded: its start shows
    brief.locator("details.pmsg-long > summary").click()
    sync_api.expect(full).to_have_text(studio_runs.REVIEW_BRIEF)
    sync_api.expect(messages.last.locator("pre.prompt")).to_contain_text("<script>window.__pwned = 1</script>")
    assert page.evaluate("window.__pwned") is None
    sync_api.expect(call.locator("pre.call-settings")).to_contain_text('"max_tokens"')
    shot(page, "run-call-messages")


def test_clicking_the_graph_shows_the_messages_on_an_arrow(page, served, runs):
    page.goto(served.url + f"/runs/{runs['debate']}")
    page.locator('#graph .edge[data-title="Ben → Ada"] .edge-pill').click()
    box = page.locator("#graph-pick")
    sync_api.expect(box).to_be_visible()
    sync_api.expect(page.locator("#graph-pick-title")).to_have_text("Ben → Ada")
    sync_api.expect(box.locator(".msg-text")).to_have_text([
        "Ben, turn 1: I argue against the motion, and my opponent is wrong.",
        "Ben, turn 2: I argue against the motion, and my opponent is wrong.",
    ])
    page.locator('#graph .node[data-title="Ada: messages sent"] circle').click()
    sync_api.expect(box.locator(".msg-text")).to_have_count(2)
    shot(page, "run-graph")
    # one round at a time: round 2 is Ben's only
    page.select_option("#graph-round", "2")
    sync_api.expect(page.locator('#graph .edge[data-title="Ada → Ben"]')).to_be_hidden()
    page.locator('#graph .edge[data-title="Ben → Ada"] .edge-pill').click()
    sync_api.expect(box.locator(".msg-text")).to_have_text(
        ["Ben, turn 1: I argue against the motion, and my opponent is wrong."])
    sync_api.expect(page.locator('#graph .node[data-name="Ben"] .node-count')).to_have_text("1")
    page.select_option("#graph-round", "")
    sync_api.expect(page.locator('#graph .edge[data-title="Ada → Ben"]')).to_be_visible()
    sync_api.expect(page.locator('#graph .node[data-name="Ben"] .node-count')).to_have_text("2")


def test_a_hostile_answer_renders_as_text(page, served, runs):
    page.goto(served.url + f"/runs/{runs['hostile']}")
    page.click("#expand-all")
    sync_api.expect(page.locator(".msg-text").nth(1)).to_have_text(studio_runs.HOSTILE)
    sync_api.expect(page.locator("pre.answer").first).to_have_text(studio_runs.HOSTILE)
    assert page.evaluate("window.__pwned") is None  # neither the script nor the onerror ran
    assert page.locator(".msg-text script, .msg-text img, pre.answer script").count() == 0
    shot(page, "run-hostile")


def test_a_failed_run_is_highlighted(page, served, runs):
    page.goto(served.url + f"/runs/{runs['failed']}")
    failed = page.locator("article.turn-failed")
    sync_api.expect(failed).to_have_count(1)
    sync_api.expect(failed).to_contain_text("the model fell over")
    assert failed.evaluate("el => getComputedStyle(el).borderTopColor") == "rgb(196, 50, 43)"
    shot(page, "run-failed")


def test_compare_two_runs_from_the_list(page, served, runs):
    page.goto(served.url + "/")
    page.check(f'input.pick-run[value="{runs["debate"]}"]')
    page.check(f'input.pick-run[value="{runs["hostile"]}"]')
    page.click("#compare-button")
    page.wait_for_url(re.compile(r"/compare\?a="))
    sync_api.expect(page.locator("#divergence")).to_contain_text("The messages part at round 0")
    sync_api.expect(page.locator("tr.first-diff")).to_have_count(1)
    shot(page, "compare")


def test_a_run_started_in_another_process_appears_and_updates_live(page, served, runs):
    run_id = "live-" + os.urandom(4).hex()
    page.goto(served.url + "/")
    writer = subprocess.Popen(studio_runs.live_command(runs["store"], run_id, rounds=6, delay=0.5),
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        row = page.locator(f'tr[data-run="{run_id}"]')
        sync_api.expect(row).to_be_visible(timeout=15_000)  # the list refreshes itself
        sync_api.expect(row.locator(".badge").first).to_have_text("running")
        row.locator("a").first.click()
        sync_api.expect(page.locator("#run-status")).to_have_text("running")
        assert page.locator("#timeline").get_attribute("data-live") == "yes"
        shot(page, "run-live-running")
        before = page.locator(".msg-text").count()
        # new turns arrive without a reload, and the badge turns to finished when the run ends
        sync_api.expect(page.locator(".msg-text")).not_to_have_count(before, timeout=10_000)
        sync_api.expect(page.locator("#run-status")).to_have_text("finished", timeout=30_000)
        sync_api.expect(page.locator("#live-note")).to_have_text("The run finished.")
        # the facts and the side panels follow: both debaters in the totals and the graph, six rounds
        sync_api.expect(page.locator("table.totals tbody tr")).to_have_count(3)
        sync_api.expect(page.locator('#graph .edge[data-title="Ben → Ada"]')).to_have_count(1)
        sync_api.expect(page.locator("#fork-round")).to_have_value("6")
        texts = page.locator(".msg-text").all_inner_texts()
        assert texts[-1] == "Ben, turn 3: I argue against the motion, and my opponent is wrong."
        assert texts == [t for t in texts if t]  # nothing duplicated or empty
        assert len(texts) == len(set(texts)) == 7
        shot(page, "run-live-finished")
    finally:
        writer.kill()
        writer.wait(10)


def test_approving_a_pending_approval_lets_the_rerun_finish(page, served, runs):
    run_id = "approve-" + os.urandom(4).hex()
    status, _ = studio_runs.in_thread(studio_runs.needs_approval(runs["store"], run_id))
    assert status == "waiting"
    page.goto(served.url + f"/runs/{run_id}")
    sync_api.expect(page.locator("#run-status")).to_have_text("waiting for approval")
    approval = page.locator('.approval[data-approval="Calc-1"]')
    sync_api.expect(approval).to_contain_text("calculator")
    sync_api.expect(approval.locator("pre.prompt").first).to_contain_text('"expression": "6 * 7"')
    shot(page, "run-waiting-for-approval")
    approval.locator('button[value="approve"]').click()
    sync_api.expect(page.locator("#decided-note")).to_contain_text("Answered approval Calc-1")
    sync_api.expect(page.locator("#run-status")).to_have_text("paused")
    sync_api.expect(page.locator(".approval")).to_have_count(0)
    # the command the page shows: the script again, under the run's id; it finishes as approved
    sync_api.expect(page.locator("#continue-command")).to_contain_text(f"Team(run_id='{run_id}')")
    status, said = studio_runs.in_thread(studio_runs.needs_approval(runs["store"], run_id))
    assert status == "finished" and said[-1] == "The answer is 42."
    page.reload()
    sync_api.expect(page.locator("#run-status")).to_have_text("finished")
    sync_api.expect(page.locator(".msg-text").last).to_have_text("The answer is 42.")
    shot(page, "run-approved-and-finished")


def test_editing_a_pending_approval_is_validated_on_the_page(page, served, runs):
    run_id = "edit-" + os.urandom(4).hex()
    studio_runs.in_thread(studio_runs.needs_approval(runs["store"], run_id))
    page.goto(served.url + f"/runs/{run_id}")
    approval = page.locator('.approval[data-approval="Calc-1"]')
    page.expected_errors.append("status of 400")
    approval.locator('textarea[name="arguments"]').fill('{"expression": 42}')
    approval.locator('button[value="edit"]').click()
    sync_api.expect(page.locator(".error-text")).to_contain_text("expected string, got int")
    page.go_back()
    page.reload()
    approval = page.locator('.approval[data-approval="Calc-1"]')
    approval.locator('textarea[name="arguments"]').fill('{"expression": "6 * 9"}')
    approval.locator('button[value="edit"]').click()
    sync_api.expect(page.locator("#run-status")).to_have_text("paused")
    status, said = studio_runs.in_thread(studio_runs.needs_approval(runs["store"], run_id))
    assert status == "finished" and said[-1] == "The answer is 54."


def test_forking_from_the_page(page, served, runs):
    page.goto(served.url + f"/runs/{runs['debate']}")
    page.fill("#fork-round", "2")
    page.click('#fork-form button[type="submit"]')
    page.wait_for_url(re.compile(r"/runs/(?!" + re.escape(runs["debate"]) + ")"))
    sync_api.expect(page.locator(".facts")).to_contain_text(f"fork at round 2 of {runs['debate']}")
    sync_api.expect(page.locator(".src")).to_have_text(["replayed", "replayed"])
    shot(page, "run-fork")
