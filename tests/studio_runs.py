"""Runs for the studio's tests, made by real teams on scripted models (rolecast.testing), plus a
studio server started on 127.0.0.1 in a thread (a real uvicorn) and a tiny HTTP client.

A plain module the studio tests import (``import studio_runs``); run as a script it fills a store
and serves the studio on it, for a person to look at::

    python tests/studio_runs.py /tmp/demo.db
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import os
import shutil
import socket
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from actions import Action, UserRequirement, calculator
from environment import Team
from memory import Message
from rolecast.control.approval import Approval
from rolecast.errors import RunError
from rolecast.llm.base import Completion, ToolCall
from rolecast.runs import (
    LLM_CALL,
    MESSAGE,
    ROUND_FINISHED,
    ROUND_STARTED,
    RUN_STARTED,
    RUN_STOPPED,
    RunEvent,
    SQLiteRunStore,
)
from rolecast.testing import FunctionLLM, ScriptedLLM
from roles import Role, ToolAgent

HOSTILE = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'


class Speak(Action):
    name: str = "Speak"

    async def run(self, context: str, name: str, opponent: str) -> str:
        return await self._aask(f"Suppose you are {name}, in a debate with {opponent}.\n"
                                f"Previous rounds:\n{context}\nYour turn, {name}:")


class Debater(Role):
    """examples/debate.py's debater, small: answers what its opponent says to it."""

    name: str = ""
    profile: str = ""
    opponent: str = ""

    def __init__(self, **data: Any):
        super().__init__(**data)
        self.set_actions([Speak])
        self._watch([UserRequirement, Speak])

    async def _observe(self) -> int:
        await super()._observe()
        self.rc.news = [m for m in self.rc.news if m.send_to == {self.name}]
        return len(self.rc.news)

    async def _act(self) -> Message:
        context = "\n".join(f"{m.sent_from}: {m.content}" for m in self.get_memories())
        text = await self.rc.todo.run(context=context, name=self.name, opponent=self.opponent)
        msg = Message(content=text, role=self.profile, sent_from=self.name, cause_by=Speak, send_to=self.opponent)
        self.rc.memory.add(msg)
        return msg


#: the chromium the browser tests drive (Playwright cannot download its own browsers here):
#: $ROLECAST_CHROMIUM, else chromium on the PATH; None where there is none (those tests skip)
CHROMIUM = next((p for p in (os.environ.get("ROLECAST_CHROMIUM"), shutil.which("chromium"),
                             shutil.which("chromium-browser")) if p), None)


@contextlib.contextmanager
def chromium(sync_api: Any) -> Iterator[Any]:
    """A headless :data:`CHROMIUM` driven by Playwright's sync API (``sync_api``), closed after."""
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield browser
        finally:
            browser.close()


def in_thread(coro: Any) -> Any:
    """``asyncio.run(coro)`` in a thread of its own (where this thread runs a loop already: Playwright's)."""
    found: dict[str, Any] = {}

    def main() -> None:
        try:
            found["value"] = asyncio.run(coro)
        except BaseException as exc:
            found["error"] = exc

    thread = threading.Thread(target=main)
    thread.start()
    thread.join()
    if "error" in found:
        raise found["error"]
    return found["value"]


def debate_model(delay: float = 0.0) -> FunctionLLM:
    turns = {"Ada": 0, "Ben": 0}

    def answer(messages: list[dict[str, Any]]) -> str:
        speaker = "Ada" if "Suppose you are Ada" in messages[-1]["content"] else "Ben"
        turns[speaker] += 1
        side = "for" if speaker == "Ada" else "against"
        return f"{speaker}, turn {turns[speaker]}: I argue {side} the motion, and my opponent is wrong."

    return FunctionLLM(answer, delay=delay)


def debate_team(store: str | Path, llm: Any, run_id: str | None = None) -> Team:
    team = Team(llm=llm, store=str(store), run_id=run_id)
    team.hire([Debater(name="Ada", profile="Optimist", opponent="Ben"),
               Debater(name="Ben", profile="Skeptic", opponent="Ada")])
    return team


async def debate(store: str | Path, *, rounds: int = 4, topic: str = "Should cities ban cars?",
                 llm: Any = None, run_id: str | None = None) -> str:
    """A finished debate of ``rounds`` rounds (Ada first); its run id."""
    team = debate_team(store, llm or debate_model(), run_id)
    team.run_project(topic, send_to="Ada")
    await team.run(n_round=rounds)
    return team.run_id


#: the review chat's system prompt: long (the studio folds it), the same in every call
REVIEW_BRIEF = "You review pull requests. " + "Cite the line, say why, propose the fix. " * 30


