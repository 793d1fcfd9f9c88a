"""Token usage, cost and budget accounting.

One :class:`CostManager` belongs to a team (its :class:`~rolecast.context.Context`).
The budget is a hard cap: every model call *reserves* its worst case — a conservative
count of its prompt plus its ``max_tokens`` — before it is made (:meth:`CostManager.reserve`),
and settles its true cost after (:meth:`CostManager.settle`). A call whose reservation
would take spent-plus-reserved past the budget is refused with
:class:`~rolecast.errors.BudgetExceeded`, so calls running together cannot pass the
budget together. Only an answer longer than its ``max_tokens`` (a server or test
double that ignores it) can overrun, and by no more than that answer's excess.

Every attempt is counted, also one that failed (``failed`` in the totals), with the
tokens that are known of it.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
from dataclasses import dataclass, field

from loguru import logger

from ..errors import BudgetExceeded

# US dollars per one million tokens: (input, output). Prefix-matched, longest first,
# so dated snapshots ("gpt-4o-mini-2024-07-18") find their family's price.
#: how often a call waiting for a model's lone call in flight looks again (see CostManager.admit)
_SOLO_POLL_S = 0.002
#: the by_role key of calls made outside any role (a kernel or a planner called directly)
NO_ROLE = "<none>"

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
    "claude-3-haiku": (0.25, 1.25),
    "claude-3-5-haiku": (0.8, 4.0),
    "claude-3-5-sonnet": (3.0, 15.0),
    "claude-3-7-sonnet": (3.0, 15.0),
    "claude-sonnet-4": (3.0, 15.0),  # 4, 4.5, 4.6
    "claude-haiku-4": (1.0, 5.0),  # 4.5
    "claude-opus-4": (15.0, 75.0),  # 4 and 4.1
    "claude-opus-4-5": (5.0, 25.0),
    "claude-opus-4-6": (5.0, 25.0),
    # Google Gemini API (paid tier; prompts up to 200k tokens)
    "gemini-3-pro": (2.0, 12.0),
    "gemini-3-flash": (0.5, 3.0),
    "gemini-2.5-pro": (1.25, 10.0),
    "gemini-2.5-flash": (0.3, 2.5),
    "gemini-2.5-flash-lite": (0.1, 0.4),
    "gemini-2.0-flash": (0.1, 0.4),
    "gemini-2.0-flash-lite": (0.075, 0.3),
    "gemini-embedding-001": (0.15, 0.0),
    "mistral-large": (2.0, 6.0),
    "mistral-medium": (0.4, 2.0),
    "mistral-small": (0.2, 0.6),
    "codestral": (0.3, 0.9),
    # Moonshot (Kimi), Zhipu (GLM), 01.AI (Yi)
    "kimi-k2": (0.6, 2.5),
    "glm-4.6": (0.6, 2.2),
    "glm-4.5": (0.6, 2.2),
    "glm-4.5-air": (0.2, 1.1),
    "yi-lightning": (0.14, 0.14),
    # embedding models: input tokens only
    "text-embedding-3-small": (0.02, 0.0),
    "text-embedding-3-large": (0.13, 0.0),
    "text-embedding-ada-002": (0.10, 0.0),
}


def estimate_tokens(text: str) -> int:
    """A cheap, provider-independent token estimate (about four characters a token)."""
    return (len(text) + 3) // 4 if text else 0  # (at least 1 for any text: no max() needed)


def max_prompt_tokens(text: str, messages: int = 1) -> int:
    """A conservative count of the tokens ``text`` takes, for budget reservations.

    Three ASCII characters a token (real tokenizers average about four on English and
    code) and two tokens for every other character (CJK takes about one, most emoji two),
    plus a few per chat message for roles and separators. Never below the four-characters
    estimate that usage is counted with when a server reports none.
    """
    other = len(text) - len(text.encode("ascii", errors="ignore"))
    return -(-(len(text) - other) // 3) + 2 * other + 4 * messages + 3


@dataclass(frozen=True, init=False)
class Reservation:
    """The worst-case cost a call set aside before it started; settled or released exactly once."""

    id: int
    model: str
    role: str | None
    amount: float
    free: bool = False

    def __init__(self, id: int, model: str, role: str | None, amount: float, free: bool = False) -> None:
        # the frozen dataclass's own __init__ sets each field through object.__setattr__ (a third of
        # a metered call's bookkeeping); the instance's dict is filled directly instead
        values = self.__dict__
        values["id"] = id
        values["model"] = model
        values["role"] = role
        values["amount"] = amount
        values["free"] = free


@dataclass(slots=True)
class UsageTotals:
    """Running totals for one role, one model or the whole team (slotted: a team of a million roles
    keeps a million of these)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    calls: int = 0
    failed: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def attempts(self) -> int:
        """Every request made: answered calls plus failed attempts."""
        return self.calls + self.failed

    def add(self, prompt_tokens: int, completion_tokens: int, cost: float, *, failed: bool = False) -> None:
        _add_to((self,), prompt_tokens, completion_tokens, cost, failed)


