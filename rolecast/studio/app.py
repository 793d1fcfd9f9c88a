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

Safety (see :class:`Guard`): requests must name this server as their ``Host`` (a web page
elsewhere cannot reach it through a DNS name of its own), carry the access token when the server
has one, and a POST must carry the page's CSRF token and come from this origin.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import secrets
import threading
import time
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode

import jinja2
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ..errors import RolecastError, UsageError
from . import evals, shape
from .source import MAX_PAGE, PAGE_SIZE, RUNNING, STATUSES, RunSource

HERE = Path(__file__).resolve().parent
CSRF_FIELD = "csrf"
TOKEN_COOKIE = "rolecast_studio_token"
#: how often the live stream looks for new events (seconds): new events appear within this
LIVE_POLL = 0.25
#: a comment line on the live stream this often keeps proxies from closing an idle connection
LIVE_KEEPALIVE = 15.0

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]", "::1")
#: a message of a model call's request longer than this (characters) is folded: its start, click for all
LONG_MESSAGE = 600


def _templates() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        autoescape=True,  # every template is HTML: everything interpolated is escaped
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["when"] = lambda ts: time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts)) if ts else ""
    env.filters["duration"] = _duration
    env.filters["money"] = lambda v: f"${v:.4f}" if v >= 0.0001 or v == 0 else f"${v:.6f}"
    env.filters["pretty"] = lambda v: json.dumps(v, indent=2, ensure_ascii=False, default=str)
    env.filters["short"] = lambda s, n=120: (s if len(s) <= n else s[: n - 1] + "…") if isinstance(s, str) else s
    env.globals["source_of"] = shape.source_of
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


class Guard:
    """The studio's checks on every request, as ASGI middleware (it lets the live stream through
    untouched, which Starlette's ``BaseHTTPMiddleware`` would buffer).

    * ``Host`` must be one this server answers to: with a loopback bind, only loopback names (a
      page on another site that points its own DNS name at 127.0.0.1 is refused: DNS rebinding);
    * with an access ``token``, a request must carry it: ``Authorization: Bearer``, the cookie a
      first visit with ``?token=`` sets, or that query itself;
    * a POST must carry the CSRF token of the page's form (``csrf`` field or ``X-CSRF-Token``
      header) and, when the browser says where it comes from (``Origin``), come from this server.
    """

    def __init__(self, app: ASGIApp, *, token: str | None, csrf: str, hosts: tuple[str, ...] | None):
        self.app, self.token, self.csrf, self.hosts = app, token, csrf, hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        host = headers.get("host", "")
        if self.hosts is not None and _hostname(host) not in self.hosts:
            await _plain(403, f"rolecast studio: requests must name this server as their host, not {host!r}")(
                scope, receive, send)
            return
        if self.token is not None:
            query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
            given = _bearer(headers.get("authorization", "")) or _cookie(headers.get("cookie", ""), TOKEN_COOKIE)
            from_query = (query.get("token") or [None])[0]
            if from_query is not None and _same(from_query, self.token) and scope["method"] == "GET":
                # a first visit with the printed URL: keep the token in a cookie, drop it from the address
                rest = {k: v for k, v in query.items() if k != "token"}
                target = scope["path"] + ("?" + urlencode(rest, doseq=True) if rest else "")
                response = RedirectResponse(target, status_code=303)
                response.set_cookie(TOKEN_COOKIE, self.token, httponly=True, samesite="strict")
                await response(scope, receive, send)
                return
            if given is None or not _same(given, self.token):
                await _plain(401, "rolecast studio: this server needs its access token (printed when it started): "
                                  "open the URL it printed, or send 'Authorization: Bearer TOKEN'")(
                    scope, receive, send)
                return
        if scope["method"] not in ("GET", "HEAD"):
            origin = headers.get("origin")
            if origin is not None and origin != "null" and _hostname(origin.split("://", 1)[-1]) != _hostname(host):
                await _plain(403, "rolecast studio: a change must come from the studio's own pages (Origin)")(
                    scope, receive, send)
                return
            body, receive = await _buffer(receive)
            sent = headers.get("x-csrf-token") or _form_field(headers, body, CSRF_FIELD)
            if sent is None or not _same(sent, self.csrf):
                await _plain(403, "rolecast studio: the form's CSRF token is missing or stale; reload the page")(
                    scope, receive, send)
                return
        await self.app(scope, receive, _with_headers(send))


