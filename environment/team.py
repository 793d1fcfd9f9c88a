"""Team: an environment of hired roles, a budget, and the rounds of a project."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterable
from typing import Any, Literal

from loguru import logger
from pydantic import BaseModel, ConfigDict

from actions import UserRequirement
from memory import MESSAGE_ROUTE_TO_ALL, Message
from rolecast.config import Config
from rolecast.context import Context
from rolecast.cost import CostManager
from rolecast.errors import BudgetExceeded, NestedEventLoopError, UsageError
from rolecast.llm.base import BaseLLM
from rolecast.usage import reject_unknown_keywords
from roles import Role

from .environment import Environment

INIT_KEYWORDS = frozenset({"llm", "llms", "context", "config", "roles", "on_error", "env_desc"})


class History(list[Message]):
    """The messages of a run, oldest first.

    A list of :class:`~memory.Message`; its text (``str(history)``) is one message per
    line, and ``"text" in history`` looks for the text in it — as in MetaGPT, whose run
    history was that text.
    """

    def __str__(self) -> str:
        return "\n".join(str(m) for m in self)

    def __contains__(self, item: object) -> bool:
        if isinstance(item, str):
            return item in str(self)
        return super().__contains__(item)


def _check_budget_value(investment: Any) -> float:
    if isinstance(investment, bool) or not isinstance(investment, (int, float)) or not math.isfinite(investment) \
            or investment < 0:
        raise UsageError(f"the investment is a budget in dollars, a number >= 0; not {investment!r}")
    return float(investment)


class Team(BaseModel):
    """A team of roles working on one idea, round by round::

        team = Team(llm=my_model)           # or Team() for the configured default
        team.hire([SimpleCoder(), SimpleTester()])
        team.invest(3.0)                    # budget in dollars
        team.run_project("write a function that adds two numbers")
        history = await team.run(n_round=5)

    ``llm`` is the team's default model and ``llms`` its named services; ``on_error``
    chooses whether a failing role stops the team (``"stop"``) or is recorded in
    ``team.env.errors`` while the others go on (``"continue"``). An ``env`` given in code
    (``Team(env=Environment(desc=...))``) gets the team's context, model and ``on_error``;
    ``env_desc`` sets its description. Other keywords are a
    :class:`~rolecast.errors.UsageError` naming the closest one.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    env: Environment
    investment: float = 10.0
    idea: str = ""

    def __init__(
        self,
        llm: BaseLLM | None = None,
        llms: dict[str, BaseLLM] | None = None,
        *,
        context: Context | None = None,
        config: Config | None = None,
        roles: Iterable[Role] | None = None,
        on_error: Literal["stop", "continue"] = "stop",
        env_desc: str | None = None,
        **data: Any,
    ):
        reject_unknown_keywords("Team", data, {*type(self).model_fields, *INIT_KEYWORDS})
        if "investment" in data:
            data["investment"] = _check_budget_value(data["investment"])
        env = data.get("env")
        if env is None:
            ctx = context or Context(config=config, llm=llm, llms=llms)
            data["env"] = Environment(context=ctx, on_error=on_error)
        elif isinstance(env, Environment):
            if context is not None:
                env.context = context
                for role in env.roles.values():
                    role.set_env(env)
            elif config is not None:
                raise UsageError("Team(env=..., config=...): give the config to the env's Context instead")
            if llm is not None:
                env.context.set_llm(llm)
            for name, service in (llms or {}).items():
                env.context.add_service(name, service)
            env.on_error = on_error
        super().__init__(**data)
        if env_desc is not None:
            self.env.desc = env_desc
        self.env.context.cost_manager.max_budget = self.investment
        if roles:
            self.hire(roles)

    @property
    def context(self) -> Context:
        return self.env.context

    @property
    def cost_manager(self) -> CostManager:
        return self.env.context.cost_manager

    def hire(self, roles: Iterable[Role]) -> None:
        """Add roles to the team's environment."""
        self.env.add_roles(roles)

    def invest(self, investment: float) -> None:
        """Set the budget in dollars (>= 0; 0 allows only free models); the run stops with BudgetExceeded
        before passing it."""
        investment = _check_budget_value(investment)
        self.investment = investment
        self.cost_manager.max_budget = investment
        logger.info("investment: ${}", investment)

    def run_project(self, idea: str, send_to: str | Iterable[str] = "") -> None:
        """Publish the user's idea as a ``UserRequirement`` message (to everyone, or ``send_to``)."""
        self.idea = idea
        self.env.publish_message(
            Message(
                content=idea,
                role="user",
                cause_by=UserRequirement,
                sent_from="user",
                send_to=send_to or MESSAGE_ROUTE_TO_ALL,
            )
        )

    def start_project(self, idea: str, send_to: str | Iterable[str] = "") -> None:
        """MetaGPT's older name for :meth:`run_project`."""
        self.run_project(idea, send_to)

    def _check_balance(self) -> None:
        cm = self.cost_manager
        if cm.max_budget is not None and cm.total_cost >= cm.max_budget:
            raise BudgetExceeded(cm.total_cost, cm.max_budget)

    async def run(self, n_round: int = 3, idea: str = "", send_to: str = "") -> History:
        """Run up to ``n_round`` rounds (at least one), stopping early when every role is idle.

        Returns the environment's history (every message published, in order).
        """
        if isinstance(n_round, bool) or not isinstance(n_round, int) or n_round <= 0:
            raise UsageError(f"n_round is the number of rounds to run, a positive whole number; not {n_round!r}")
        if idea:
            self.run_project(idea=idea, send_to=send_to)
        rounds = 0
        while rounds < n_round:
            if self.env.is_idle:
                logger.debug("all roles are idle after {} round(s)", rounds)
                break
            rounds += 1
            self._check_balance()
            logger.debug("round {}/{}", rounds, n_round)
            await self.env.run()
        return History(self.env.history.get())

    def run_sync(self, n_round: int = 3, idea: str = "", send_to: str = "") -> History:
        """:meth:`run` for plain scripts. Refuses to run inside a running event loop."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.run(n_round=n_round, idea=idea, send_to=send_to))
        raise NestedEventLoopError("Team.run_sync() was called inside a running event loop; use `await team.run()`")
