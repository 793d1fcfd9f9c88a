"""``rolecast serve``: serve a team on this machine until Ctrl-C.

Where it listens follows the studio's rule: 127.0.0.1 by default, where requests must name a
loopback host; any other address needs an access token (``--token``, ``$ROLECAST_SERVE_TOKEN``,
or a fresh one printed at start), and every request without it gets 401.
"""

from __future__ import annotations

import argparse
import asyncio
import difflib
import importlib
import os
import secrets
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import ConfigError, UsageError
from ..studio.app import allowed_hosts
from ..studio.server import is_loopback, listen_and_serve, store_location
from .app import RPC_PATH, create_app

TOKEN_ENV = "ROLECAST_SERVE_TOKEN"


def access_token(host: str, given: str | None) -> str | None:
    """The token a server on ``host`` requires: ``given`` (or ``$ROLECAST_SERVE_TOKEN``); a fresh one
    when the host is not loopback and none was given; None on loopback with none given."""
    token = given or os.environ.get(TOKEN_ENV) or None
    if token is not None and len(token) < 16:
        raise ConfigError("rolecast serve's access token must be at least 16 characters (or leave it out on "
                          "another address than loopback: a random one is made and printed)")
    if token is None and not is_loopback(host):
        token = secrets.token_urlsafe(24)
    return token


def load_target(spec: str) -> Any:
    """``MODULE:ATTR`` (``MODULE`` importable from the current directory too) → the object."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise UsageError(f"serve MODULE:ATTR, such as examples.team:build_team; not {spec!r}")
    if str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise UsageError(f"cannot import {module_name!r}: {exc}") from exc
    target: Any = module
    for part in attr.split("."):
        if not hasattr(target, part):
            names = [n for n in dir(target) if not n.startswith("_")]
            close = difflib.get_close_matches(part, names, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise UsageError(f"{module_name} has no {attr!r}{hint}")
        target = getattr(target, part)
    return target


async def serve(app: Any, *, host: str = "127.0.0.1", port: int = 8766,
                on_ready: Callable[[str], None] | None = None) -> None:
    """Serve ``app`` until cancelled; ``on_ready(base_url)`` once it listens."""
    await listen_and_serve(app, host=host, port=port, what="rolecast serve", lifespan="on", on_ready=on_ready)


def run_command(args: argparse.Namespace) -> int:
    """``rolecast serve MODULE:ATTR``: serve until Ctrl-C (or SIGTERM)."""
    token = access_token(args.host, args.token)
    target = load_target(args.target)
    where = store_location(args.store)
    app = create_app(target, store=where, token=token, hosts=allowed_hosts(args.host), studio=args.studio,
                     rounds=args.rounds, name=args.target, max_running=args.max_tasks)

    def ready(url: str) -> None:
        print(f"rolecast serve: {args.target} at {url}  (A2A: {url}{RPC_PATH}, card: "
              f"{url}/.well-known/agent-card.json, HTTP: {url}/api/runs; store {where}; Ctrl-C stops it)", flush=True)
        if token is not None:
            print(f"rolecast serve: access token {token} (send 'Authorization: Bearer TOKEN')", flush=True)

    try:
        asyncio.run(serve(app, host=args.host, port=args.port, on_ready=ready))
    except KeyboardInterrupt:
        print("rolecast serve: stopped", file=sys.stderr)
    return 0


__all__ = ["TOKEN_ENV", "access_token", "load_target", "run_command", "serve"]
