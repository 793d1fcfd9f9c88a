"""rolecast studio: a local web page to watch, inspect, compare and steer runs.

::

    rolecast studio [--store PATH] [--host 127.0.0.1] [--port 8765] [--open]

Needs the ``studio`` extra (``pip install 'rolecast[studio]'``: Starlette, uvicorn, Jinja2).
Importing this package is light: the web app (:mod:`.app`) and the server (:mod:`.server`)
load when first used, so ``rolecast`` and its command line do not pay for them.

* :mod:`.source` — the one module that reads (and steers) runs: the rest of the studio asks it;
* :mod:`.summary` — what is kept of each run between requests, and how much;
* :mod:`.shape` — rounds → turns, the message graph's layout, two runs lined up (pure Python;
  :mod:`.align` lines them up in bounded time);
* :mod:`.text` — how a model's or a person's text is written on a page (folded, code as code);
* :mod:`.app` — the Starlette routes and the templates; :mod:`.guard` — the access token, Host,
  Origin and CSRF checks;
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
    from .server import run_command, serve
    from .source import RunSource

#: the packages of the ``studio`` extra
REQUIRES = ("starlette", "uvicorn", "jinja2")
"""The modules the studio needs (the ``studio`` extra)."""

_LAZY = {"create_app": ".app", "run_command": ".server", "serve": ".server", "RunSource": ".source"}
__getattr__, __dir__ = lazy_exports(__name__, globals(), _LAZY)


def require() -> None:
    """A :class:`~rolecast.errors.ConfigError` naming the extra to install when a package of it is missing."""
    missing = [name for name in REQUIRES if importlib.util.find_spec(name) is None]
    if missing:
        raise ConfigError(f"rolecast studio needs {', '.join(missing)}: pip install 'rolecast[studio]'")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``rolecast studio``."""
    parser.add_argument("--store", help="the run store (default: $ROLECAST_STORE or ./.rolecast/runs.db)")
    parser.add_argument("--host", default="127.0.0.1",
                        help="the address to listen on (default 127.0.0.1; any other needs the access token)")
    parser.add_argument("--port", type=int, default=8765, help="the port (default 8765; 0 picks a free one)")
    parser.add_argument("--token", help="the access token (default: a fresh one when the host is not loopback; "
                                        "also $ROLECAST_STUDIO_TOKEN)")
    parser.add_argument("--open", action="store_true", help="open the page in the web browser")


__all__ = ["REQUIRES", "RunSource", "add_arguments", "create_app", "require", "run_command", "serve"]
