"""The served team over A2A (the agent-to-agent protocol, 1.0; 0.3 too), on the official ``a2a-sdk``'s server side.

What comes from the SDK: the JSON-RPC endpoint (its dispatcher parses and checks every request and
answers malformed JSON, unknown methods and bad parameters with JSON-RPC errors, and streams over
server-sent events), the protobuf types, and the card's JSON form. What is ours: a
:class:`~a2a.server.request_handlers.RequestHandler` over :class:`~.runner.TeamRunner`, with no
task store of the SDK's — a task *is* a durable rolecast run (its id the run's id), so ``GetTask``
reads the run store and a task outlives the server process.

* ``SendMessage`` starts a run with the message's text as the idea (``metadata.rounds``: how many
  rounds, default the server's) and returns the task once the run settles — finished, failed or
  paused on an approval (``input-required``); ``configuration.returnImmediately`` returns it at once.
  A message with a ``taskId`` answers that task's pending approval: the text ``approve``,
  ``reject: WHY`` or ``edit {"arg": …}`` (or a data part ``{"verdict", "reason", "arguments",
  "approval_id"}``); the run then resumes. The same message again (its ``messageId`` and idea, from
  the same client: address and credential) meets the task it started; another client's is its own.
  A message needs its ``messageId``; parts other than text (and data) are -32005; a message to a
  finished task is -32004 (UnsupportedOperation), as is subscribing to one.
* ``SendStreamingMessage`` does the same and streams: the task, a status update (``working``) per
  message the team publishes (its text; ``metadata``: sender, action, round), then the final
  messages as artifacts, then the final status. ``SubscribeToTask`` follows a task from now on.
* ``GetTask``; ``ListTasks`` (this process's tasks, newest first; ``contextId``/``status`` filter);
  ``CancelTask`` stops the run (its log says ``cancelled: WHY``, ``metadata.reason``). A status's
  timestamp is when the task last changed.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import AsyncGenerator
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.request_handlers.request_handler import RequestHandler
from a2a.server.routes.common import DefaultServerCallContextBuilder
from a2a.types import a2a_pb2 as pb
from a2a.utils.errors import (
    ContentTypeNotSupportedError,
    InvalidParamsError,
    PushNotificationNotSupportedError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from google.protobuf.json_format import MessageToDict
from starlette.requests import Request

from .. import __version__
from ..errors import RolecastError
from ..runs import MESSAGE, RunEvent
from ..runs.approvals import pending_approvals
from .runner import CANCELLED, FAILED, FINISHED, MAX_IDEA, SETTLED, WAITING, Served, TeamRunner

#: the media types of the parts a message may carry (text; data parts answer approvals)
ACCEPTED_MEDIA = ("", "text/plain", "application/json")
#: the most tasks one ListTasks page holds
MAX_PAGE = 100
#: how long a stream waits for news before it looks at the store anyway (seconds)
STREAM_POLL = 0.25

_OVER = (FINISHED, FAILED, CANCELLED)
_STATES = {FINISHED: pb.TASK_STATE_COMPLETED, FAILED: pb.TASK_STATE_FAILED, CANCELLED: pb.TASK_STATE_CANCELED,
           WAITING: pb.TASK_STATE_INPUT_REQUIRED}


def agent_card(runner: TeamRunner, url: str, *, name: str, token: bool) -> pb.AgentCard:
    """The card: the team's name and description, a skill per role, streaming, bearer auth with a token."""
    card = pb.AgentCard(
        name=name, description=runner.description or f"a rolecast team of {len(runner.roles)} role(s)",
        version=__version__,
        # 1.0, and 0.3 on the same endpoint (the SDK's compatibility layer): clients of either read the card
        supported_interfaces=[pb.AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version=version)
                              for version in ("1.0", "0.3")],
        capabilities=pb.AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"], default_output_modes=["text/plain"],
        skills=[pb.AgentSkill(id=role, name=f"{role} ({profile})" if profile else role,
                              description=goal or profile or role, tags=[t for t in (profile, "rolecast") if t],
                              input_modes=["text/plain"], output_modes=["text/plain"])
                for role, profile, goal in runner.roles],
    )
    if token:
        card.security_schemes["bearer"].http_auth_security_scheme.scheme = "bearer"
        card.security_schemes["bearer"].http_auth_security_scheme.description = "the server's access token"
        card.security_requirements.add().schemes["bearer"].SetInParent()
    return card


def _agent_message(served: Served, event: RunEvent) -> pb.Message:
    message = event.data.get("message") or {}
    out = pb.Message(message_id=str(message.get("id") or f"{served.run_id}-{event.seq}"), role=pb.ROLE_AGENT,
                     context_id=served.context_id, task_id=served.run_id,
                     parts=[pb.Part(text=str(message.get("content") or ""))])
    out.metadata.update({"sender": str(message.get("sent_from") or ""), "action": str(message.get("cause_by") or ""),
                         "round": event.round, "seq": event.seq})
    return out


