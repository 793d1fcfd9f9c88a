"""Messages and memory: what is said on the bus and what each role remembers."""

from loguru import logger

from .memory import Memory
from .message import (
    MESSAGE_ROUTE_TO_ALL,
    AIMessage,
    InstructContent,
    Message,
    SystemMessage,
    UserMessage,
    allow_instruct_modules,
    any_to_str,
    any_to_str_set,
    register_instruct_model,
)

logger.disable("memory")

__all__ = [
    "MESSAGE_ROUTE_TO_ALL",
    "AIMessage",
    "InstructContent",
    "Memory",
    "Message",
    "SystemMessage",
    "UserMessage",
    "allow_instruct_modules",
    "any_to_str",
    "any_to_str_set",
    "register_instruct_model",
]