def _with_headers(send: Send) -> Send:
    """Every response says: our scripts and styles only, no framing, no sniffing, no referrer."""
    extra = [
        (b"content-security-policy", b"default-src 'self'; script-src 'self'; style-src 'self'; "
                                     b"img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; "
                                     b"base-uri 'none'; form-action 'self'"),
        (b"x-content-type-options", b"nosniff"),
        (b"referrer-policy", b"no-referrer"),
        (b"x-frame-options", b"DENY"),
    ]

    async def wrapped(message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.start":
            message = dict(message)
            message["headers"] = [*message.get("headers", []), *extra]
        await send(message)

    return wrapped


def _plain(status: int, text: str) -> Response:
    return Response(text + "\n", status_code=status, media_type="text/plain; charset=utf-8")


def _same(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode(), b.encode())


def _hostname(host: str) -> str:
    host = host.strip().lower()
    if host.startswith("["):
        return host[: host.find("]") + 1]
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _bearer(value: str) -> str | None:
    scheme, _, token = value.partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def _cookie(header: str, name: str) -> str | None:
    for part in header.split(";"):
        key, _, value = part.strip().partition("=")
        if key == name:
            return value
    return None


def _form_field(headers: dict[str, str], body: bytes, name: str) -> str | None:
    if not headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
        return None
    values = parse_qs(body.decode("utf-8", "replace")).get(name)
    return values[0] if values else None


async def _buffer(receive: Receive) -> tuple[bytes, Receive]:
    """Read a request's body (a form: small) and hand the app a ``receive`` that gives it again."""
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            break
    body = b"".join(chunks)
    given = False

    async def again() -> MutableMapping[str, Any]:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return body, again


async def _form(request: Request) -> dict[str, str]:
    """A url-encoded form's fields (the studio's forms are small and never upload files; this needs no
    multipart parser)."""
    body = (await request.body()).decode("utf-8", "replace")
    return {key: values[-1] for key, values in parse_qs(body, keep_blank_values=True).items()}


def allowed_hosts(bind: str) -> tuple[str, ...] | None:
    """The ``Host`` names a server bound to ``bind`` answers to: loopback names for a loopback bind,
    any for another (that server requires its token instead)."""
    if bind in _LOOPBACK_NAMES or bind.startswith("127."):
        return (*_LOOPBACK_NAMES, bind)
    return None


class Studio:
    """The handlers, holding the source, the templates and the server's CSRF secret."""

    def __init__(self, source: RunSource, *, csrf: str):
        self.source = source
        self.csrf = csrf
        self.templates = _templates()

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
            after = max(0, int(request.query_params.get("after", "0")))
        except ValueError:
            return self.error(UsageError("after must be a whole number (an event's seq)"), 400)
        try:
            values = await asyncio.to_thread(self._run_values, run_id, after)
        except RolecastError as exc:
            return self.error(exc)
        return self.page("run.html", decided=request.query_params.get("decided", ""), **values)

    def _run_values(self, run_id: str, after: int) -> dict[str, Any]:
        source = self.source
        run = source.run(run_id)
        events = source.events(run_id, after, PAGE_SIZE)
        messages = source.messages(run_id)
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
        try:
            run = await asyncio.to_thread(self.source.run, run_id)
        except RolecastError as exc:
            return self.error(exc)
        found = [m for m in await asyncio.to_thread(self.source.messages, run_id) if m.seq in wanted]
        return self.page("_messages.html", messages=found, colours=shape.colours(run.roles))

    async def live(self, request: Request) -> Response:
        """Server-sent events: every new event of the run, rendered as the page renders them, as it lands.

        Each message is ``{"last": seq, "status": ..., "html": ...}``; the browser appends the html
        (escaped here, by the same templates as the page). ``Last-Event-ID`` resumes after a reconnect."""
        run_id = request.path_params["run_id"]
        try:
            after = int(request.headers.get("last-event-id") or request.query_params.get("after", "0"))
        except ValueError:
            return self.error(UsageError("after must be a whole number (an event's seq)"), 400)
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
            return self.page("compare_pick.html", title="Compare runs", rows=rows, a=a, b=b)
        try:
            values = await asyncio.to_thread(self._compare_values, a, b)
        except RolecastError as exc:
            return self.error(exc)
        return self.page("compare.html", **values)

    def _compare_values(self, a: str, b: str) -> dict[str, Any]:
        source = self.source
        left, right = source.run(a), source.run(b)
        comparison = shape.compare(source.messages(a), source.messages(b),
                                   source.call_keys(a), source.call_keys(b))
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
                try:
                    arguments = json.loads(str(form.get("arguments", "")))
                except json.JSONDecodeError as exc:
                    raise UsageError(f"the edited arguments are not JSON: {exc}") from exc
                if not isinstance(arguments, dict):
                    raise UsageError("the edited arguments must be a JSON object of argument names and values")
            await asyncio.to_thread(self.source.decide, run_id, approval_id, verdict, reason=reason,
                                    arguments=arguments)
        except RolecastError as exc:
            return self.error(exc, 400)
        return RedirectResponse(f"/runs/{run_id}?decided={approval_id}#steer", status_code=303)

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
            after = max(0, int(request.query_params.get("after", "0")))
            limit = int(request.query_params.get("limit", str(PAGE_SIZE)))
        except ValueError:
            return JSONResponse({"error": "UsageError", "message": "after and limit are whole numbers"},
                                status_code=400)
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
        Route("/runs/{run_id}/approvals/{approval_id}", studio.decide, methods=["POST"]),
        Route("/runs/{run_id}/fork", studio.fork, methods=["POST"]),
        Route("/api/runs", studio.api_runs),
        Route("/api/runs/{run_id}", studio.api_run),
        Route("/api/runs/{run_id}/events", studio.api_events),
        Mount("/static", app=StaticFiles(directory=HERE / "static"), name="static"),
    ]
    app = Starlette(routes=routes)
    app.state.studio = studio
    return Guard(app, token=token, csrf=studio.csrf, hosts=hosts)


__all__ = ["CSRF_FIELD", "TOKEN_COOKIE", "Guard", "Studio", "allowed_hosts", "create_app"]
