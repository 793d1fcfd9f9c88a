"""Roles: agents with an identity, ordered actions, a memory and three react modes."""

from typing import TYPE_CHECKING

from rolecast import library_logging
from rolecast.core.lazy import lazy_exports
from rolecast.packages import own_package

own_package("actions")  # another `actions` package earlier on sys.path: a ConfigError naming it

from .role import CONSTRAINT_TEMPLATE, PREFIX_TEMPLATE, STATE_TEMPLATE, Role  # noqa: E402
from .role_context import MessageQueue, RoleContext, RoleReactMode  # noqa: E402

# ToolAgent brings the tool loops: loaded on first use (import stays light)
_LAZY = {"ToolAgent": ".tool_agent", "RemoteAgent": ".remote"}
__getattr__, __dir__ = lazy_exports(__name__, globals(), _LAZY)

if TYPE_CHECKING:
    from .remote import RemoteAgent
    from .tool_agent import ToolAgent

library_logging("roles")

__all__ = [
    "CONSTRAINT_TEMPLATE",
    "PREFIX_TEMPLATE",
    "STATE_TEMPLATE",
    "MessageQueue",
    "RemoteAgent",
    "Role",
    "RoleContext",
    "RoleReactMode",
    "ToolAgent",
]
