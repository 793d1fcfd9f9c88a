"""A remote A2A agent as a role: hire an agent served by rolecast, Google ADK or anything that speaks A2A.

::

    from roles import RemoteAgent
    team.hire([Planner(), RemoteAgent(url="http://127.0.0.1:8766", name="Writers", watch=[WritePlan])])

:class:`RemoteAgent` forwards what it watches (the text of the messages that woke it) to the agent at
``url`` as one A2A message, follows the task's stream until it finishes (an agent that does not
stream is asked about it with GetTask), and publishes the answer — the task's artifacts' text, else
its last agent message — as its own message. Needs the ``serve`` extra. ``timeout`` bounds the whole
call and ``max_answer`` the answer; a call cancelled (the run, or the deadline) cancels the remote
task; the ``token`` goes only to ``url``'s origin, never to another host the card names.

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
from collections.abc import AsyncIterator, Iterable
from typing import Any
from urllib.parse import urlsplit

from loguru import logger
from pydantic import Field

from actions import Action, UserRequirement
from actions.perform import perform
from memory import Message
from rolecast.accounting.metering import current_meter
from rolecast.errors import ConfigError, LLMAPIError, LLMError, LLMResponseError, LLMTimeoutError, UsageError
from rolecast.llm.base import BaseLLM, Completion, LLMSettings, Messages, StructuredRequest

from .role import Role

#: how often a task is asked about when the agent does not stream (seconds)
POLL = 0.1
#: the longest answer (characters) a remote agent may give by default (``RemoteAgent(max_answer=...)``)
MAX_ANSWER = 1_000_000
#: how long cancelling the remote task may take when the run is cancelled (seconds)
CANCEL_WAIT = 2.0
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


def _origin(url: Any) -> tuple[str, str, int | None]:
    """An URL's origin: scheme, host, port (the default port of the scheme when none is written)."""
    parsed = urlsplit(str(url))
    port = parsed.port or {"http": 80, "https": 443}.get(parsed.scheme)
    return parsed.scheme.lower(), (parsed.hostname or "").lower(), port


def _transport(httpx: Any, url: str, token: str | None, limit: int) -> Any:
    """An httpx transport that adds ``token`` only to requests for the origin of ``url`` (the card may
    name another host: it gets no token) and stops any response body past ``limit`` bytes."""

    class Capped(httpx.AsyncByteStream):  # type: ignore[misc,name-defined]
        def __init__(self, stream: Any):
            self.stream = stream

        async def __aiter__(self) -> AsyncIterator[bytes]:
            seen = 0
            async for chunk in self.stream:
                seen += len(chunk)
                if seen > limit:
                    raise LLMResponseError(f"the A2A agent at {url} sent more than {limit:,} bytes in one answer")
                yield chunk

        async def aclose(self) -> None:
            await self.stream.aclose()

    class Guarded(httpx.AsyncBaseTransport):  # type: ignore[misc,name-defined]
        def __init__(self) -> None:
            self.inner = httpx.AsyncHTTPTransport()
            self.home = _origin(url)

        async def handle_async_request(self, request: Any) -> Any:
            request.headers.pop("authorization", None)
            if token and _origin(request.url) == self.home:
                request.headers["Authorization"] = f"Bearer {token}"
            response = await self.inner.handle_async_request(request)
            response.stream = Capped(response.stream)
            return response

        async def aclose(self) -> None:
            await self.inner.aclose()

    return Guarded()


