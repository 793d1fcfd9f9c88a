"""The environment bus, teams and the command line."""

from loguru import logger

from .environment import Environment
from .team import Team

logger.disable("environment")

__all__ = ["Environment", "Team"]
