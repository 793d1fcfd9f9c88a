"""rolecast kernel: LLM providers, configuration, cost accounting, hooks, errors and test doubles.

The user-facing packages are ``memory``, ``actions``, ``roles`` and ``environment``;
this package holds what all of them need and knows nothing of roles.
"""

import sys

from loguru import logger

from .errors import *  # noqa: F403
from .errors import __all__ as _errors_all

__version__ = "0.1.0"

__all__ = ["__version__", "enable_logging", *_errors_all]

# A library never configures logging: applications (examples, the CLI) enable it.
logger.disable("rolecast")

_PACKAGES = ("rolecast", "memory", "actions", "roles", "environment")


def enable_logging(level: str = "INFO") -> None:
    """For applications (scripts, examples, the CLI): show rolecast's logs on stderr.

    The framework keeps loguru disabled, as a library should; this enables its
    packages and replaces loguru's default handler with one at ``level``.
    """
    for name in _PACKAGES:
        logger.enable(name)
    logger.remove()
    logger.add(sys.stderr, level=level)
