"""rolecast serve: a team behind the A2A protocol and an HTTP API, each task a durable run.

::

    rolecast serve MODULE:ATTR [--host 127.0.0.1] [--port 8766] [--token T] [--store PATH|URL] [--studio]

``ATTR`` is a function returning a fresh :class:`~environment.Team` (one per task) or a Team (copied
per task). Needs the ``serve`` extra (``pip install 'rolecast[serve]'``: the official ``a2a-sdk``
with its HTTP server, and the studio's Starlette and uvicorn). Importing this package is light.

* :mod:`.runner` — the runs: one per task, started, followed, resumed after an approval, cancelled;
* :mod:`.a2a` — the A2A methods (the SDK's JSON-RPC endpoint over our request handler) and the card;
* :mod:`.http` — the HTTP API (start, events as SSE, state, approvals) and the guard on every request;
* :mod:`.app` — all of it as one ASGI app (:func:`create_app`, mountable);
* :mod:`.server` — the command: binding, the token rule, uvicorn.
"""

from __future__ import annotations

import argparse
import importlib.util
from typing import TYPE_CHECKING

from ..core.lazy import lazy_exports
from ..errors import ConfigError

if TYPE_CHECKING:
    from .app import create_app
    from .server import load_target, run_command, serve

#: the modules of the ``serve`` extra
REQUIRES = ("a2a", "starlette", "uvicorn", "jinja2", "httpx")
"""The modules serving needs (the ``serve`` extra)."""

_LAZY = {"create_app": ".app", "run_command": ".server", "serve": ".server", "load_target": ".server"}
__getattr__, __dir__ = lazy_exports(__name__, globals(), _LAZY)


def require() -> None:
    """A :class:`~rolecast.errors.ConfigError` naming the extra to install when a package of it is missing."""
    missing = [name for name in REQUIRES if importlib.util.find_spec(name) is None]
    if missing:
        raise ConfigError(f"rolecast serve needs {', '.join(missing)}: pip install 'rolecast[serve]'")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``rolecast serve``."""
    parser.add_argument("target", metavar="MODULE:ATTR",
                        help="a function returning a Team (a fresh one per task), or a Team "
                             "(e.g. examples.serve_team:build_team)")
    parser.add_argument("--host", default="127.0.0.1",
                        help="the address to listen on (default 127.0.0.1; any other needs the access token)")
    parser.add_argument("--port", type=int, default=8766, help="the port (default 8766; 0 picks a free one)")
    parser.add_argument("--token", help="the access token (default: a fresh one when the host is not loopback; "
                                        "also $ROLECAST_SERVE_TOKEN)")
    parser.add_argument("--store", metavar="PATH|URL",
                        help="the run store (default: $ROLECAST_STORE or ./.rolecast/runs.db)")
    parser.add_argument("--rounds", type=int, default=5, help="a task's rounds unless its client says (default 5)")
    parser.add_argument("--studio", action="store_true", help="serve the studio's pages too, at /")
    parser.add_argument("--max-tasks", type=int, default=256, dest="max_tasks",
                        help="the most tasks running at once; more are refused until one ends (default 256)")


__all__ = ["REQUIRES", "add_arguments", "create_app", "load_target", "require", "run_command", "serve"]
