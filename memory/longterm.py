"""Long-term memory for roles: prompts carry the recent and the relevant past, not all of it.

A role's whole history goes into its state-selection prompt and to its actions. That
grows every round: a small model's context overflows and an API model costs more each
turn. With a :class:`LongTermMemory` (``Role(long_term_memory=True)`` or an instance)
the history a prompt gets is

1. the last ``recent_k`` messages (the newest always),
2. then the older messages most relevant to the current news, found by embedding
   similarity (:class:`~memory.semantic.SemanticMemory`),

as many as fit in ``token_budget`` (estimated tokens; for a role, at most what its model's context
window leaves a prompt's history, counted in the model's tokens), in their original order. While
the whole history fits the budget it is used as is, and nothing is embedded.
"""

from __future__ import annotations

from collections.abc import Sequence

from rolecast.accounting.cost import estimate_tokens
from rolecast.errors import UsageError
from rolecast.llm.base import BaseLLM

from .memory import Memory
from .message import Message
from .semantic import SemanticMemory
from .vectors import VectorIndex

DEFAULT_TOKEN_BUDGET = 1200
QUERY_CHARS = 2000  # of the news, for the search query: the gist, not a whole document


def message_text(message: Message) -> str:
    """How a message reads in a prompt (and is embedded): ``role: content``."""
    return str(message)


def message_tokens(message: Message) -> int:
    """Estimated prompt tokens of one message, its line break included."""
    return estimate_tokens(message_text(message)) + 1


class LongTermMemory:
    """The recent and relevant part of a role's history, within a token budget (MetaGPT's name).

    ``semantic`` is where messages are indexed (default: a :class:`SemanticMemory` with
    ``embedder`` — else the local default — and ``index`` — else in memory). Messages are
    indexed lazily, the first time the history outgrows the budget, then as they come.
    """

    def __init__(
        self,
        semantic: SemanticMemory | None = None,
        *,
        embedder: BaseLLM | None = None,
        index: VectorIndex | None = None,
        recent_k: int = 6,
        relevant_k: int = 6,
        token_budget: int = DEFAULT_TOKEN_BUDGET,
        min_score: float | None = None,
    ):
        if recent_k < 1 or relevant_k < 0:
            raise UsageError("recent_k must be at least 1 and relevant_k at least 0")
        if token_budget < 1:
            raise UsageError("token_budget must be positive")
        if semantic is not None and (embedder is not None or index is not None):
            raise UsageError("give LongTermMemory a SemanticMemory or an embedder/index, not both")
        self.semantic = semantic if semantic is not None else SemanticMemory(embedder, index)
        self.recent_k = recent_k
        self.relevant_k = relevant_k
        self.token_budget = token_budget
        self.min_score = min_score
        self._indexed: set[str] = set()

    def __repr__(self) -> str:
        return (f"LongTermMemory(recent_k={self.recent_k}, relevant_k={self.relevant_k}, "
                f"token_budget={self.token_budget})")

    async def sync(self, messages: Sequence[Message]) -> int:
        """Index the messages not indexed yet (one embedding call per batch); returns how many."""
        fresh = [m for m in messages if m.id not in self._indexed and m.content.strip()]
        if fresh:
            held = await self.semantic.index.has(m.id for m in fresh)  # a persistent index may know them
            todo = [m for m in fresh if m.id not in held]
            if todo:
                await self.semantic.save_many(
                    [message_text(m) for m in todo],
                    ids=[m.id for m in todo],
                    metadata=[{"sent_from": m.sent_from, "cause_by": m.cause_by} for m in todo],
                )
            self._indexed.update(m.id for m in fresh)
            return len(todo)
        return 0

    async def context(
        self, memory: Memory | Sequence[Message], news: Sequence[Message] = (), *, llm: BaseLLM | None = None,
        budget: int | None = None,
    ) -> list[Message]:
        """The history a prompt should carry: recent + relevant to ``news``, within the budget, oldest first.

        ``llm`` (the model the prompts go to): messages are counted in its tokens; ``budget``: the tokens
        its context window leaves a prompt's history, when less than ``token_budget`` (a role gives
        both, :func:`roles.fitting.history_budget`): the prompt then carries what was chosen, the
        relevant old messages included, and fitting it to the window leaves nothing out.
        """
        history = memory.get() if isinstance(memory, Memory) else list(memory)
        if not history:
            return []
        budget = self.token_budget if budget is None else max(1, min(self.token_budget, budget))
        if llm is None:
            costs = {m.id: message_tokens(m) for m in history}
        else:
            texts = [message_text(m) for m in history]
            if 4 * sum(map(len, texts)) + 16 * len(texts) <= budget:  # a safe bound: surely fits, not counted
                return history
            costs = {m.id: c + 1 for m, c in zip(history, await llm.count_texts(texts), strict=True)}
        if sum(costs.values()) <= budget:
            return history
        await self.sync(history)
        recent = history[-self.recent_k :]
        chosen: dict[str, Message] = {}
        spent = 0
        for i, message in enumerate(reversed(recent)):
            if i == 0 or spent + costs[message.id] <= budget:  # the newest always
                chosen[message.id] = message
                spent += costs[message.id]
        query = "\n".join(m.content for m in (news or recent[-1:]))[-QUERY_CHARS:]
        if self.relevant_k and query.strip():
            by_id = {m.id: m for m in history}
            records = await self.semantic.search(query, k=self.relevant_k + len(recent), min_score=self.min_score)
            taken = 0
            for record in records:
                found = by_id.get(record.id)
                if found is None or found.id in chosen or taken >= self.relevant_k:
                    continue
                if spent + costs[found.id] <= budget:
                    chosen[found.id] = found
                    spent += costs[found.id]
                    taken += 1
        return [m for m in history if m.id in chosen]

    def forget(self) -> None:
        """Forget which messages were indexed (they are checked against the index again)."""
        self._indexed.clear()


__all__ = ["DEFAULT_TOKEN_BUDGET", "LongTermMemory", "message_text", "message_tokens"]
