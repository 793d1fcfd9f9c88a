"""The served team's HTTP API, beside A2A: start a run, follow its typed events, read it, answer it.

Routes (JSON in and out; the shapes are the studio's, from the studio's own code)::

    POST /api/runs                               {"idea": "...", "rounds": 3} -> 201 {"run_id", "task_id", "status"}
    GET  /api/runs                               the runs of the store (the studio's api_runs)
    GET  /api/runs/{run_id}                      the run's header and per-role totals (the studio's api_run)
    GET  /api/runs/{run_id}/events               its events, paginated ?after=SEQ&limit=N (the studio's api_events)
    GET  /api/runs/{run_id}/stream               its events as server-sent events, from ?after=SEQ or the
                                                 Last-Event-ID header (resumable): one ``event: run_event`` per
                                                 event (``id:`` its seq, ``data:`` its JSON), then ``event: end``
    POST /api/runs/{run_id}/approvals/{id}       {"verdict": "approve" | "reject" | "edit", "reason", "arguments"}

:class:`ServeGuard` checks every request first: the ``Host`` (a loopback server answers only to
loopback names: no DNS rebinding), the access token when there is one (``Authorization: Bearer``;
the agent card at ``/.well-known/agent-card.json`` is public, as A2A clients fetch it first), a
body of at most :data:`MAX_BODY` bytes (one sent in chunks with no length is refused 413 once it
passes them), and a POST with a JSON body (a page on another site cannot send one without the
browser asking first, CORS) — but for the studio's own pages (``--studio``), whose forms its guard
checks (CSRF token, origin). An A2A request nested deeper than :data:`MAX_NESTING` is refused
(-32600) before the SDK parses it.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any
from urllib.parse import parse_qs

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from ..errors import RolecastError, UsageError
from ..llm.openai.wire import _nests_deeper
from ..studio.app import Studio, whole
from ..studio.guard import TOKEN_COOKIE, ASGIApp, Receive, Scope, Send, _bearer, _cookie, _hostname, _same
from ..studio.source import PAGE_SIZE
from .runner import SETTLED, TeamRunner

#: the largest request body (bytes): a bigger one is refused before it is read whole
MAX_BODY = 1 << 20
#: how deep an A2A request's lists and objects may nest (deeper: -32600, never a RecursionError)
MAX_NESTING = 64
#: the agent card's path (public: clients read it before they know how to authenticate)
CARD_PATH = "/.well-known/agent-card.json"
#: how often a stream of events looks for new ones when nothing woke it (seconds)
STREAM_POLL = 0.25
#: a comment line this often keeps proxies from closing an idle stream (seconds)
KEEPALIVE = 15.0


def _error(status: int, kind: str, message: str) -> JSONResponse:
    return JSONResponse({"error": kind, "message": message}, status_code=status)


class ServeGuard:
    """The checks on every request (see the module docstring), as ASGI middleware (streams pass through)."""

    def __init__(self, app: ASGIApp, *, token: str | None, hosts: tuple[str, ...] | None, rpc_path: str,
                 studio: bool = False):
        self.app, self.token, self.hosts, self.rpc_path, self.studio = app, token, hosts, rpc_path, studio

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        host = headers.get("host", "")
        path = _route_path(scope)
        if self.hosts is not None and _hostname(host) not in self.hosts:
            await _error(403, "Forbidden", f"requests must name this server as their host, not {host[:100]!r}")(
                scope, receive, send)
            return
        if self.token is not None and not (path == CARD_PATH and scope["method"] in ("GET", "HEAD")):
            given = _bearer(headers.get("authorization", "")) or _cookie(headers.get("cookie", ""), TOKEN_COOKIE)
            if given is None and self.studio and scope["method"] == "GET":  # the studio's first visit (?token=)
                given = (parse_qs(scope.get("query_string", b"").decode("latin-1")).get("token") or [None])[0]
            if given is None or not _same(given, self.token):
                response = _error(401, "Unauthorized", "this server needs its access token: "
                                                       "send 'Authorization: Bearer TOKEN'")
                response.headers["www-authenticate"] = "Bearer"
                await response(scope, receive, send)
                return
        if path == self.rpc_path + "/":  # (``POST /a2a/``: the endpoint itself, not a redirect to it)
            scope = {**scope, "path": str(scope["path"])[:-1], "raw_path": None}
            path = self.rpc_path
        if scope["method"] not in ("GET", "HEAD"):
            if self.studio and path != self.rpc_path and not path.startswith("/api/"):
                await self.app(scope, receive, send)  # (the studio's forms: its own guard checks CSRF and size)
                return
            problem = _body_problem(headers)
            if problem is None:
                body, receive = await _read_body(receive)
                if body is None:
                    problem = 413, f"Payload too large: the body passed {MAX_BODY} bytes"
                elif path == self.rpc_path and _nests_deeper(body, MAX_NESTING):
                    problem = 400, f"the request nests deeper than {MAX_NESTING} levels"
            if problem is not None:
                status, text = problem
                await self._refuse(scope, receive, send, status, text)
                return
        await self.app(scope, receive, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, status: int, text: str) -> None:
        """A JSON-RPC error on the A2A endpoint (what its clients read), a JSON error elsewhere."""
        if _route_path(scope) == self.rpc_path:
            # (a body that is not JSON: ContentTypeNotSupported, as the A2A TCK expects; else InvalidRequest)
            code = -32005 if status == 415 else -32600
            await JSONResponse({"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": text}},
                               status_code=status)(scope, receive, send)
        else:
            await _error(status, "UsageError", text)(scope, receive, send)


def _route_path(scope: Scope) -> str:
    """The request's path within this app (mounted under a prefix, the prefix is its ``root_path``)."""
    path, root = str(scope.get("path", "")), str(scope.get("root_path", ""))
    return path[len(root):] if root and path.startswith(root) else path