class Review(Action):
    """A model call of several messages: the brief, the conversation so far, a question with markup."""

    name: str = "Review"

    async def run(self, history: list[Message]) -> str:
        messages: list[dict[str, Any]] = [{"role": "system", "content": REVIEW_BRIEF}]
        for m in history:
            messages.append({"role": "assistant" if m.cause_by.endswith("Review") else "user", "content": m.content})
        messages.append({"role": "user", "content": f"Round {len(history)}: what next? {HOSTILE}"})
        return await self._aask(messages)


async def review_chat(store: str | Path, rounds: int = 3) -> tuple[str, list[list[dict[str, Any]]]]:
    """Two reviewers answering each other, each call a chat of several messages; the run id and every
    call's messages as the model received them, in order."""
    seen: list[list[dict[str, Any]]] = []

    def answer(messages: list[dict[str, Any]]) -> str:
        seen.append([dict(m) for m in messages])
        return f"Reviewer note {len(seen)}: line {len(seen) * 7} needs a test."

    team = Team(llm=FunctionLLM(answer), store=str(store))
    team.hire([Role(name="Ann", actions=[Review()], watch=[UserRequirement, Review]),
               Role(name="Bob", actions=[Review()], watch=[Review])])
    team.run_project("Please review PR 42.")
    await team.run(n_round=rounds)
    return team.run_id, seen


async def hostile(store: str | Path) -> str:
    """A debate whose model answers with markup that would run if a page did not escape it."""
    return await debate(store, rounds=2, topic="Is HTML text?",
                        llm=ScriptedLLM([HOSTILE, f"Ben quotes: {HOSTILE}"]))


async def failing(store: str | Path) -> str:
    """A debate whose second call fails: the run stops with an error."""
    team = debate_team(store, ScriptedLLM(["Ada opens.", RuntimeError("the model fell over")]))
    team.run_project("Does it fail?", send_to="Ada")
    try:
        await team.run(n_round=3)
    except (RunError, RuntimeError):
        pass
    return team.run_id


def calculator_model() -> FunctionLLM:
    """Asks the calculator for 6 * 7, then answers with what the tool said."""

    def answer(messages: list[dict[str, Any]]) -> Completion:
        if any(m.get("role") == "tool" for m in messages):
            return Completion(text=f"The answer is {messages[-1]['content']}.")
        return Completion(text="", tool_calls=[ToolCall("c1", "calculator", '{"expression": "6 * 7"}')])

    return FunctionLLM(answer)


async def needs_approval(store: str | Path, run_id: str) -> tuple[str, list[str]]:
    """A tool agent whose calculator call waits for a person's approval (deferred: the run pauses and
    this returns); run it again under the same id once the approval is answered, and it goes on.
    The history's status and its messages."""
    agent = ToolAgent(name="Calc", tools=[calculator], style="function_calling")
    team = Team(llm=calculator_model(), roles=[agent], store=str(store), run_id=run_id)
    Approval.deferred().install(team.context.hooks)
    history = await team.run(n_round=2, idea="What is 6 * 7?")
    return history.status, [m.content for m in history]


def big_run(store: str | Path, events: int = 10_000, run_id: str = "big-10k") -> str:
    """A run of ``events`` events written straight into the store (a debate of many rounds: per round its
    start, a model call with a prompt of a few kilobytes, a message, its end)."""
    db = SQLiteRunStore(store)
    try:
        now = time.time() - 3600
        batch = [RunEvent(run_id, RUN_STARTED, {"team": "Team", "idea": "a long debate", "roles": [
            {"name": "Ada", "profile": "Optimist"}, {"name": "Ben", "profile": "Skeptic"}]}, 0, "", ts=now)]
        rnd = 0
        while len(batch) < events - 1:
            rnd += 1
            speaker, other = ("Ada", "Ben") if rnd % 2 else ("Ben", "Ada")
            text = f"{speaker}, turn {rnd}: " + "a point made at length. " * 20
            batch += [
                RunEvent(run_id, ROUND_STARTED, {"roles": [speaker]}, rnd, "", ts=now + rnd),
                RunEvent(run_id, LLM_CALL, {
                    "action": "Speak", "model": "scripted", "fingerprint": f"{rnd:032x}",
                    "request": {"kind": "complete", "n_messages": 2, "system": f"You are {speaker}.",
                                "last": "Previous rounds: " + "earlier words. " * 130},
                    "response": {"text": text, "model": "scripted", "finish_reason": None, "tool_calls": [],
                                 "usage": {"prompt_tokens": 500, "completion_tokens": 120, "estimated": True}},
                    "cost": 0.0001, "latency": 0.4}, rnd, speaker, ts=now + rnd + 0.4),
                RunEvent(run_id, MESSAGE, {"message": {
                    "id": f"m{rnd}", "content": text, "role": speaker, "cause_by": "studio_runs.Speak",
                    "sent_from": speaker, "send_to": [other], "metadata": {}}}, rnd, speaker, ts=now + rnd + 0.5),
                RunEvent(run_id, ROUND_FINISHED, {"messages": 1, "turns": {speaker: f"m{rnd}"}}, rnd, "",
                         ts=now + rnd + 0.6),
            ]
        batch = batch[: events - 1]
        batch.append(RunEvent(run_id, RUN_STOPPED, {"reason": "n_round", "rounds": rnd, "cost": 0.0, "calls": 0},
                              rnd, "", ts=now + rnd + 1))
        db.extend(batch)
    finally:
        db.close()
    return run_id


