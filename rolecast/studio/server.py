"""``rolecast studio``: serve the studio on this machine.

The rule on where it listens: 127.0.0.1 (or another loopback address) by default, where only
this machine's users can reach it and requests must name a loopback host. Any other address
(``--host 0.0.0.0`` to reach it from a laptop through a VM, say) needs an access token: the one
given (``--token`` or ``$ROLECAST_STUDIO_TOKEN``) or a fresh random one, printed at start with
the URL that carries it; every request without it is refused (HTTP 401).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import socket
import sys
import threading
import webbrowser
from collections.abc import Callable
from typing import Any, Literal

import uvicorn  # (this module loads when a studio starts: rolecast.studio exports it lazily)

from ..errors import ConfigError
from ..runs import DEFAULT_STORE_PATH
from .app import allowed_hosts, create_app, is_loopback
from .source import RunSource


def access_token(host: str, given: str | None) -> str | None:
    """The token a server on ``host`` requires: ``given`` (or ``$ROLECAST_STUDIO_TOKEN``); a fresh one
    when the host is not loopback and none was given; None (no token) on loopback with none given."""
    token = given or os.environ.get("ROLECAST_STUDIO_TOKEN") or None
    if token is not None and len(token) < 16:
        raise ConfigError("the studio's access token must be at least 16 characters (or leave it out: "
                          "a random one is made and printed)")
    if token is None and not is_loopback(host):
        token = secrets.token_urlsafe(24)
    return token


def store_location(given: str | None) -> str:
    """The store to serve: ``--store`` (a path or a URL), else ``$ROLECAST_STORE``, else ./.rolecast/runs.db."""
    return given or os.environ.get("ROLECAST_STORE") or str(DEFAULT_STORE_PATH)


async def serve(source: RunSource, *, host: str = "127.0.0.1", port: int = 8765, token: str | None = None,
                on_ready: Callable[[str], None] | None = None) -> None:
    """Serve the studio until cancelled; ``on_ready(url)`` once it listens (the URL carries the token)."""
    if token is None and not is_loopback(host):
        raise ConfigError(f"the studio listens on {host} (not loopback) only with an access token")
    app = create_app(source, token=token, hosts=allowed_hosts(host))
    shown = "localhost" if host == "localhost" else None

    def ready(base_url: str) -> None:
        if on_ready is not None:
            on_ready(base_url + "/" + (f"?token={token}" if token else ""))

    await listen_and_serve(app, host=host, port=port, what="the studio", shown=shown, on_ready=ready)


async def listen_and_serve(app: Any, *, host: str, port: int, what: str, lifespan: Literal["on", "off"] = "off",
                           shown: str | None = None, on_ready: Callable[[str], None] | None = None) -> None:
    """Serve the ASGI ``app`` on ``host:port`` (port 0: a free one) until cancelled; ``on_ready(base_url)``
    once it listens. A port that cannot be bound is a ConfigError naming ``what`` and the address."""
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False, lifespan=lifespan)
    server = uvicorn.Server(config)
    sock = socket.socket(socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # each connection sends at once (accepted sockets inherit it): without it a keep-alive request's
    # response waits for the client's delayed ACK, about 40 ms a request on Linux
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as exc:
        sock.close()
        raise ConfigError(f"{what} cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    shown = shown or (f"[{host.strip('[]')}]" if ":" in host else host)
    url = f"http://{shown}:{sock.getsockname()[1]}"
    task = asyncio.ensure_future(server.serve(sockets=[sock]))
    while not server.started and not task.done():  # noqa: ASYNC110 (uvicorn's Server has a flag, no event)
        await asyncio.sleep(0.01)
    if on_ready is not None and server.started:
        on_ready(url)
    try:
        await task
    finally:
        sock.close()


def run_command(args: argparse.Namespace) -> int:
    """``rolecast studio``: serve until Ctrl-C."""
    where = store_location(args.store)
    token = access_token(args.host, args.token)
    source = RunSource(where)

    def ready(url: str) -> None:
        print(f"rolecast studio: {url}  (store {source.where}; Ctrl-C stops it)", flush=True)
        if token is not None:
            print(f"rolecast studio: access token {token} (every request must carry it)", flush=True)
        if args.open:
            threading.Thread(target=webbrowser.open, args=(url,), daemon=True).start()

    try:
        asyncio.run(serve(source, host=args.host, port=args.port, token=token, on_ready=ready))
    except KeyboardInterrupt:
        print("rolecast studio: stopped", file=sys.stderr)
    finally:
        source.close()
    return 0


__all__ = ["access_token", "is_loopback", "listen_and_serve", "run_command", "serve", "store_location"]