def _body_problem(headers: dict[str, str]) -> tuple[int, str] | None:
    kind = headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/json":
        return 415, "send the request's body as JSON (Content-Type: application/json)"
    size = headers.get("content-length")
    if size is not None and (not size.isdigit() or int(size) > MAX_BODY):
        return 413, f"Payload too large: the body is {size} bytes; at most {MAX_BODY}"
    return None


async def _read_body(receive: Receive) -> tuple[bytes | None, Receive]:
    """The request's whole body (None once it passes :data:`MAX_BODY`: sent in chunks with no length,
    it is not read further) and a ``receive`` that hands it to the app again."""
    chunks, size = [], 0
    while True:
        message = await receive()
        if message.get("type") != "http.request":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY:
            return None, receive
        chunks.append(chunk)
        if not message.get("more_body"):
            break
    body, given = b"".join(chunks), False

    async def again() -> Any:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return body, again


class ServeAPI:
    """The HTTP API's handlers; reading and answering go through the studio's code."""

    def __init__(self, runner: TeamRunner, studio: Studio):
        self.runner, self.studio = runner, studio

    async def start(self, request: Request) -> Response:
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            return _error(400, "UsageError", f"the body is not JSON: {exc}")
        if not isinstance(body, dict):
            return _error(400, "UsageError", 'the body is a JSON object: {"idea": "...", "rounds": 3}')
        unknown = sorted(set(body) - {"idea", "rounds"})
        if unknown:
            return _error(400, "UsageError", f"unknown field(s) {unknown}: a run takes idea and rounds")
        try:
            served = self.runner.start(body.get("idea"), body.get("rounds"))  # type: ignore[arg-type]
        except RolecastError as exc:
            return _error(400, type(exc).__name__, str(exc))
        return JSONResponse({"run_id": served.run_id, "task_id": served.run_id, "status": served.outcome,
                             "events": f"/api/runs/{served.run_id}/stream"}, status_code=201)

    async def stream(self, request: Request) -> Response:
        """The run's events as server-sent events, from ``after`` (or ``Last-Event-ID``) on, until it settles."""
        run_id = request.path_params["run_id"]
        try:  # (as the studio reads it: from 0 to SQLite's largest integer, else 400)
            after = whole(request.headers.get("last-event-id") or request.query_params.get("after"),
                          "Last-Event-ID" if request.headers.get("last-event-id") else "after")
        except UsageError as exc:
            return _error(400, "UsageError", str(exc))
        source = self.studio.source
        served = self.runner.find(run_id)
        if served is None:
            try:
                await asyncio.to_thread(source.run, run_id)
            except RolecastError as exc:
                return _error(404, type(exc).__name__, str(exc))

        async def events() -> Any:
            nonlocal after
            quiet = 0.0
            yield "retry: 1000\n\n"
            while not await request.is_disconnected():
                settled = served is None or (served.outcome in SETTLED and not served.running)
                if served is not None:
                    served.changed.clear()
                page = await asyncio.to_thread(source.events, run_id, after, PAGE_SIZE)
                for view in page:
                    after = view.seq
                    yield f"id: {view.seq}\nevent: run_event\ndata: {json.dumps(view.as_json(), default=str)}\n\n"
                if len(page) == PAGE_SIZE:
                    continue
                if settled:
                    status = served.outcome if served is not None else "stored"
                    yield f"event: end\ndata: {json.dumps({'run_id': run_id, 'status': status, 'last': after})}\n\n"
                    return
                if page:
                    quiet = 0.0
                assert served is not None
                try:
                    await asyncio.wait_for(served.changed.wait(), STREAM_POLL)
                except asyncio.TimeoutError:
                    quiet += STREAM_POLL
                if quiet >= KEEPALIVE:
                    quiet = 0.0
                    yield ": still here\n\n"

        return StreamingResponse(events(), media_type="text/event-stream",
                                 headers={"cache-control": "no-store", "x-accel-buffering": "no"})

    async def decide(self, request: Request) -> Response:
        run_id, approval_id = request.path_params["run_id"], request.path_params["approval_id"]
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            return _error(400, "UsageError", f"the body is not JSON: {exc}")
        if not isinstance(body, dict) or not isinstance(body.get("verdict"), str):
            return _error(400, "UsageError", 'the body is {"verdict": "approve" | "reject" | "edit", '
                                             '"reason": "...", "arguments": {...}}')
        served = self.runner.find(run_id)
        try:
            if served is None:
                raise UsageError(f"no task {run_id!r} on this server")
            arguments = body.get("arguments")
            if arguments is not None and not isinstance(arguments, dict):
                raise UsageError("arguments is a JSON object of the call's arguments")
            reason = str(body.get("reason") or "")
            if body["verdict"] == "reject" and not reason.strip():
                raise UsageError("a rejection needs a reason (the role is told it)")
            decision = self.runner.answer(served, body["verdict"], approval_id, reason=reason, arguments=arguments,
                                          by="rolecast serve (HTTP)")
        except RolecastError as exc:
            return _error(404 if served is None else 400, type(exc).__name__, str(exc))
        return JSONResponse({"run_id": run_id, "decision": decision, "status": served.outcome})


__all__ = ["CARD_PATH", "MAX_BODY", "ServeAPI", "ServeGuard"]