class A2AModel(BaseLLM):
    """A remote A2A agent behind the model seam: a call sends the last message's text as one A2A
    message and answers with the finished task's text (see the module docstring).

    ``timeout``: the whole call's deadline (seconds; the remote task is cancelled when it passes);
    ``max_answer``: the longest answer (characters) taken; ``token``: sent only to ``url``'s origin."""

    reaches_a_model = False  # (an agent over a protocol, not a model: its own server governs its models)
    free = True  # (what the remote agent spends is counted where it runs)

    def __init__(self, url: str, *, token: str | None = None, timeout: float = 3600.0, max_answer: int = MAX_ANSWER):
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise UsageError(f"RemoteAgent(url=...) is the agent's http(s) address, not {url!r:.80}")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < float("inf"):
            raise UsageError(f"RemoteAgent(timeout=...) is a number of seconds above 0, not {timeout!r:.40}")
        if isinstance(max_answer, bool) or not isinstance(max_answer, int) or max_answer < 1:
            raise UsageError(f"RemoteAgent(max_answer=...) is a number of characters above 0, not {max_answer!r:.40}")
        super().__init__(model=f"a2a:{url.rstrip('/')}")
        self.url, self.token, self.timeout, self.max_answer = url.rstrip("/"), token, float(timeout), max_answer

    def __deepcopy__(self, memo: dict[int, Any]) -> A2AModel:
        return A2AModel(self.url, token=self.token, timeout=self.timeout, max_answer=self.max_answer)

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
        try:
            answer = await asyncio.wait_for(self._ask(messages), self.timeout)
        except asyncio.TimeoutError as exc:
            raise LLMTimeoutError(f"the A2A agent at {self.url} did not answer within {self.timeout:g} s") from exc
        if len(answer) > self.max_answer:
            raise LLMResponseError(f"the A2A agent at {self.url} answered {len(answer):,} characters; at most "
                                   f"{self.max_answer:,} (RemoteAgent(max_answer=...))")
        return Completion(text=answer, model=self.model)

    async def _ask(self, messages: Messages) -> str:
        """Send the message, follow its task's stream (or poll, for an agent that does not stream) until
        it completes; its answer. A cancelled call (the run, or the deadline) cancels the remote task."""
        httpx, (client_config, create_client), pb = _client_modules()
        text = str(messages[-1].get("content") or "") if messages else ""
        limit = 8 * self.max_answer + (1 << 20)  # (JSON escapes and the task's other messages around it)
        task_id = ""
        async with httpx.AsyncClient(transport=_transport(httpx, self.url, self.token, limit),
                                     timeout=min(60.0, self.timeout)) as http:
            client = None
            try:
                client = await create_client(self.url, client_config=client_config(streaming=True, httpx_client=http))
                request = pb.SendMessageRequest(message=pb.Message(
                    message_id=self.message_id(messages), role=pb.ROLE_USER, parts=[pb.Part(text=text)]))
                task = None
                async for response in client.send_message(request):
                    if response.HasField("message"):  # an agent that answers at once, with no task
                        return _text(response.message.parts)
                    if response.HasField("task"):
                        task = response.task
                        task_id = task.id
                    elif response.HasField("status_update") and task is not None:
                        task.status.CopyFrom(response.status_update.status)
                    elif response.HasField("artifact_update") and task is not None:
                        _update(task, response.artifact_update)
                if task is None:
                    raise LLMAPIError(f"the A2A agent at {self.url} answered with no task")
                task = await self._finished(client, pb, task)
            except asyncio.CancelledError:
                if client is not None and task_id:
                    await self._cancel_remote(client, pb, task_id)
                raise
            except LLMError:
                raise
            except Exception as exc:  # (the SDK's errors, httpx's): the role's action fails with the cause
                cause = exc.__cause__ if isinstance(exc.__cause__, LLMError) else None
                if cause is not None:  # (the body's cap, met inside the SDK's reading)
                    raise cause from exc
                raise LLMAPIError(f"the A2A agent at {self.url}: {type(exc).__name__}: {exc}") from exc
        answer = "\n\n".join(t for t in (_text(a.parts) for a in task.artifacts) if t)
        if not answer:
            agents = [m for m in task.history if m.role == pb.ROLE_AGENT]
            answer = _text(agents[-1].parts) if agents else ""
        return answer

    async def _cancel_remote(self, client: Any, pb: Any, task_id: str) -> None:
        """Ask the agent to cancel ``task_id`` (this call was cancelled); a refusal is only logged."""
        try:
            await asyncio.wait_for(client.cancel_task(pb.CancelTaskRequest(id=task_id)), CANCEL_WAIT)
        except Exception as exc:  # (finished meanwhile, unreachable): the run's own cancel goes on
            logger.info("RemoteAgent: the A2A agent at {} did not cancel task {}: {}", self.url, task_id, exc)

    async def _finished(self, client: Any, pb: Any, task: Any) -> Any:
        """``task`` once it completes (asked about with GetTask while the stream did not settle it);
        LLMAPIError when it fails or stops for input."""
        while True:
            state = pb.TaskState.Name(task.status.state)
            if state in _DONE:
                if not task.artifacts and not any(m.role == pb.ROLE_AGENT for m in task.history):
                    task = await client.get_task(pb.GetTaskRequest(id=task.id))  # (a stream gave no text)
                return task
            if state in _STUCK:
                why = _text(task.status.message.parts) if task.HasField("status") else ""
                raise LLMAPIError(f"the A2A agent at {self.url}: task {task.id} is {state.removeprefix('TASK_STATE_')}"
                                  + (f": {why}" if why else ""))
            await asyncio.sleep(POLL)
            task = await client.get_task(pb.GetTaskRequest(id=task.id))


def _update(task: Any, update: Any) -> None:
    """An artifact update applied to ``task``: a new artifact, one that replaces the artifact of its id,
    or (``append``) parts added to it."""
    artifact = update.artifact
    for known in task.artifacts:
        if known.artifact_id == artifact.artifact_id:
            if update.append:
                known.parts.extend(artifact.parts)
            else:
                known.CopyFrom(artifact)
            return
    task.artifacts.append(artifact)


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
    idea), ``token`` the bearer token its server needs (sent to that origin only), ``timeout`` the
    deadline of each call in seconds (default an hour; the remote task is cancelled when it passes, as
    when the run is cancelled), ``max_answer`` the longest answer in characters (longer: LLMResponseError)."""

    name: str = "Remote"
    profile: str = "remote agent"
    url: str = ""
    token: str | None = Field(default=None, exclude=True, repr=False)

    def __init__(self, url: str = "", *, token: str | None = None, watch: Iterable[Any] | None = None,
                 timeout: float = 3600.0, max_answer: int = MAX_ANSWER, **data: Any):
        if "llm" in data:
            raise UsageError("RemoteAgent is played by the agent at its url: it takes no llm")
        model = A2AModel(url, token=token, timeout=timeout, max_answer=max_answer)
        super().__init__(url=url, token=token, watch=list(watch) if watch is not None else [UserRequirement],
                         llm=model, **data)
        self.set_actions([AskRemote])

    async def _act(self) -> Message:
        todo = self.rc.todo
        if todo is None:
            raise UsageError(f"{self.name}: _act called with nothing to do")
        news = list(self.rc.news) or (await self.prompt_history())[-1:]
        return await perform(self, todo, news)


__all__ = ["MAX_ANSWER", "A2AModel", "AskRemote", "RemoteAgent"]
