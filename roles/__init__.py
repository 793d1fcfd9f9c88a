"""Roles: agents with an identity, ordered actions, a memory and three react modes."""

from rolecast import library_logging

from .context import MessageQueue, RoleContext, RoleReactMode
from .role import CONSTRAINT_TEMPLATE, PREFIX_TEMPLATE, STATE_TEMPLATE, Role
from .tool_agent import ToolAgent

library_logging("roles")

__all__ = [
    "CONSTRAINT_TEMPLATE",
    "PREFIX_TEMPLATE",
    "STATE_TEMPLATE",
    "MessageQueue",
    "Role",
    "RoleContext",
    "RoleReactMode",
    "ToolAgent",
]
