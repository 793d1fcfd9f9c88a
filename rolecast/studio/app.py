"""The studio's web app: Starlette routes over a :class:`~rolecast.studio.source.RunSource`.

Pages are rendered on the server with Jinja2 (autoescaping on: whatever a model or a person
wrote is text on the page, never markup) and need one small script of our own
(``static/studio.js``: expand all, the graph's clicks, live updates, the runs list's refresh);
the message graph is SVG written by the template. Nothing is fetched from the internet.

Routes::

    GET  /                                  the runs (filter ?q=, ?status=)
    GET  /runs/{run_id}                     one run (?after=SEQ pages through its events)
    GET  /runs/{run_id}/live                server-sent events: the run's new events as they land
    GET  /runs/{run_id}/messages            an HTML list of messages (?seq=1,2,3), for the graph's clicks
    GET  /compare                           two runs side by side (?a=RUN&b=RUN)
    POST /runs/{run_id}/approvals/{id}      answer a pending approval (approve / reject / edit)
    POST /runs/{run_id}/fork                fork the run at a round
    GET  /api/runs                          the runs as JSON
    GET  /api/runs/{run_id}                 one run's header and per-role totals as JSON
    GET  /api/runs/{run_id}/events          its events as JSON, paginated (?after=SEQ&limit=N)

Safety (see :class:`~rolecast.studio.guard.Guard`): requests must name this server as their ``Host`` (a web page
elsewhere cannot reach it through a DNS name of its own), carry the access token when the server
has one, and a POST must carry the page's CSRF token and come from this origin.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlencode

import jinja2
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ..errors import RolecastError, UsageError
from . import evals, shape, text
from .align import Abandoned
from .guard import CSRF_FIELD, MAX_BODY, TOKEN_COOKIE, ASGIApp, Guard, allowed_hosts, is_loopback, plain
from .source import MAX_PAGE, PAGE_SIZE, RUNNING, STATUSES, RunSource

HERE = Path(__file__).resolve().parent
#: how often the live stream looks for new events (seconds): new events appear within this
LIVE_POLL = 0.25
#: a comment line on the live stream this often keeps proxies from closing an idle connection
LIVE_KEEPALIVE = 15.0

#: how often a comparison in progress looks whether its client is still there (seconds)
COMPARE_POLL = 0.2
#: comparisons the studio works on at once (the others wait their turn)
COMPARES_AT_ONCE = 2
#: a message of a model call's request longer than this (characters) is folded: its start, click for all
LONG_MESSAGE = 600


def _templates() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        autoescape=True,  # every template is HTML: everything interpolated is escaped
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=text.neutral,  # control and bidi characters: visible escapes, as the CLI shows them
    )
    env.filters["when"] = lambda ts: time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts)) if ts else ""
    env.filters["duration"] = _duration
    env.filters["money"] = lambda v: f"${v:.4f}" if v >= 0.0001 or v == 0 else f"${v:.6f}"
    env.filters["pretty"] = lambda v: json.dumps(v, indent=2, ensure_ascii=False, default=str)
    env.filters["fold"] = text.fold
    env.filters["rich"] = text.rich
    env.filters["urlpart"] = lambda s: quote(str(s), safe="")
    env.filters["short"] = lambda s, n=120: (s if len(s) <= n else s[: n - 1] + "…") if isinstance(s, str) else s
    env.globals["source_of"] = shape.source_of
    env.globals["call_title"] = shape.call_title
    env.globals["is_summary"] = shape.is_summary
    env.globals["fitted_note"] = shape.fitted_note
    env.globals["long_message"] = LONG_MESSAGE
    return env


def _duration(seconds: float) -> str:
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 120:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min" if hours else f"{minutes} min {secs:02d} s"


async def _form(request: Request) -> dict[str, str]:
    """A url-encoded form's fields (the studio's forms are small and never upload files; this needs no
    multipart parser)."""
    body = (await request.body()).decode("utf-8", "replace")
    return {key: values[-1] for key, values in parse_qs(body, keep_blank_values=True).items()}


#: the largest seq SQLite stores (a signed 64-bit integer); a bigger ``after`` is refused, not overflowed
MAX_SEQ = (1 << 63) - 1


def whole(text: str | None, name: str, default: int = 0) -> int:
    """A whole number from a query or a header (one below 0 is 0), or a UsageError (not a number, or more
    than :data:`MAX_SEQ`: SQLite could not even compare it)."""
    try:
        value = int(text) if text not in (None, "") else default
    except ValueError:
        raise UsageError(f"{name} must be a whole number (an event's seq)") from None
    if value > MAX_SEQ:
        raise UsageError(f"{name} must be a whole number from 0 to {MAX_SEQ}")
    return max(0, value)


#: how deep the edited arguments of an approval may nest (lists and objects)
MAX_NESTING = 100


def nesting(text: str) -> int:
    """How deep a JSON text's lists and objects nest (one pass; brackets in strings do not count)."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