def _is_idea(event: RunEvent) -> bool:
    message = event.data.get("message") or {}
    return message.get("sent_from") == "user" and str(message.get("cause_by", "")).endswith("UserRequirement")


def _final(events: list[RunEvent]) -> list[RunEvent]:
    """The final messages: those of the last round that published any."""
    if not events:
        return []
    last = events[-1].round
    return [e for e in events if e.round == last]


class TeamHandler(RequestHandler):
    """The A2A methods over a :class:`TeamRunner` (see the module docstring)."""

    def __init__(self, runner: TeamRunner):
        self.runner = runner

    # ------------------------------------------------------------- reading
    def _messages(self, served: Served, after: int = 0) -> list[RunEvent]:
        """The team's messages after seq ``after`` (not the idea: the task's first message already)."""
        return [e for e in self.runner.store.events(served.run_id, [MESSAGE]) if e.seq > after and not _is_idea(e)]

    def _status(self, served: Served) -> pb.TaskStatus:
        state = _STATES.get(served.outcome, pb.TASK_STATE_WORKING) if not served.running else pb.TASK_STATE_WORKING
        status = pb.TaskStatus(state=state)
        status.timestamp.FromNanoseconds(int(served.since * 1e9))  # (when it last changed, not now)
        note = self._note(served, state)
        if note is not None:
            status.message.CopyFrom(note)
        return status

    def _note(self, served: Served, state: int) -> pb.Message | None:
        """The status's message: what an input-required task asks, why a task failed or was cancelled."""
        if state == pb.TASK_STATE_INPUT_REQUIRED:
            pending = pending_approvals(self.runner.store, served.run_id)
            lines = [f"approval {a['id']}: {a.get('role', '')} asks to run {a.get('name', '')}"
                     f"({json.dumps(a.get('arguments', {}), ensure_ascii=False)})" for a in pending]
            text = "\n".join([*lines, "answer with 'approve', 'reject: WHY' or 'edit {\"arg\": ...}'"])
            note = pb.Message(message_id=f"{served.run_id}-asks", role=pb.ROLE_AGENT, context_id=served.context_id,
                              task_id=served.run_id, parts=[pb.Part(text=text)])
            note.parts.add().data.struct_value.update({"pending": [
                {"id": a["id"], "role": a.get("role", ""), "name": a.get("name", ""),
                 "arguments": a.get("arguments", {})} for a in pending]})
            return note
        if state in (pb.TASK_STATE_FAILED, pb.TASK_STATE_CANCELED) and served.detail:
            return pb.Message(message_id=f"{served.run_id}-why", role=pb.ROLE_AGENT, context_id=served.context_id,
                              task_id=served.run_id, parts=[pb.Part(text=served.detail)])
        return None

    def _artifact(self, served: Served, event: RunEvent) -> pb.Artifact:
        message = event.data.get("message") or {}
        artifact = pb.Artifact(artifact_id=str(message.get("id") or event.seq),
                               name=str(message.get("sent_from") or ""),
                               parts=[pb.Part(text=str(message.get("content") or ""))])
        artifact.metadata.update({"action": str(message.get("cause_by") or ""), "round": event.round})
        return artifact

    def task(self, served: Served, history_length: int | None = None) -> pb.Task:
        """The task as it stands: status, history (the idea, then the team's messages), artifacts."""
        events = self._messages(served)
        task = pb.Task(id=served.run_id, context_id=served.context_id, status=self._status(served))
        idea = pb.Message(message_id=served.message_id or f"{served.run_id}-idea", role=pb.ROLE_USER,
                          context_id=served.context_id, task_id=served.run_id, parts=[pb.Part(text=served.idea)])
        history = [idea, *(_agent_message(served, e) for e in events)]
        if history_length is not None:
            history = history[-history_length:] if history_length > 0 else []
        task.history.extend(history)
        if served.outcome == FINISHED and not served.running:
            task.artifacts.extend(self._artifact(served, e) for e in _final(events))
        task.metadata.update({"run_id": served.run_id, "rounds": served.rounds})
        return task

    def _find(self, task_id: str) -> Served:
        served = self.runner.find(task_id)
        if served is None:
            raise TaskNotFoundError(message=f"no task {task_id[:200]!r} on this server")
        return served

    # -------------------------------------------------------------- sending
    async def _accept(self, params: pb.SendMessageRequest, client: str = "") -> Served:
        """Start a run for a new message, or answer the task a message names."""
        message = params.message
        if not message.message_id:
            raise InvalidParamsError(message="a message needs its messageId")
        for part in message.parts:
            if part.media_type.split(";")[0].strip().lower() not in ACCEPTED_MEDIA or part.HasField("raw") \
                    or part.HasField("url"):
                raise ContentTypeNotSupportedError(
                    message=f"this agent reads text parts (text/plain), not {part.media_type[:100] or 'files'!r}")
        text = "\n".join(p.text for p in message.parts if p.HasField("text")).strip()
        if message.task_id:
            served = self._find(message.task_id)
            if served.outcome in _OVER and not served.running:
                raise UnsupportedOperationError(message=f"task {served.run_id} is {served.outcome}: it takes "
                                                        "no more messages (send a new one without its taskId)")
            verdict = _verdict(message, text)
            try:
                self.runner.answer(served, verdict["verdict"], verdict.get("approval_id"),
                                   reason=str(verdict.get("reason", "")), arguments=verdict.get("arguments"),
                                   by="an A2A client")
            except RolecastError as exc:
                raise InvalidParamsError(message=str(exc)) from exc
            return served
        if not text:
            raise InvalidParamsError(message="the message carries no text: send the idea as a text part")
        if len(text) > MAX_IDEA:
            raise InvalidParamsError(message=f"the idea is {len(text)} characters; at most {MAX_IDEA}")
        meta = MessageToDict(params.metadata) if params.HasField("metadata") else {}
        meta = meta or (MessageToDict(message.metadata) if message.HasField("metadata") else {})
        rounds = meta.get("rounds")
        if isinstance(rounds, float) and rounds.is_integer():
            rounds = int(rounds)
        try:
            return self.runner.start(text, rounds, message_id=message.message_id, context_id=message.context_id,
                                     client=client)
        except RolecastError as exc:
            raise InvalidParamsError(message=str(exc)) from exc

    async def on_message_send(self, params: pb.SendMessageRequest, context: ServerCallContext) -> pb.Task:
        history = _history_length(params.configuration)
        served = await self._accept(params, _client(context))
        if not params.configuration.return_immediately:
            await self.runner.settled(served)
        return self.task(served, history)

    async def on_message_send_stream(
        self, params: pb.SendMessageRequest, context: ServerCallContext,
    ) -> AsyncGenerator[Any]:
        after = 0
        if params.message.task_id:  # an answer: follow the run from where it paused
            served = self._find(params.message.task_id)
            after = max((e.seq for e in self._messages(served)), default=0)
            await self._accept(params, _client(context))
        else:
            served = await self._accept(params, _client(context))
        yield self.task(served, 0)
        async for event in self._follow(served, after):
            yield event

    async def on_subscribe_to_task(
        self, params: pb.SubscribeToTaskRequest, context: ServerCallContext,
    ) -> AsyncGenerator[Any]:
        served = self._find(params.id)
        if served.outcome in _OVER and not served.running:
            raise UnsupportedOperationError(message=f"task {served.run_id} is {served.outcome}: nothing to follow")
        yield self.task(served)
        async for event in self._follow(served, max((e.seq for e in self._messages(served)), default=0)):
            yield event

    async def _follow(self, served: Served, after: int) -> AsyncGenerator[Any]:
        """Status updates for the run's messages after seq ``after`` as they land, then its artifacts
        and final status once it settles."""
        while True:
            settled = served.outcome in SETTLED and not served.running  # (before reading: nothing missed)
            served.changed.clear()
            news = await asyncio.to_thread(self._messages, served, after)
            for event in news:
                after = event.seq
                yield pb.TaskStatusUpdateEvent(task_id=served.run_id, context_id=served.context_id,
                                               status=pb.TaskStatus(state=pb.TASK_STATE_WORKING,
                                                                    message=_agent_message(served, event)))
            if settled:
                break
            try:
                await asyncio.wait_for(served.changed.wait(), STREAM_POLL)
            except asyncio.TimeoutError:
                pass
        if served.outcome == FINISHED:
            for event in _final(self._messages(served)):
                yield pb.TaskArtifactUpdateEvent(task_id=served.run_id, context_id=served.context_id,
                                                 artifact=self._artifact(served, event), last_chunk=True)
        yield pb.TaskStatusUpdateEvent(task_id=served.run_id, context_id=served.context_id,
                                       status=self._status(served))

    # ------------------------------------------------------------ the rest
    async def on_get_task(self, params: pb.GetTaskRequest, context: ServerCallContext) -> pb.Task:
        history = _history_length(params)
        return self.task(self._find(params.id), history)

    async def on_cancel_task(self, params: pb.CancelTaskRequest, context: ServerCallContext) -> pb.Task:
        served = self._find(params.id)
        if served.outcome in (FINISHED, FAILED, CANCELLED) and not served.running:
            raise TaskNotCancelableError(message=f"task {served.run_id} is {served.outcome} already")
        meta = MessageToDict(params.metadata) if params.HasField("metadata") else {}
        await self.runner.cancel(served, str(meta.get("reason") or "cancelled by an A2A client"))
        return self.task(served)

    async def on_list_tasks(self, params: pb.ListTasksRequest, context: ServerCallContext) -> pb.ListTasksResponse:
        """This server's tasks (of this process: the ones it started or was asked about), newest first;
        ``contextId`` and ``status`` filter, ``pageSize``/``pageToken`` page (the token: an offset)."""
        history = _history_length(params)
        size = params.page_size if params.HasField("page_size") else 50
        if not 1 <= size <= MAX_PAGE:
            raise InvalidParamsError(message=f"pageSize is from 1 to {MAX_PAGE}, not {size}")
        token = params.page_token or "0"
        if not token.isdigit() or len(token) > 12:
            raise InvalidParamsError(message=f"pageToken {token[:40]!r} is not one this server gave")
        start = int(token)
        tasks = [self.task(s, history if history is not None else 0) for s in
                 sorted(self.runner.served.values(), key=lambda s: s.started, reverse=True)
                 if not params.context_id or s.context_id == params.context_id]
        if params.status:
            tasks = [t for t in tasks if t.status.state == params.status]
        if params.HasField("status_timestamp_after"):
            after = params.status_timestamp_after.ToNanoseconds()
            tasks = [t for t in tasks if t.status.timestamp.ToNanoseconds() > after]
        page = tasks[start:start + size]
        if not params.include_artifacts:
            for task in page:
                del task.artifacts[:]
        following = start + size if start + size < len(tasks) else None
        return pb.ListTasksResponse(tasks=page, next_page_token=str(following) if following is not None else "",
                                    page_size=len(page), total_size=len(tasks))

    async def on_create_task_push_notification_config(self, params: Any, context: ServerCallContext) -> Any:
        raise PushNotificationNotSupportedError()

    async def on_get_task_push_notification_config(self, params: Any, context: ServerCallContext) -> Any:
        raise PushNotificationNotSupportedError()

    async def on_list_task_push_notification_configs(self, params: Any, context: ServerCallContext) -> Any:
        raise PushNotificationNotSupportedError()

    async def on_delete_task_push_notification_config(self, params: Any, context: ServerCallContext) -> None:
        raise PushNotificationNotSupportedError()

    async def on_get_extended_agent_card(self, params: Any, context: ServerCallContext) -> pb.AgentCard:
        raise UnsupportedOperationError(message="this agent has no extended card")


