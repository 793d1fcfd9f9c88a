"""rolecast kernel: LLM providers, configuration, cost accounting, hooks, errors and test doubles.

The user-facing packages are ``memory``, ``actions``, ``roles`` and ``environment``;
this package holds what all of them need and knows nothing of roles.
"""

from loguru import logger

from .errors import *  # noqa: F403
from .errors import __all__ as _errors_all

__version__ = "0.1.0"

__all__ = ["__version__", *_errors_all]

# A library never configures logging: applications (examples, the CLI) enable it.
logger.disable("rolecast")
