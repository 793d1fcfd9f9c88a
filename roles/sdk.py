"""MetaGPT's exported role API (its "SDK"): ``think``/``act``, ``is_watch``, ``action_description``,
and per-role configuration (``Role(config=...)``). A mixin of :class:`~roles.Role`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from actions import Action
from actions.action_node import ActionOutput
from actions.perform import perform
from rolecast.context import Context
from rolecast.core.config import Config
from rolecast.errors import UsageError
from rolecast.llm import create_llm
from rolecast.llm.base import BaseLLM

from .role_context import RoleContext

if TYPE_CHECKING:
    from memory import Message


class MetaGPTSDK:
    """What MetaGPT exports on a role besides the turn itself."""

    if TYPE_CHECKING:
        name: str
        profile: str
        rc: RoleContext
        actions: list[Action]
        _config: Config | None
        _config_llm: BaseLLM | None

        @property
        def context(self) -> Context: ...

        @property
        def _setting(self) -> str: ...

        def remember(self, message: Message) -> None: ...

        async def _observe(self) -> int: ...

        async def _think(self) -> bool: ...

        async def _act(self) -> Message: ...

    @property
    def configured_llm(self) -> BaseLLM | None:
        """The model of the role's own configuration (``Role(config=...)``), made on first use; else None."""
        if self._config is not None and self._config_llm is None:
            self._config_llm = create_llm(self._config.llm)
        return self._config_llm

    @property
    def own_config(self) -> Config | None:
        """The configuration given to this role (None: the context's)."""
        return self._config

    @property
    def config(self) -> Config:
        """The configuration the role's model comes from: its own, else its context's."""
        return self._config if self._config is not None else self.context.config

    @config.setter
    def config(self, value: Config) -> None:
        if not isinstance(value, Config):
            raise UsageError(f"{type(self).__name__}.config takes a rolecast Config, not {type(value).__name__}")
        self._config = value
        self._config_llm = None

    def is_watch(self, caused_by: str) -> bool:
        """Whether messages caused by ``caused_by`` (an action's class path) are news to this role."""
        return caused_by in self.rc.watched

    @property
    def action_description(self) -> str:
        """What the role is about to do (or its first action): the action's ``desc``, else its class name."""
        todo = self.rc.todo
        if todo is not None:
            return todo.desc or type(todo).__name__
        return type(self.actions[0]).__name__ if self.actions else ""

    # ---------------------------------------------- MetaGPT's exported SDK API
    async def think(self) -> Action | None:
        """Observe, then choose the next action (``rc.todo``) without running it."""
        await self._observe()
        with self.context.scope(role=self.name):
            await self._think()
        return self.rc.todo

    async def act(self) -> ActionOutput:
        """Run the action :meth:`think` chose; its result as an :class:`~actions.action_node.ActionOutput`."""
        todo = self.rc.todo
        if todo is None:
            raise UsageError(f"{self._setting}: act() needs an action chosen first: call think()")
        with self.context.scope(role=self.name):
            msg = await perform(self, todo, invoke=self._act)
        return ActionOutput(content=msg.content, instruct_content=msg.instruct_content)


__all__ = ["MetaGPTSDK"]
