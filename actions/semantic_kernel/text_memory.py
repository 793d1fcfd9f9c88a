"""Semantic Kernel's TextMemory plugin: ``recall`` and ``save`` over a :class:`~memory.SemanticMemory`.

::

    memory = SemanticMemory()
    kernel.add_plugin(TextMemoryPlugin(memory), "TextMemory")
    await kernel.invoke("TextMemory.save", input="Bob is allergic to peanuts")
    answer = kernel.add_function("Chat", prompt="Facts: {{recall $input}}\\nQuestion: {{$input}}")

The same functions are tools for the agent loops (``ToolAgent(tools=[...])`` / a kernel's
registry): a model can remember and look things up itself.
"""

from __future__ import annotations

import json
from typing import Annotated

from memory import SemanticMemory
from rolecast.errors import ToolError

from ..tools import tool

MAX_RECALL = 20  # memories one recall may return: a prompt is not a database dump


class TextMemoryPlugin:
    """``recall(input, limit, relevance)`` and ``save(input, key)`` on a semantic memory.

    ``recall`` answers the best memory's text for ``limit=1`` (Semantic Kernel's default)
    and a JSON list of texts otherwise; nothing relevant enough gives ``""``, so a template
    renders no invented fact. ``relevance`` is the minimum cosine score (default
    ``min_relevance``).
    """

    def __init__(self, memory: SemanticMemory, *, min_relevance: float | None = None):
        self.memory = memory
        self.min_relevance = min_relevance

    @tool
    async def recall(
        self,
        input: Annotated[str, "what to recall: a question or a topic"],
        limit: Annotated[int, "how many memories to return"] = 1,
        relevance: Annotated[float | None, "the minimum similarity score, from -1 to 1"] = None,
    ) -> str:
        """Recall the saved memories most relevant to the input."""
        if not 1 <= limit <= MAX_RECALL:
            raise ToolError(f"recall: limit must be between 1 and {MAX_RECALL}, not {limit}")
        if not input.strip():
            return ""
        threshold = relevance if relevance is not None else self.min_relevance
        records = await self.memory.search(input, k=limit, min_score=threshold)
        if limit == 1:
            return records[0].text if records else ""
        return json.dumps([r.text for r in records], ensure_ascii=False) if records else ""

    @tool
    async def save(
        self,
        input: Annotated[str, "the text to remember"],
        key: Annotated[str, "an id for the memory; saving with the same id replaces it"] = "",
    ) -> str:
        """Save a text in memory, to recall later by meaning."""
        if not input.strip():
            raise ToolError("save: there is no text to remember")
        return await self.memory.save(input, id=key or None)


__all__ = ["MAX_RECALL", "TextMemoryPlugin"]
