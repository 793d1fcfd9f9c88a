"""Make ``docs/studio.png``, the README's picture of the studio, again: ``python docs/screenshot.py``.

A scripted team of four (spec → code → tests → review) runs on a double that stands in for
gpt-4o-mini (priced, instant), into a store in a temporary folder; the studio serves it on
127.0.0.1, and Chromium (Playwright with ``executable_path``: no browser download) takes a
1280 × 800 picture of the run page with the first model call open. Needs the studio extra,
the ``playwright`` wheel and a chromium (``apt-get install chromium``, or ``$ROLECAST_CHROMIUM``).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from playwright.sync_api import sync_playwright  # noqa: E402
from studio_runs import serve  # noqa: E402

from actions import Action, UserRequirement  # noqa: E402
from environment import Team  # noqa: E402
from memory import Message  # noqa: E402
from rolecast.testing import FunctionLLM  # noqa: E402
from roles import Role  # noqa: E402

ANSWERS = {
    "WriteSpec": "Count the words of every .txt file in a folder; print one line per file and a total.",
    "WriteCode": "def count_words(folder):\n"
                 "    return {p.name: len(p.read_text().split()) for p in folder.glob('*.txt')}",
    "WriteTests": "def test_counts(tmp_path):\n    (tmp_path / 'a.txt').write_text('one two')\n"
                  "    assert count_words(tmp_path) == {'a.txt': 2}",
    "WriteReview": "The code skips empty folders cleanly; add a test for a file that is not UTF-8.",
}


class Step(Action):
    """One role's step: the idea and what the role before it wrote, then its own instruction."""

    async def run(self, history: list[Message]) -> str:  # type: ignore[override]
        last = history[-1].content if history else ""
        return await self._aask(f"{self.desc}:\n{last}")


def answer(messages: list[dict[str, Any]]) -> str:
    wanted = messages[-1]["content"].split(":", 1)[0]
    return next(text for name, text in ANSWERS.items() if name.lower()[5:] in wanted.lower())


async def make_run(store: Path) -> str:
    team = Team(llm=FunctionLLM(answer, model="gpt-4o-mini", delay=0.35), store=str(store), run_id="wordcount")
    chain = [("Alice", "Product manager", "WriteSpec", "Write a one-paragraph spec", UserRequirement),
             ("Bob", "Engineer", "WriteCode", "Write the code", "WriteSpec"),
             ("Carol", "Tester", "WriteTests", "Write the tests", "WriteCode"),
             ("Dan", "Reviewer", "WriteReview", "Review the tests", "WriteTests")]
    roles = []
    for name, profile, action, desc, after in chain:
        watch = [after] if isinstance(after, type) else [f"__main__.{after}"]
        step = type(action, (Step,), {"__module__": "__main__"})(name=action, desc=desc)
        roles.append(Role(name=name, profile=profile, actions=[step], watch=watch))
    team.hire(roles)
    team.run_project("A word counter for a folder of text files")
    await team.run(n_round=5)
    return team.run_id


def main() -> None:
    chromium = os.environ.get("ROLECAST_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        sys.exit("no chromium: apt-get install chromium, or set ROLECAST_CHROMIUM")
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "runs.db"
        run_id = asyncio.run(make_run(store))
        served = serve(store)
        try:
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
                page = browser.new_page(viewport={"width": 1280, "height": 800})
                page.goto(f"{served.url}/runs/{run_id}")
                page.locator("details.call > summary").first.click()
                page.screenshot(path=str(ROOT / "docs" / "studio.png"))
                browser.close()
        finally:
            served.stop()
    print(f"wrote {ROOT / 'docs' / 'studio.png'}")


if __name__ == "__main__":
    main()
