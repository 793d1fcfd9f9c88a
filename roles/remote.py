"""A remote A2A agent as a role: hire an agent served by rolecast, Google ADK or anything that speaks A2A.

::

    from roles import RemoteAgent
    team.hire([Planner(), RemoteAgent(url="http://127.0.0.1:8766", name="Writers", watch=[WritePlan])])

:class:`RemoteAgent` forwards what it watches (the text of the messages that woke it) to the agent at
``url`` as one A2A message, waits for the task to finish, and publishes the answer — the task's
artifacts' text, else its last agent message — as its own message. Needs the ``serve`` extra.

The call goes through the model seam (:class:`A2AModel` is the role's "model"), so it is in the run
log like a model call: a resumed run answers it from the log, a rerun (``reuse=``) reuses it, and its
answer is durable before it is used. After a crash in the middle of a call, the resumed run sends
the same message again with the same ``messageId`` (a hash of the run, the role, the round and the
request): a ``rolecast serve`` server meets it as the task it already started (never a second
run; while that server process lives, which keeps the ids in memory); other A2A servers see the
message twice.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import uuid
from collections.abc import Iterable
from typing import Any

from pydantic import Field

from actions import Action, UserRequirement
from actions.perform import perform
from memory import Message
from rolecast.accounting.metering import current_meter
from rolecast.errors import ConfigError, LLMAPIError, UsageError
from rolecast.llm.base import BaseLLM, Completion, LLMSettings, Messages, StructuredRequest

from .role import Role

#: how often a task that has not finished is asked about (seconds)
POLL = 0.1
_DONE = ("TASK_STATE_COMPLETED",)
_STUCK = ("TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED", "TASK_STATE_INPUT_REQUIRED",
          "TASK_STATE_AUTH_REQUIRED")


def _client_modules() -> tuple[Any, Any, Any]:
    try:
        import httpx
        from a2a.client import ClientConfig, create_client
        from a2a.types import a2a_pb2
    except ImportError as exc:
        raise ConfigError(f"RemoteAgent needs the a2a-sdk: pip install 'rolecast[serve]' ({exc})") from exc
    return httpx, (ClientConfig, create_client), a2a_pb2


class A2AModel(BaseLLM):
    """A remote A2A agent behind the model seam: a call sends the last message's text as one A2A
    message and answers with the finished task's text (see the module docstring)."""

    reaches_a_model = False  # (an agent over a protocol, not a model: its own server governs its models)
    free = True  # (what the remote agent spends is counted where it runs)

    def __init__(self, url: str, *, token: str | None = None, timeout: float = 3600.0):
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise UsageError(f"RemoteAgent(url=...) is the agent's http(s) address, not {url!r:.80}")
        super().__init__(model=f"a2a:{url.rstrip('/')}")
        self.url, self.token, self.timeout = url.rstrip("/"), token, timeout

    def __deepcopy__(self, memo: dict[int, Any]) -> A2AModel:
        return A2AModel(self.url, token=self.token, timeout=self.timeout)

    def message_id(self, messages: Messages) -> str:
        """The A2A ``messageId`` of this call: the same in a resumed run as in the run it resumes."""
        meter = current_meter()
        log = meter.run_log
        if log is None:
            return uuid.uuid4().hex
        key = json.dumps([log.run_id, meter.role or "", log.round, messages], sort_keys=True, default=str)
        return "rolecast-" + hashlib.sha256(key.encode()).hexdigest()[:32]

    async def _complete(
        self, messages: Messages, *, stop: list[str] | None, settings: LLMSettings,
        structured: StructuredRequest | None = None, tools: list[dict[str, Any]] | None = None,
    ) -> Completion:
        httpx, (client_config, create_client), pb = _client_modules()
        text = str(messages[-1].get("content") or "") if messages else ""
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        async with httpx.AsyncClient(headers=headers, timeout=60.0) as http:
            try:
                client = await create_client(self.url, client_config=client_config(streaming=False, httpx_client=http))
                request = pb.SendMessageRequest(message=pb.Message(
                    message_id=self.message_id(messages), role=pb.ROLE_USER, parts=[pb.Part(text=text)]))
                request.configuration.return_immediately = True
                task = None
                async for response in client.send_message(request):
                    task = response.task if response.HasField("task") else None
                    if response.HasField("message"):  # an agent that answers at once, with no task
                        return Completion(text=_text(response.message.parts), model=self.model)
                if task is None:
                    raise LLMAPIError(f"the A2A agent at {self.url} answered with no task")
                task = await self._finished(client, pb, task)
            except LLMAPIError:
                raise
            except Exception as exc:  # (the SDK's errors, httpx's): the role's action fails with the cause
                raise LLMAPIError(f"the A2A agent at {self.url}: {type(exc).__name__}: {exc}") from exc
        answer = "\n\n".join(t for t in (_text(a.parts) for a in task.artifacts) if t)
        if not answer:
            agents = [m for m in task.history if m.role == pb.ROLE_AGENT]
            answer = _text(agents[-1].parts) if agents else ""
        return Completion(text=answer, model=self.model)

    async def _finished(self, client: Any, pb: Any, task: Any) -> Any:
        """``task`` once it completes (polled with GetTask); LLMAPIError when it fails or stops for input."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout
        while True:
            state = pb.TaskState.Name(task.status.state)
            if state in _DONE:
                return task
            if state in _STUCK:
                why = _text(task.status.message.parts) if task.HasField("status") else ""
                raise LLMAPIError(f"the A2A agent at {self.url}: task {task.id} is {state.removeprefix('TASK_STATE_')}"
                                  + (f": {why}" if why else ""))
            if loop.time() > deadline:
                raise LLMAPIError(f"the A2A agent at {self.url}: task {task.id} did not finish in {self.timeout} s")
            await asyncio.sleep(POLL)
            task = await client.get_task(pb.GetTaskRequest(id=task.id))


def _text(parts: Iterable[Any]) -> str:
    return "\n".join(p.text for p in parts if p.HasField("text"))


class AskRemote(Action):
    """Forward the messages that woke the role to its remote agent; its answer is the result."""

    name: str = "AskRemote"

    async def run(self, history: list[Message]) -> str:
        if len(history) == 1:
            text = history[0].content
        else:
            text = "\n\n".join(f"{m.sent_from or m.role}: {m.content}" for m in history)
        return await self._aask(text)


class RemoteAgent(Role):
    """A role played by a remote A2A agent (see the module docstring): ``url`` its base address (its
    card is read from there), ``watch`` the actions whose messages it forwards (default: the user's
    idea), ``token`` the bearer token its server needs."""

    name: str = "Remote"
    profile: str = "remote agent"
    url: str = ""
    token: str | None = Field(default=None, exclude=True, repr=False)

    def __init__(self, url: str = "", *, token: str | None = None, watch: Iterable[Any] | None = None, **data: Any):
        if "llm" in data:
            raise UsageError("RemoteAgent is played by the agent at its url: it takes no llm")
        super().__init__(url=url, token=token, watch=list(watch) if watch is not None else [UserRequirement],
                         llm=A2AModel(url, token=token), **data)
        self.set_actions([AskRemote])

    async def _act(self) -> Message:
        todo = self.rc.todo
        if todo is None:
            raise UsageError(f"{self.name}: _act called with nothing to do")
        news = list(self.rc.news) or (await self.prompt_history())[-1:]
        return await perform(self, todo, news)


__all__ = ["A2AModel", "AskRemote", "RemoteAgent"]
