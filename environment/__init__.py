"""The environment bus, teams and the command line."""

from rolecast import library_logging

from .environment import Environment
from .subscription import SubscriptionRunner
from .team import History, Team
from .teams import coding_team

library_logging("environment")

__all__ = ["Environment", "History", "SubscriptionRunner", "Team", "coding_team"]