class Studio:
    """The handlers, holding the source, the templates and the server's CSRF secret."""

    def __init__(self, source: RunSource, *, csrf: str):
        self.source = source
        self.csrf = csrf
        self.templates = _templates()
        #: comparisons at once (each is bounded; this keeps a page that asks for many from taking every
        #: worker thread the other pages need)
        self.comparing = asyncio.Semaphore(COMPARES_AT_ONCE)

    def warm(self) -> None:
        """Compile every template now (about 0.2 s of CPU), so that the first page a person opens
        does not wait for it; run in a thread of its own as the server starts."""
        for name in self.templates.list_templates():
            self.templates.get_template(name)

    def page(self, name: str, http_status: int = 200, **values: Any) -> HTMLResponse:
        html = self.templates.get_template(name).render(csrf=self.csrf, csrf_field=CSRF_FIELD, **values)
        return HTMLResponse(html, status_code=http_status)

    def error(self, exc: Exception, status: int = 404) -> HTMLResponse:
        return self.page("error.html", status, title="Not found" if status == 404 else "Error",
                         kind=type(exc).__name__, message=str(exc))

    # ---------------------------------------------------------------- pages
    async def runs(self, request: Request) -> Response:
        q = request.query_params.get("q", "")
        status = request.query_params.get("status", "")
        rows = await asyncio.to_thread(self.source.runs, q, status)
        name = "_runs_rows.html" if request.query_params.get("fragment") == "rows" else "runs.html"
        return self.page(name, title="Runs", rows=rows, q=q, status=status, statuses=STATUSES)

    async def run(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]
        try:
            after = whole(request.query_params.get("after"), "after")
        except UsageError as exc:
            return self.error(exc, 400)
        try:
            values = await asyncio.to_thread(self._run_values, run_id, after)
        except RolecastError as exc:
            return self.error(exc)
        return self.page("run.html", decided=request.query_params.get("decided", ""), **values)

    def _run_values(self, run_id: str, after: int) -> dict[str, Any]:
        source = self.source
        messages = source.messages(run_id)  # (first: the run's detailed summary serves the rest)
        run = source.run(run_id)
        events = source.events(run_id, after, PAGE_SIZE)
        starts = source.page_starts(run_id)
        pending = source.pending_approvals(run_id)
        last = events[-1].seq if events else after
        return {
            "title": f"Run {run_id}", "run": run, "groups": shape.group(events), "after": after,
            "colours": shape.colours(run.roles), "totals": sorted(source.role_totals(run_id), key=lambda t: t.role),
            "graph": shape.graph(source.edges(messages), run.roles), "pages": starts, "page_size": PAGE_SIZE,
            "last_seq": last, "at_end": last >= source.last_seq(run_id), "live": run.status == RUNNING,
            "pending": pending, "fork_at": run.fork_at, "continue_command": source.continue_command(run),
            "message_count": len(messages),
        }

    async def messages(self, request: Request) -> Response:
        """The messages of some seqs (a graph node's or arrow's), as an HTML list."""
        run_id = request.path_params["run_id"]
        try:
            wanted = {int(s) for s in request.query_params.get("seq", "").split(",") if s.strip()}
        except ValueError:
            return self.error(UsageError("seq is a comma-separated list of event numbers"), 400)
        everything = await asyncio.to_thread(self.source.messages, run_id)
        try:
            run = await asyncio.to_thread(self.source.run, run_id)
        except RolecastError as exc:
            return self.error(exc)
        found = [m for m in everything if m.seq in wanted]
        return self.page("_messages.html", messages=found, colours=shape.colours(run.roles))

    async def live(self, request: Request) -> Response:
        """Server-sent events: every new event of the run, rendered as the page renders them, as it lands.

        Each message is ``{"last": seq, "status": ..., "html": ...}``; the browser appends the html
        (escaped here, by the same templates as the page). ``Last-Event-ID`` resumes after a reconnect."""
        run_id = request.path_params["run_id"]
        try:
            after = whole(request.headers.get("last-event-id") or request.query_params.get("after"),
                          "Last-Event-ID" if request.headers.get("last-event-id") else "after")
        except UsageError as exc:
            return self.error(exc, 400)
        try:
            run = await asyncio.to_thread(self.source.run, run_id)
        except RolecastError as exc:
            return self.error(exc)
        colours = shape.colours(run.roles)
        template = self.templates.get_template("_events.html")

        async def stream() -> Any:
            nonlocal after
            quiet = 0.0
            yield "retry: 1000\n\n"
            while not await request.is_disconnected():
                events = await asyncio.to_thread(self.source.events, run_id, after, PAGE_SIZE)
                if events:
                    after = events[-1].seq
                    row = await asyncio.to_thread(self.source.run, run_id)
                    html = template.render(groups=shape.group(events), colours=colours, continued=True,
                                           fork_at=run.fork_at)
                    payload = json.dumps({"last": after, "status": row.status, "events": row.events,
                                          "calls": row.calls, "tokens": row.tokens, "html": html})
                    yield f"id: {after}\nevent: events\ndata: {payload}\n\n"
                    quiet = 0.0
                    if len(events) == PAGE_SIZE:
                        continue  # more waiting: no pause
                else:
                    quiet += LIVE_POLL
                    if quiet >= LIVE_KEEPALIVE:
                        quiet = 0.0
                        yield ": still here\n\n"
                await asyncio.sleep(LIVE_POLL)

        return StreamingResponse(stream(), media_type="text/event-stream",
                                 headers={"cache-control": "no-store", "x-accel-buffering": "no"})

    async def compare(self, request: Request) -> Response:
        a, b = request.query_params.get("a", ""), request.query_params.get("b", "")
        if not a or not b:
            rows = await asyncio.to_thread(self.source.runs)
            a, b = _pick_pair(rows, a, b)
            return self.page("compare_pick.html", title="Compare runs", rows=rows, a=a, b=b)
        left = threading.Event()  # set when the client goes: the comparison stops at its next step
        try:
            async with self.comparing:
                work = asyncio.ensure_future(asyncio.to_thread(self._compare_values, a, b, left.is_set))
                while not (await asyncio.wait({work}, timeout=COMPARE_POLL))[0]:
                    if await request.is_disconnected():
                        left.set()
                        with contextlib.suppress(Abandoned, RolecastError):
                            await work
                        return plain(499, "rolecast studio: the client left; the comparison was stopped")
                values = work.result()
        except RolecastError as exc:
            return self.error(exc)
        return self.page("compare.html", **values)

    def _compare_values(self, a: str, b: str, stop: Callable[[], bool] | None = None) -> dict[str, Any]:
        source = self.source
        left_messages, right_messages = source.messages(a), source.messages(b)
        left, right = source.run(a), source.run(b)
        comparison = shape.compare(left_messages, right_messages, source.call_keys(a), source.call_keys(b),
                                   stop=stop)
        return {"title": f"Compare {a} and {b}", "left": left, "right": right, "cmp": comparison,
                "colours": shape.colours(list(dict.fromkeys([*left.roles, *right.roles])))}

    # ------------------------------------------------------------- steering
    async def decide(self, request: Request) -> Response:
        run_id, approval_id = request.path_params["run_id"], request.path_params["approval_id"]
        form = await _form(request)
        verdict = str(form.get("verdict", ""))
        reason = str(form.get("reason", ""))
        arguments: dict[str, Any] | None = None
        try:
            if verdict == "edit":
                text = str(form.get("arguments", ""))
                if nesting(text) > MAX_NESTING:
                    raise UsageError(f"the edited arguments nest deeper than {MAX_NESTING} levels")
                try:
                    arguments = json.loads(text)
                except json.JSONDecodeError as exc:
                    raise UsageError(f"the edited arguments are not JSON: {exc}") from exc
                if not isinstance(arguments, dict):
                    raise UsageError("the edited arguments must be a JSON object of argument names and values")
            await asyncio.to_thread(self.source.decide, run_id, approval_id, verdict, reason=reason,
                                    arguments=arguments)
        except RolecastError as exc:
            return self.error(exc, 400)
        return RedirectResponse(f"/runs/{quote(run_id, safe='')}?{urlencode({'decided': approval_id})}#steer",
                                status_code=303)

    async def fork(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]
        form = await _form(request)
        try:
            try:
                at_round = int(str(form.get("round", "")))
            except ValueError as exc:
                raise UsageError("fork at a round: a whole number") from exc
            new_id = await asyncio.to_thread(self.source.fork, run_id, at_round)
        except RolecastError as exc:
            return self.error(exc, 400)
        return RedirectResponse(f"/runs/{new_id}", status_code=303)

    # ------------------------------------------------------------------ JSON
    async def api_runs(self, request: Request) -> Response:
        rows = await asyncio.to_thread(self.source.runs, request.query_params.get("q", ""),
                                       request.query_params.get("status", ""))
        return JSONResponse({"runs": [r.as_json() for r in rows]})

    async def api_run(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]
        try:
            run = await asyncio.to_thread(self.source.run, run_id)
        except RolecastError as exc:
            return JSONResponse({"error": type(exc).__name__, "message": str(exc)}, status_code=404)
        totals = await asyncio.to_thread(self.source.role_totals, run_id)
        return JSONResponse({**run.as_json(), "per_role": [t.__dict__ | {"tokens": t.tokens} for t in totals]})

    async def api_events(self, request: Request) -> Response:
        """``?after=SEQ&limit=N`` (N at most 2000); ``next`` is the ``after`` of the next page, or null."""
        run_id = request.path_params["run_id"]
        try:
            after = whole(request.query_params.get("after"), "after")
            limit = whole(request.query_params.get("limit"), "limit", PAGE_SIZE)
        except UsageError as exc:
            return JSONResponse({"error": "UsageError", "message": str(exc)}, status_code=400)
        if not 1 <= limit <= MAX_PAGE:
            return JSONResponse({"error": "UsageError", "message": f"limit is 1 to {MAX_PAGE}"}, status_code=400)
        events = await asyncio.to_thread(self.source.events, run_id, after, limit)
        if not events and after == 0:
            return JSONResponse({"error": "UsageError", "message": f"no run {run_id!r} in the store"},
                                status_code=404)
        last = events[-1].seq if events else after
        more = len(events) == limit and await asyncio.to_thread(self.source.last_seq, run_id) > last
        return JSONResponse({"run_id": run_id, "events": [e.as_json() for e in events],
                             "next": last if more else None})


