"""Token usage, cost and budget accounting.

One :class:`CostManager` belongs to a team (its :class:`~rolecast.context.Context`).
Every LLM call goes through :meth:`CostManager.check` *before* it is made and
:meth:`CostManager.record` after, so a budget can never be passed by more than the
one call whose prompt estimate fitted.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from loguru import logger

from .errors import BudgetExceeded

# US dollars per one million tokens: (input, output). Prefix-matched, longest first,
# so dated snapshots ("gpt-4o-mini-2024-07-18") find their family's price.
PRICES_PER_MTOK: dict[str, tuple[float, float]] = {
    "gpt-5": (1.25, 10.0),
    "gpt-5-mini": (0.25, 2.0),
    "gpt-5-nano": (0.05, 0.4),
    "gpt-4.1": (2.0, 8.0),
    "gpt-4.1-mini": (0.4, 1.6),
    "gpt-4.1-nano": (0.1, 0.4),
    "gpt-4o": (2.5, 10.0),
    "gpt-4o-mini": (0.15, 0.6),
    "gpt-4-turbo": (10.0, 30.0),
    "gpt-4": (30.0, 60.0),
    "gpt-3.5-turbo": (0.5, 1.5),
    "o1": (15.0, 60.0),
    "o1-mini": (1.1, 4.4),
    "o3": (2.0, 8.0),
    "o3-mini": (1.1, 4.4),
    "o4-mini": (1.1, 4.4),
    "deepseek-chat": (0.27, 1.1),
    "deepseek-reasoner": (0.55, 2.19),
    "qwen-turbo": (0.05, 0.2),
    "qwen-plus": (0.4, 1.2),
    "qwen-max": (1.6, 6.4),
    "claude-3-5-haiku": (0.8, 4.0),
    "claude-3-5-sonnet": (3.0, 15.0),
    "claude-sonnet-4": (3.0, 15.0),
    "claude-opus-4": (15.0, 75.0),
    "mistral-large": (2.0, 6.0),
    "mistral-small": (0.2, 0.6),
    # embedding models: input tokens only
    "text-embedding-3-small": (0.02, 0.0),
    "text-embedding-3-large": (0.13, 0.0),
    "text-embedding-ada-002": (0.10, 0.0),
}


def estimate_tokens(text: str) -> int:
    """A cheap, provider-independent token estimate (about four characters a token)."""
    return max(1, (len(text) + 3) // 4) if text else 0


@dataclass
class UsageTotals:
    """Running totals for one role, one model or the whole team."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    calls: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def add(self, prompt_tokens: int, completion_tokens: int, cost: float) -> None:
        self.prompt_tokens += prompt_tokens
        self.completion_tokens += completion_tokens
        self.cost += cost
        self.calls += 1


@dataclass
class CostManager:
    """Counts tokens and dollars per role, per model and in total, and enforces a budget.

    ``max_budget=None`` means no limit. Models missing from the price table cost 0;
    each such model is reported once in the log, so a silent zero never surprises.
    """

    max_budget: float | None = None
    prices: dict[str, tuple[float, float]] = field(default_factory=lambda: dict(PRICES_PER_MTOK))
    total: UsageTotals = field(default_factory=UsageTotals)
    by_role: dict[str, UsageTotals] = field(default_factory=dict)
    by_model: dict[str, UsageTotals] = field(default_factory=dict)
    _unpriced_warned: set[str] = field(default_factory=set, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def total_cost(self) -> float:
        return self.total.cost

    def price_of(self, model: str) -> tuple[float, float] | None:
        """(input, output) dollars per million tokens, or None when the model is unknown."""
        name = model.lower().rsplit("/", 1)[-1]
        if name in self.prices:
            return self.prices[name]
        best = max((p for p in self.prices if name.startswith(p)), key=len, default=None)
        return self.prices[best] if best else None

    def cost_of(self, model: str, prompt_tokens: int, completion_tokens: int, *, free: bool = False) -> float:
        if free:
            return 0.0
        price = self.price_of(model)
        if price is None:
            if model not in self._unpriced_warned:
                self._unpriced_warned.add(model)
                logger.warning("model {!r} is not in the price table; its calls are counted at $0", model)
            return 0.0
        return (prompt_tokens * price[0] + completion_tokens * price[1]) / 1_000_000

    def check(self, model: str, prompt_tokens: int, *, role: str | None = None, free: bool = False) -> None:
        """Raise :class:`BudgetExceeded` if a call with this prompt would pass the budget."""
        if self.max_budget is None:
            return
        projected = self.total.cost + self.cost_of(model, prompt_tokens, 0, free=free)
        if self.total.cost >= self.max_budget or projected > self.max_budget:
            raise BudgetExceeded(self.total.cost, self.max_budget, role=role, model=model)

    def record(
        self, model: str, prompt_tokens: int, completion_tokens: int, *, role: str | None = None,
        free: bool = False,
    ) -> float:
        """Add one call's usage; returns its cost."""
        cost = self.cost_of(model, prompt_tokens, completion_tokens, free=free)
        with self._lock:
            self.total.add(prompt_tokens, completion_tokens, cost)
            self.by_model.setdefault(model, UsageTotals()).add(prompt_tokens, completion_tokens, cost)
            self.by_role.setdefault(role or "<none>", UsageTotals()).add(prompt_tokens, completion_tokens, cost)
        return cost

    def summary(self) -> str:
        """One line per role plus the total, for logs and the CLI."""
        lines = [
            f"{name}: {t.calls} calls, {t.prompt_tokens}+{t.completion_tokens} tokens, ${t.cost:.6f}"
            for name, t in sorted(self.by_role.items())
        ]
        budget = "no limit" if self.max_budget is None else f"${self.max_budget:.4f}"
        lines.append(
            f"total: {self.total.calls} calls, {self.total.total_tokens} tokens, "
            f"${self.total.cost:.6f} of {budget}"
        )
        return "\n".join(lines)
