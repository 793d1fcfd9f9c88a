"""rolecast kernel: what the user-facing packages need, in rooms named for what they hold.

``core`` (configuration, models, serialization: the floor), ``accounting`` (cost, metering, rate
limits), ``control`` (hooks, approval), ``observe`` (console, tracing), ``llm`` (the model seam and
its providers), ``runs`` (the run store and log), ``studio``; beside them ``errors``, ``context``
(what one run shares), ``testing`` (scripted models) and ``cli``.

The user-facing packages are ``memory``, ``actions``, ``roles`` and ``environment``;
this package holds what all of them need and knows nothing of roles.
"""

import sys

from loguru import logger

from .errors import *  # noqa: F403
from .errors import __all__ as _errors_all

__version__ = "0.1.0"
"""rolecast's version."""

__all__ = ["__version__", "enable_logging", "library_logging", *_errors_all]

_PACKAGES = ("rolecast", "memory", "actions", "roles", "environment")
_enabled_level: str | None = None  # set by enable_logging; packages imported later honour it


def library_logging(name: str) -> None:
    """Called by each rolecast package at import: keep its logs off unless the application enabled them.

    A library never configures logging (loguru's rule): ``logger.disable`` — except when
    :func:`enable_logging` already ran, so that enabling works whatever the import order.
    """
    if _enabled_level is None:
        logger.disable(name)
    else:
        logger.enable(name)


library_logging("rolecast")

# `rolecast.actions`, `rolecast.roles`, `rolecast.environment`, `rolecast.memory`: the top-level packages
# under rolecast's own name (see rolecast.core.packages)
from .core.packages import TOP_LEVEL, check_packages, install_aliases  # noqa: E402

# a project's own folder named actions/ (or memory/ …) first on sys.path would hide rolecast's: said here, by
# name, rather than as an ImportError deep inside the first import of it
check_packages(*TOP_LEVEL)
install_aliases()


def enable_logging(level: str = "INFO") -> None:
    """For applications (scripts, examples, the CLI): show rolecast's logs on stderr.

    The framework keeps loguru disabled, as a library should; this enables its
    packages and replaces loguru's default handler with one at ``level``. The handler
    writes to whatever ``sys.stderr`` is when a line is logged, not to the stream it was
    when this ran: called in-process (``rolecast.cli.main`` in a test), a stream replaced
    and closed since would otherwise take every later line ("I/O operation on closed file").
    """
    global _enabled_level
    _enabled_level = level
    for name in _PACKAGES:
        logger.enable(name)
    logger.remove()
    logger.add(_CurrentStderr(), level=level)


class _CurrentStderr:
    """A stream that is always the current ``sys.stderr`` (colours where that is a terminal)."""

    def write(self, message: str) -> None:
        if sys.stderr is not None:
            sys.stderr.write(message)

    def flush(self) -> None:
        if sys.stderr is not None:
            sys.stderr.flush()

    def isatty(self) -> bool:
        return sys.stderr is not None and sys.stderr.isatty()
