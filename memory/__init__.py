"""Messages and memory: what is said on the bus and what each role remembers."""

from rolecast import library_logging

from .memory import Memory
from .message import (
    MESSAGE_ROUTE_TO_ALL,
    AIMessage,
    Message,
    SystemMessage,
    UserMessage,
    any_to_str,
    any_to_str_set,
)

library_logging("memory")

__all__ = [
    "MESSAGE_ROUTE_TO_ALL",
    "AIMessage",
    "Memory",
    "Message",
    "SystemMessage",
    "UserMessage",
    "any_to_str",
    "any_to_str_set",
]