LIVE_SCRIPT = """
import asyncio, sys
sys.path[:0] = {paths!r}
import studio_runs
asyncio.run(studio_runs.debate({store!r}, rounds={rounds}, run_id={run_id!r},
                               llm=studio_runs.debate_model(delay={delay})))
"""


def live_command(store: str | Path, run_id: str, *, rounds: int = 8, delay: float = 0.6) -> list[str]:
    """``python -c ...``: a debate run in another process, one model call every ``delay`` seconds."""
    here = Path(__file__).resolve().parent
    script = LIVE_SCRIPT.format(paths=[str(here), str(here.parent)], store=str(store), rounds=rounds,
                                run_id=run_id, delay=delay)
    return [sys.executable, "-c", script]


# ---------------------------------------------------------------------------------------- server
@dataclass
class Served:
    url: str
    host: str
    port: int
    csrf: str
    token: str | None
    thread: threading.Thread
    loop: asyncio.AbstractEventLoop
    task: asyncio.Future[None]

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.task.cancel)
        self.thread.join(10)


def serve(store: str | Path, *, host: str = "127.0.0.1", token: str | None = None, read_csrf: bool = True) -> Served:
    """The studio on ``store``, served by uvicorn on a free port of ``host`` in a thread; stop() ends it.
    ``read_csrf``: read the runs page once for its CSRF token (``served.csrf``)."""
    from rolecast.studio.server import serve as serve_studio
    from rolecast.studio.source import RunSource

    ready = threading.Event()
    found: dict[str, Any] = {}

    def main() -> None:
        loop = asyncio.new_event_loop()
        found["loop"] = loop
        source = RunSource(store)

        def on_ready(url: str) -> None:
            found["url"] = url
            ready.set()

        task = loop.create_task(serve_studio(source, host=host, port=0, token=token, on_ready=on_ready))
        found["task"] = task
        try:
            loop.run_until_complete(task)
        except (asyncio.CancelledError, Exception) as exc:  # the test stopped it (or it failed: say so)
            found.setdefault("error", exc)
            ready.set()
        finally:
            source.close()
            loop.close()

    thread = threading.Thread(target=main, daemon=True)
    thread.start()
    if not ready.wait(15) or "url" not in found:
        raise RuntimeError(f"the studio did not start: {found.get('error')!r}")
    url = found["url"].split("?")[0].rstrip("/")
    port = int(url.rsplit(":", 1)[1])
    served = Served(url, host, port, "", token, thread, found["loop"], found["task"])
    if read_csrf:
        served.csrf = csrf_of(get(served, "/").body)
    return served


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: str

    def json(self) -> Any:
        return json.loads(self.body)


def request(served: Served, method: str, path: str, *, form: dict[str, str] | None = None,
            headers: dict[str, str] | None = None, host: str | None = None, auth: bool = True,
            timeout: float = 10) -> Answer:
    """One HTTP request to the studio (stdlib ``http.client``: no client library needed)."""
    conn = http.client.HTTPConnection("127.0.0.1", served.port, timeout=timeout)
    sent = {"Host": host or f"127.0.0.1:{served.port}", **(headers or {})}
    if auth and served.token:
        sent.setdefault("Authorization", f"Bearer {served.token}")
    body = None
    if form is not None:
        body = urlencode(form)
        sent["Content-Type"] = "application/x-www-form-urlencoded"
    try:
        conn.request(method, path, body=body, headers=sent)
        response = conn.getresponse()
        return Answer(response.status, {k.lower(): v for k, v in response.getheaders()},
                      response.read().decode("utf-8", "replace"))
    finally:
        conn.close()


def get(served: Served, path: str, **kwargs: Any) -> Answer:
    return request(served, "GET", path, **kwargs)


def post(served: Served, path: str, form: dict[str, str], **kwargs: Any) -> Answer:
    return request(served, "POST", path, form=form, **kwargs)


def csrf_of(html: str) -> str:
    marker = '<meta name="csrf-token" content="'
    start = html.find(marker)
    return html[start + len(marker): html.find('"', start + len(marker))] if start >= 0 else ""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


if __name__ == "__main__":  # a demo store, served: python tests/studio_runs.py /tmp/demo.db
    path = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/rolecast-studio-demo.db")
    asyncio.run(debate(path, rounds=6))
    asyncio.run(failing(path))
    asyncio.run(hostile(path))
    big_run(path)
    print(f"python -m rolecast.cli studio --store {path}")
