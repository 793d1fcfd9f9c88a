"""The served team as one ASGI app: A2A, the HTTP API and (optionally) the studio, behind one guard.

::

    from rolecast.serve import create_app
    app = create_app(build_team, store="runs.db")          # any ASGI server; or mount it:
    starlette_app.mount("/team", app)                      # (the card's URL follows the mount)

Routes: ``GET /.well-known/agent-card.json`` (the card), ``POST /a2a`` (A2A JSON-RPC), the HTTP
API of :mod:`.http`, and with ``studio=True`` the studio's pages at ``/``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
from collections.abc import AsyncIterator
from typing import Any

from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.routes import create_jsonrpc_routes
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route

from ..errors import ConfigError
from ..runs import RunStore, open_store
from ..studio.app import Studio
from ..studio.app import create_app as studio_app
from ..studio.source import RunSource
from .a2a import ClientContextBuilder, TeamHandler, agent_card
from .http import CARD_PATH, ServeAPI, ServeGuard
from .runner import TeamRunner, team_factory

#: the A2A JSON-RPC endpoint's path
RPC_PATH = "/a2a"


def _name_of(target: Any) -> str:
    name = getattr(target, "__name__", "") or type(target).__name__
    module = getattr(target, "__module__", "") or ""
    return f"{module}:{name}" if module and module != "__main__" else name


def create_app(
    target: Any, *, store: str | os.PathLike[str] | RunStore | None = None, token: str | None = None,
    hosts: tuple[str, ...] | None = ("127.0.0.1", "localhost", "[::1]", "::1"), studio: bool = False,
    rounds: int = 5, name: str | None = None, max_running: int = 256,
) -> Any:
    """The ASGI app serving ``target`` — a function returning a fresh :class:`~environment.Team`, or a
    Team (copied per task) — with its runs in ``store`` (a path, a URL or a store; default
    ``$ROLECAST_STORE`` or ./.rolecast/runs.db). ``token``: the access token every request but the
    card's must carry (None: none); ``hosts``: the ``Host`` names it answers to (None: any);
    ``studio``: the studio's pages too; ``rounds``: a run's rounds unless the client says."""
    where = store if store is not None else os.environ.get("ROLECAST_STORE") or ".rolecast/runs.db"
    opened = open_store(where)
    if opened is None:
        raise ConfigError("rolecast serve needs a run store: every task is a durable run")
    title = name or _name_of(target)
    runner = TeamRunner(team_factory(target), opened, rounds=rounds, max_running=max_running, name=title)
    path = getattr(opened, "path", None)
    # (SQLite: a read-only connection of its own, as the studio reads)
    source = RunSource(opened if isinstance(where, RunStore) or path is None else path)
    pages = Studio(source, csrf=secrets.token_urlsafe(24))
    api = ServeAPI(runner, pages)
    handler = TeamHandler(runner)

    async def card(request: Request) -> Response:
        # (where this app is mounted: its root_path; Starlette's base_url is the outermost app's)
        url = f"{request.url.scheme}://{request.url.netloc}{request.scope.get('root_path', '')}{RPC_PATH}"
        body = json.dumps(agent_card_to_dict(agent_card(runner, url, name=title, token=token is not None)))
        etag = '"' + hashlib.sha256(body.encode()).hexdigest()[:32] + '"'
        headers = {"cache-control": "public, max-age=300", "etag": etag}
        if etag in (t.strip() for t in request.headers.get("if-none-match", "").split(",")):
            return Response(status_code=304, headers=headers)
        return Response(body, media_type="application/json", headers=headers)

    routes: list[Any] = [
        Route(CARD_PATH, card, methods=["GET"]),
        # (clients of A2A 0.3 too; the context says who sent a message: see ClientContextBuilder)
        *create_jsonrpc_routes(handler, RPC_PATH, context_builder=ClientContextBuilder(), enable_v0_3_compat=True),
        Route("/api/runs", api.start, methods=["POST"]),
        Route("/api/runs", pages.api_runs, methods=["GET"]),
        Route("/api/runs/{run_id}", pages.api_run, methods=["GET"]),
        Route("/api/runs/{run_id}/events", pages.api_events, methods=["GET"]),
        Route("/api/runs/{run_id}/stream", api.stream, methods=["GET"]),
        Route("/api/runs/{run_id}/approvals/{approval_id}", api.decide, methods=["POST"]),
    ]
    if studio:  # (its own guard inside: CSRF on its forms; the token and host are checked here first)
        routes.append(Mount("/", app=studio_app(source, token=token, hosts=None)))

    @contextlib.asynccontextmanager
    async def lifespan(_app: Any) -> AsyncIterator[None]:
        yield
        await runner.close()  # (the server stops: running tasks are cancelled, their logs say why)
        source.close()
        if not isinstance(where, RunStore):
            opened.close()

    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.runner, app.state.handler = runner, handler
    guarded = ServeGuard(app, token=token, hosts=hosts, rpc_path=RPC_PATH, studio=studio)
    guarded.runner = runner  # type: ignore[attr-defined]
    return guarded


__all__ = ["RPC_PATH", "create_app"]
