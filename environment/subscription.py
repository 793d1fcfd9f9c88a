"""SubscriptionRunner: run roles on a trigger and hand each answer to a callback (MetaGPT's).

::

    async def every_morning():
        while True:
            yield Message("the latest news about OpenAI")
            await asyncio.sleep(24 * 3600)

    async def send(msg: Message):
        print(msg.content)

    runner = SubscriptionRunner()
    await runner.subscribe(Searcher(), every_morning(), send)
    await runner.run()          # serves until cancelled (or a role fails)

Each subscription is an asyncio task: for every message the trigger yields, the role
takes a turn (``await role.run(message)``) and the callback gets its answer (``None``
when the role had nothing to say).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterable, Awaitable, Callable
from typing import Any

from loguru import logger

from memory import Message
from rolecast.errors import UsageError
from roles import Role

Callback = Callable[[Any], "Awaitable[None] | None"]


class SubscriptionRunner:
    """Roles subscribed to triggers; :meth:`run` watches their tasks."""

    def __init__(self) -> None:
        self.tasks: dict[Role, asyncio.Task[None]] = {}
        self._changed = asyncio.Event()

    async def subscribe(self, role: Role, trigger: AsyncIterable[Message], callback: Callback) -> None:
        """Start a task that runs ``role`` on each message of ``trigger`` and calls ``callback`` with its answer."""
        if not isinstance(role, Role):
            raise UsageError(f"subscribe() takes a Role, not {type(role).__name__}")
        if not hasattr(trigger, "__aiter__"):
            raise UsageError("subscribe(): the trigger must be an async iterable (an async generator) of Messages")
        if role in self.tasks:
            raise UsageError(f"{role} is already subscribed; unsubscribe it first")

        async def serve() -> None:
            async for message in trigger:
                answer = await role.run(message)
                result = callback(answer)
                if inspect.isawaitable(result):
                    await result

        self.tasks[role] = asyncio.get_running_loop().create_task(serve(), name=f"Subscription-{role}")
        self._changed.set()

    async def unsubscribe(self, role: Role) -> None:
        """Stop ``role``'s subscription (its task is cancelled)."""
        task = self.tasks.pop(role, None)
        if task is None:
            raise UsageError(f"{role} is not subscribed")
        task.cancel()
        self._changed.set()

    async def run(self, raise_exception: bool = True) -> None:
        """Watch the subscriptions, like a server: until cancelled (new ones may come at any time).

        A subscription whose role (or callback) raised is removed and its error logged
        (naming the subscription); with ``raise_exception`` (the default) the error is
        then raised here, otherwise the others go on. One whose trigger ended is removed with a warning.
        """
        while True:
            for role, task in list(self.tasks.items()):
                if not task.done():
                    continue
                del self.tasks[role]
                if task.cancelled():
                    continue
                error = task.exception()
                if error is not None:
                    # logged either way: the log names the subscription, which the raised error does not
                    logger.opt(exception=error).error("Task {} run error", task.get_name())
                    if raise_exception:
                        raise error
                else:
                    logger.warning("Task {} has completed: its trigger ended", task.get_name())
            self._changed.clear()
            waiting: set[asyncio.Future[Any]] = {*self.tasks.values()}
            changed = asyncio.ensure_future(self._changed.wait())
            try:
                await asyncio.wait({*waiting, changed}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                changed.cancel()


__all__ = ["SubscriptionRunner"]
