"""Roles: agents with an identity, ordered actions, a memory and three react modes."""

from typing import TYPE_CHECKING

from rolecast import library_logging
from rolecast.core.lazy import lazy_exports

from .role import CONSTRAINT_TEMPLATE, PREFIX_TEMPLATE, STATE_TEMPLATE, Role
from .role_context import MessageQueue, RoleContext, RoleReactMode

# ToolAgent brings the tool loops: loaded on first use (import stays light)
_LAZY = {"ToolAgent": ".tool_agent", "RemoteAgent": ".remote",
         **dict.fromkeys(("Engineer", "QaEngineer", "final_code"), ".coding")}
__getattr__, __dir__ = lazy_exports(__name__, globals(), _LAZY)

if TYPE_CHECKING:
    from .coding import Engineer, QaEngineer, final_code
    from .remote import RemoteAgent
    from .tool_agent import ToolAgent

library_logging("roles")

__all__ = [
    "CONSTRAINT_TEMPLATE",
    "PREFIX_TEMPLATE",
    "STATE_TEMPLATE",
    "Engineer",
    "MessageQueue",
    "QaEngineer",
    "RemoteAgent",
    "Role",
    "RoleContext",
    "RoleReactMode",
    "ToolAgent",
    "final_code",
]
