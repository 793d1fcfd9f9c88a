"""Messages and memory: what is said on the bus and what each role remembers.

Semantic memory (texts found again by meaning) is :class:`SemanticMemory` over a
:class:`VectorIndex`; :class:`LongTermMemory` keeps a role's prompts to the recent and
the relevant part of its history.
"""

from rolecast import library_logging

from .archive import MessageArchive, RunLogArchive, attach_archive
from .longterm import LongTermMemory
from .memory import Memory
from .message import (
    MESSAGE_ROUTE_TO_ALL,
    AIMessage,
    InstructContent,
    Message,
    Resource,
    SystemMessage,
    UserMessage,
    allow_instruct_modules,
    any_to_name,
    any_to_str,
    any_to_str_set,
    register_instruct_model,
)
from .semantic import MemoryRecord, SemanticMemory
from .vector_sqlite import SQLiteVectorIndex
from .vectors import Hit, IndexItem, InMemoryVectorIndex, VectorIndex

library_logging("memory")

__all__ = [
    "MESSAGE_ROUTE_TO_ALL",
    "AIMessage",
    "Hit",
    "InMemoryVectorIndex",
    "IndexItem",
    "InstructContent",
    "LongTermMemory",
    "Memory",
    "MemoryRecord",
    "Message",
    "MessageArchive",
    "Resource",
    "RunLogArchive",
    "SQLiteVectorIndex",
    "SemanticMemory",
    "SystemMessage",
    "UserMessage",
    "VectorIndex",
    "allow_instruct_modules",
    "any_to_name",
    "any_to_str",
    "any_to_str_set",
    "attach_archive",
    "register_instruct_model",
]
