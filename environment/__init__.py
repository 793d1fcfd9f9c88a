"""The environment bus, teams and the command line."""

from rolecast import library_logging

from .environment import Environment
from .team import Team

library_logging("environment")

__all__ = ["Environment", "Team"]