def _pick_pair(rows: list[Any], a: str, b: str) -> tuple[str, str]:
    """The comparison picker's first choice: two different runs — on the right the one given or the
    newest, on the left the one given, else the right one's parent (a fork's, a rerun's), else the next."""
    ids = [r.run_id for r in rows]
    if not b:
        b = next((i for i in ids if i != a), "")
    if not a:
        parent = next((r.parent for r in rows if r.run_id == b and r.parent in ids), None)
        a = parent or next((i for i in ids if i != b), "")
    return a, b


def create_app(source: RunSource, *, token: str | None = None, hosts: tuple[str, ...] | None = ("127.0.0.1",),
               csrf: str | None = None, warm: bool = True) -> ASGIApp:
    """The studio as an ASGI app over ``source``. ``hosts``: the ``Host`` names it answers to (None:
    any); ``token``: the access token every request must carry (None: none needed); ``warm``:
    compile the templates in a background thread at once."""
    studio = Studio(source, csrf=csrf or secrets.token_urlsafe(24))
    if warm:
        threading.Thread(target=studio.warm, name="rolecast-studio-warm", daemon=True).start()
    routes = [
        Route("/", studio.runs),
        Route("/compare", studio.compare),
        Route("/evals", evals.evals),
        Route("/runs/{run_id}", studio.run),
        Route("/runs/{run_id}/live", studio.live),
        Route("/runs/{run_id}/messages", studio.messages),
        # (an approval's id may hold a "/": its form's action encodes it, the server hands it over decoded)
        Route("/runs/{run_id}/approvals/{approval_id:path}", studio.decide, methods=["POST"]),
        Route("/runs/{run_id}/fork", studio.fork, methods=["POST"]),
        Route("/api/runs", studio.api_runs),
        Route("/api/runs/{run_id}", studio.api_run),
        Route("/api/runs/{run_id}/events", studio.api_events),
        Mount("/static", app=StaticFiles(directory=HERE / "static"), name="static"),
    ]
    app = Starlette(routes=routes)
    app.state.studio = studio
    return Guard(app, token=token, csrf=studio.csrf, hosts=hosts)


__all__ = ["CSRF_FIELD", "MAX_BODY", "TOKEN_COOKIE", "Guard", "Studio", "allowed_hosts", "create_app", "is_loopback",
           "whole"]
