"""Roles: agents with an identity, ordered actions, a memory and three react modes."""

from loguru import logger

from .role import (
    CONSTRAINT_TEMPLATE,
    PREFIX_TEMPLATE,
    STATE_TEMPLATE,
    MessageQueue,
    Role,
    RoleContext,
    RoleReactMode,
)

logger.disable("roles")

__all__ = [
    "CONSTRAINT_TEMPLATE",
    "PREFIX_TEMPLATE",
    "STATE_TEMPLATE",
    "MessageQueue",
    "Role",
    "RoleContext",
    "RoleReactMode",
]
