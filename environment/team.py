"""Team: an environment of hired roles, a budget, and the rounds of a project."""

from __future__ import annotations

import asyncio
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
from roles import Role

from .environment import Environment


class Team(BaseModel):
    """A team of roles working on one idea, round by round::

        team = Team(llm=my_model)           # or Team() for the configured default
        team.hire([SimpleCoder(), SimpleTester()])
        team.invest(3.0)                    # budget in dollars
        team.run_project("write a function that adds two numbers")
        history = await team.run(n_round=5)

    ``llm`` is the team's default model and ``llms`` its named services; ``on_error``
    chooses whether a failing role stops the team (``"stop"``) or is recorded in
    ``team.env.errors`` while the others go on (``"continue"``).
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
        **data: Any,
    ):
        if on_error not in ("stop", "continue"):
            raise UsageError(f'Team(on_error={on_error!r}): choose "stop" or "continue"')
        if "env" not in data:
            ctx = context or Context(config=config, llm=llm, llms=llms)
            data["env"] = Environment(context=ctx, on_error=on_error)
        super().__init__(**data)
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
        """Set the budget in dollars; the run stops with BudgetExceeded before passing it."""
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

    async def run(self, n_round: int = 3, idea: str = "", send_to: str = "") -> list[Message]:
        """Run up to ``n_round`` rounds, stopping early when every role is idle.

        Returns the environment's history (every message published, in order).
        """
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
        return self.env.history.get()

    def run_sync(self, n_round: int = 3, idea: str = "", send_to: str = "") -> list[Message]:
        """:meth:`run` for plain scripts. Refuses to run inside a running event loop."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.run(n_round=n_round, idea=idea, send_to=send_to))
        raise NestedEventLoopError("Team.run_sync() was called inside a running event loop; use `await team.run()`")