class ClientContextBuilder(DefaultServerCallContextBuilder):
    """The SDK's call context, and who sent the request (``state["client"]``: its address and a digest
    of its credential), by which a repeated ``messageId`` is told from another client's."""

    def build(self, request: Request) -> ServerCallContext:
        context = super().build(request)
        peer = request.client.host if request.client is not None else ""
        secret = request.headers.get("authorization", "")
        context.state["client"] = f"{peer} {hashlib.sha256(secret.encode()).hexdigest()[:16]}"
        return context


def _client(context: ServerCallContext | None) -> str:
    return str(context.state.get("client", "")) if context is not None else ""


def _history_length(params: Any) -> int | None:
    """A request's ``historyLength`` (None: all of it); a negative one is refused."""
    if not params.HasField("history_length"):
        return None
    if params.history_length < 0:
        raise InvalidParamsError(message=f"historyLength is 0 or more, not {params.history_length}")
    return int(params.history_length)


def _verdict(message: pb.Message, text: str) -> dict[str, Any]:
    """The answer to an approval a message carries: a data part, or ``approve`` / ``reject: WHY`` /
    ``edit {json}`` as text."""
    for part in message.parts:
        if part.HasField("data"):
            value = MessageToDict(part.data)
            if isinstance(value, dict) and "verdict" in value:
                return value
    word, _, rest = text.partition(" ") if not text.lower().startswith("reject:") else ("reject", "", text[7:])
    word = word.rstrip(":").lower()
    if word == "approve":
        return {"verdict": "approve"}
    if word == "reject":
        return {"verdict": "reject", "reason": rest.strip() or "rejected by an A2A client"}
    if word == "edit":
        try:
            arguments = json.loads(rest)
        except json.JSONDecodeError as exc:
            raise InvalidParamsError(message=f"edit takes the call's arguments as JSON: {exc}") from exc
        return {"verdict": "edit", "arguments": arguments}
    raise InvalidParamsError(message="answer a task waiting for approval with 'approve', 'reject: WHY' or "
                                     "'edit {\"arg\": ...}' (or a data part with a verdict)")


__all__ = ["MAX_IDEA", "ClientContextBuilder", "TeamHandler", "agent_card"]