def _add_to(
    totals: tuple[UsageTotals, ...], prompt_tokens: int, completion_tokens: int, cost: float, failed: bool
) -> None:
    """Add one attempt to each of ``totals`` (one call for the team's, the model's and the role's)."""
    for t in totals:
        t.prompt_tokens += prompt_tokens
        t.completion_tokens += completion_tokens
        if cost:  # (a free call leaves the shared 0.0: `+= 0.0` made a float a role)
            t.cost += cost
        if failed:
            t.failed += 1
        else:
            t.calls += 1


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
    reserved: float = 0.0
    _open: dict[int, Reservation] = field(default_factory=dict, repr=False)
    _ids: itertools.count[int] = field(default_factory=itertools.count, repr=False)
    _unpriced_warned: set[str] = field(default_factory=set, repr=False)
    _lock: threading.RLock = field(default_factory=threading.RLock, repr=False)
    #: per model, under a budget: whether its answers kept within their reservations (True), passed
    #: one (False), or nobody knows yet (absent). Until a model is trusted its calls run one at a time.
    honours_max_tokens: dict[str, bool] = field(default_factory=dict)
    _solo: set[str] = field(default_factory=set, repr=False)  # models with their one call in flight
    # the price table's names when the prefix matches below were found, and the matches (name -> key or None)
    _prefix_keys: frozenset[str] = field(default_factory=frozenset, repr=False)
    _prefix_of: dict[str, str | None] = field(default_factory=dict, repr=False)

    @property
    def total_cost(self) -> float:
        return self.total.cost

    def price_of(self, model: str) -> tuple[float, float] | None:
        """(input, output) dollars per million tokens, or None when the model is unknown."""
        name = model.lower().rsplit("/", 1)[-1]
        prices = self.prices
        if name in prices:
            return prices[name]
        # the longest name of the table that prefixes it: found once while the table's names stay the
        # same (its prices are read from the table each time; ``prices`` may be changed or replaced)
        if self._prefix_keys != prices.keys():
            self._prefix_keys = frozenset(prices)
            self._prefix_of = {}
        prefix_of = self._prefix_of
        if name in prefix_of:
            best = prefix_of[name]
        else:
            best = prefix_of[name] = max((p for p in prices if name.startswith(p)), key=len, default=None)
        return prices[best] if best else None

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
        """Raise :class:`BudgetExceeded` if a call with this prompt would pass the budget (reservations included)."""
        self.release(self.reserve(model, prompt_tokens, 0, role=role, free=free))

    def reserve(
        self, model: str, prompt_tokens: int, max_completion_tokens: int, *, role: str | None = None,
        free: bool = False,
    ) -> Reservation:
        """Set aside a call's worst case; :class:`BudgetExceeded` if spent + reserved + it would pass the budget."""
        amount = 0.0 if free else self.cost_of(model, prompt_tokens, max_completion_tokens)
        with self._lock:
            if self.max_budget is not None and (
                self.total.cost >= self.max_budget or self.total.cost + self.reserved + amount > self.max_budget
            ):
                raise BudgetExceeded(
                    self.total.cost, self.max_budget, role=role, model=model, reserved=self.reserved, needed=amount
                )
            reservation = Reservation(next(self._ids), model, role, amount, free)
            self._open[reservation.id] = reservation
            self.reserved += amount
        return reservation

    async def admit(self, model: str, *, free: bool = False) -> str | None:
        """Wait until a call to ``model`` may start; returns a token for :meth:`dismiss` (None: nothing to give back).

        A reservation bounds a call only if the model stops at ``max_tokens``. Under a budget, the
        calls to a model run one at a time until one answer has kept within its reservation (the
        model honours ``max_tokens``: from then on they run concurrently); a model that passes its
        reservation runs one at a time for good. A model that ignores ``max_tokens`` therefore
        passes the budget by at most one answer's excess, never by the excess of every call in flight.
        """
        if free or self.max_budget is None:
            return None
        while True:
            with self._lock:
                if self.honours_max_tokens.get(model) is True:
                    return None
                if model not in self._solo:
                    self._solo.add(model)
                    return model
            await asyncio.sleep(_SOLO_POLL_S)

    def dismiss(self, token: str | None) -> None:
        """End the call :meth:`admit` let start alone (idempotent)."""
        if token is not None:
            with self._lock:
                self._solo.discard(token)

    def release(self, reservation: Reservation) -> None:
        """Give a reservation back without charging anything (idempotent)."""
        with self._lock:
            self._release_locked(reservation)

    def _release_locked(self, reservation: Reservation) -> None:
        """:meth:`release`'s work, for a caller that holds the lock."""
        if self._open.pop(reservation.id, None) is not None:
            self.reserved = _at_least_zero(self.reserved - reservation.amount)

    def settle(self, reservation: Reservation, prompt_tokens: int, completion_tokens: int) -> float:
        """Release ``reservation`` and charge the call's true usage; returns its cost."""
        with self._lock:
            self._release_locked(reservation)
            model = reservation.model
            cost = 0.0 if reservation.free else self.cost_of(model, prompt_tokens, completion_tokens)
            self._count(model, reservation.role, prompt_tokens, completion_tokens, cost, False)
            if not reservation.free and self.max_budget is not None:
                kept = cost <= reservation.amount * (1 + 1e-9)
                if not kept:
                    logger.warning("model {!r} answered past its max_tokens (cost ${:.6f} > reserved ${:.6f}); "
                                   "its calls now run one at a time", reservation.model, cost, reservation.amount)
                self.honours_max_tokens[reservation.model] = kept and self.honours_max_tokens.get(
                    reservation.model, True)
            return cost

    def record(
        self, model: str, prompt_tokens: int, completion_tokens: int, *, role: str | None = None,
        free: bool = False,
    ) -> float:
        """Add one call's usage; returns its cost."""
        return self._add(model, prompt_tokens, completion_tokens, role=role, free=free, failed=False)

    def record_failure(
        self, model: str, prompt_tokens: int = 0, completion_tokens: int = 0, *, role: str | None = None,
        free: bool = False,
    ) -> float:
        """Count one failed attempt, charging the tokens known of it (a cut stream's partial answer)."""
        return self._add(model, prompt_tokens, completion_tokens, role=role, free=free, failed=True)

    def _add(
        self, model: str, prompt_tokens: int, completion_tokens: int, *, role: str | None, free: bool, failed: bool
    ) -> float:
        cost = 0.0 if free else self.cost_of(model, prompt_tokens, completion_tokens)
        with self._lock:
            self._count(model, role, prompt_tokens, completion_tokens, cost, failed)
        return cost

    def _count(
        self, model: str, role: str | None, prompt_tokens: int, completion_tokens: int, cost: float, failed: bool
    ) -> None:
        """Add one attempt to the totals (the caller holds the lock)."""
        role = role or NO_ROLE
        by_model = self.by_model.get(model)
        if by_model is None:
            by_model = self.by_model[model] = UsageTotals()
        by_role = self.by_role.get(role)
        if by_role is None:
            by_role = self.by_role[role] = UsageTotals()
        _add_to((self.total, by_model, by_role), prompt_tokens, completion_tokens, cost, failed)

    def summary(self) -> str:
        """One line per role plus the total, for logs and the CLI (calls made outside any role:
        "outside roles")."""
        lines = [
            f"{'outside roles' if name == NO_ROLE else name}: {t.calls} calls{_failed(t)}, "
            f"{t.prompt_tokens}+{t.completion_tokens} tokens, ${t.cost:.6f}"
            for name, t in sorted(self.by_role.items())
        ]
        budget = "no limit" if self.max_budget is None else f"${self.max_budget:.4f}"
        lines.append(
            f"total: {self.total.calls} calls{_failed(self.total)}, {self.total.total_tokens} tokens, "
            f"${self.total.cost:.6f} of {budget}"
        )
        return "\n".join(lines)


def _at_least_zero(amount: float) -> float:
    """``max(0.0, amount)`` without max()'s argument parsing (every call settles a reservation)."""
    return amount if amount > 0.0 else 0.0


def _failed(totals: UsageTotals) -> str:
    return f" (+{totals.failed} failed)" if totals.failed else ""


__all__ = [
    "NO_ROLE",
    "PRICES_PER_MTOK",
    "CostManager",
    "Reservation",
    "UsageTotals",
    "estimate_tokens",
    "max_prompt_tokens",
]
