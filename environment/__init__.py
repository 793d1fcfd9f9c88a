"""The environment bus, teams and the command line."""

from loguru import logger

from .environment import Environment
from .subscription import SubscriptionRunner
from .team import History, Team

logger.disable("environment")

__all__ = ["Environment", "History", "SubscriptionRunner", "Team"]
