"""OpenTelemetry traces of a team run (``pip install "rolecast[otel]"``).

:func:`instrument` makes one trace per run, exported wherever your OpenTelemetry SDK
points (OTLP, the console, Jaeger …)::

    from rolecast.observe.tracing import instrument
    instrument(team)                 # the global tracer provider, or tracer_provider=...
    await team.run(n_round=5)

The span tree follows the run::

    run <team>                        rolecast.run_id, idea, stop reason, cost
    └── round <n>
        └── turn <role>               the message ids the turn published
            └── action <name>         every Action.run, nested actions included
                ├── chat <model>      one model call: the GenAI semantic conventions
                │                     (gen_ai.request.model, gen_ai.usage.input_tokens /
                │                     output_tokens), rolecast.accounting.cost, latency
                └── execute_tool <name>   a tool or kernel function call

Runs, rounds, turns, messages and model calls come from the run's event stream
(:class:`~rolecast.runs.log.RunLog`); actions and tool calls from the context's
invocation hooks (:mod:`rolecast.control.hooks`), which see them start and end. A model call
is reported when it has finished, so its span is drawn from its recorded latency.
"""

from __future__ import annotations

import json
import threading
import time
from collections import defaultdict
from typing import TYPE_CHECKING, Any

from ..context import current_scope
from ..control.hooks import Hooks, Invocation
from ..errors import ConfigError
from ..runs.events import STATE_INVALID
from ..runs.store import (
    LLM_CALL,
    MESSAGE,
    ROUND_FINISHED,
    ROUND_STARTED,
    RUN_STARTED,
    RUN_STOPPED,
    TURN_FAILED,
    TURN_FINISHED,
    TURN_STARTED,
    RunEvent,
)

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer, TracerProvider

    from ..runs.log import RunLog

TRACER_NAME = "rolecast"
_MAX_ATTR = 4000  # long prompts and answers are cut in attributes


def _ns(ts: float) -> int:
    return int(ts * 1_000_000_000)


def _text(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= _MAX_ATTR else text[: _MAX_ATTR - 1] + "…"


class RunTracer:
    """Turns one team's run events and invocations into spans (see the module docstring).

    Use :func:`instrument`; or subscribe an instance to a run log yourself and call
    :meth:`attach_hooks` on the context's hooks.
    """

    def __init__(self, tracer_provider: TracerProvider | None = None, *, tracer: Tracer | None = None):
        try:
            from opentelemetry import trace
        except ImportError as exc:  # pragma: no cover - depends on the installed extras
            raise ConfigError('tracing needs OpenTelemetry: pip install "rolecast[otel]"') from exc
        self._trace = trace
        self.tracer = tracer or trace.get_tracer(TRACER_NAME, tracer_provider=tracer_provider)
        self._lock = threading.Lock()
        self._run: Span | None = None
        self._round: Span | None = None
        self._turns: dict[str, Span] = {}
        self._stacks: dict[str, list[Span]] = defaultdict(list)  # open action/tool spans per role

    # ------------------------------------------------------------------ events
    def __call__(self, event: RunEvent) -> None:
        handler = self._HANDLERS.get(event.kind)
        if handler is not None:
            with self._lock:
                handler(self, event)

    def _start(self, name: str, parent: Span | None, ts: float | None = None, **attributes: Any) -> Span:
        context = self._trace.set_span_in_context(parent) if parent is not None else None
        attrs = {k.replace("__", "."): v for k, v in attributes.items() if v is not None}
        return self.tracer.start_span(
            name, context=context, start_time=_ns(ts) if ts else None, attributes=attrs
        )

    def _on_run_started(self, event: RunEvent) -> None:
        data = event.data
        self._end_all(event.ts)
        roles = [str(r.get("name")) for r in data.get("roles") or []]
        self._run = self._start(
            f"run {data.get('team') or 'team'}", None, event.ts,
            rolecast__run_id=event.run_id, rolecast__idea=_text(data.get("idea") or ""),
            rolecast__roles=roles, rolecast__n_round=data.get("n_round"),
            rolecast__resumed=bool(data.get("resumed")),
        )

    def _on_round_started(self, event: RunEvent) -> None:
        self._end_round(event.ts)
        self._round = self._start(f"round {event.round}", self._run, event.ts, rolecast__round=event.round)

    def _on_turn_started(self, event: RunEvent) -> None:
        self._end_turn(event.role, event.ts)
        self._turns[event.role] = self._start(
            f"turn {event.role}", self._round or self._run, event.ts,
            rolecast__role=event.role, rolecast__round=event.round,
        )

    def _on_message(self, event: RunEvent) -> None:
        message = event.data.get("message") or {}
        span = self._turns.get(str(message.get("sent_from") or event.role)) or self._round or self._run
        if span is not None:
            span.add_event("message", {
                "rolecast.message.id": str(message.get("id") or ""),
                "rolecast.message.sent_from": str(message.get("sent_from") or ""),
                "rolecast.message.send_to": [str(x) for x in message.get("send_to") or []],
                "rolecast.message.cause_by": str(message.get("cause_by") or ""),
            }, timestamp=_ns(event.ts))

    def _on_llm_call(self, event: RunEvent) -> None:
        data = event.data
        response = data.get("response") or {}
        usage = data.get("usage") or response.get("usage") or {}
        latency = float(data.get("latency") or 0.0)
        model = str(data.get("model") or "")
        parent = self._innermost(event.role)
        span = self._start(
            f"chat {model}".strip(), parent, event.ts - latency,
            gen_ai__operation__name="chat", gen_ai__request__model=model, gen_ai__system=data.get("system") or None,
            gen_ai__response__model=response.get("model") or model,
            gen_ai__response__finish_reasons=[str(finish)] if (finish := response.get("finish_reason")) else None,
            gen_ai__usage__input_tokens=int(usage.get("prompt_tokens") or 0),
            gen_ai__usage__output_tokens=int(usage.get("completion_tokens") or 0),
            rolecast__cost=float(data.get("cost") or 0.0), rolecast__latency=latency,
            rolecast__role=event.role, rolecast__action=data.get("action"),
            rolecast__attempt=data.get("attempt"), rolecast__fingerprint=data.get("fingerprint"),
        )
        if data.get("error"):
            self._fail(span, str(data["error"]), str(data.get("type") or "LLMError"))
        span.end(end_time=_ns(event.ts))

    def _on_turn_finished(self, event: RunEvent) -> None:
        span = self._turns.get(event.role)
        if span is not None and event.data.get("message_id"):
            span.set_attribute("rolecast.message.id", str(event.data["message_id"]))
        self._end_turn(event.role, event.ts)

    def _on_turn_failed(self, event: RunEvent) -> None:
        span = self._turns.get(event.role)
        error, kind = str(event.data.get("error") or ""), str(event.data.get("type") or "error")
        for open_span in self._stacks.pop(event.role, []):
            self._fail(open_span, error, kind)
            open_span.end(end_time=_ns(event.ts))
        if span is not None:
            self._fail(span, error, kind)
        self._end_turn(event.role, event.ts)

    def _on_state_invalid(self, event: RunEvent) -> None:
        span = self._turns.get(event.role) or self._round or self._run
        if span is not None:
            span.add_event("state_invalid", {
                "rolecast.role": event.role, "rolecast.state.raw": _text(str(event.data.get("raw") or "")),
                "rolecast.state.n_options": int(event.data.get("n_options") or 0),
            }, timestamp=_ns(event.ts))

    def _on_round_finished(self, event: RunEvent) -> None:
        self._end_round(event.ts)

    def _on_run_stopped(self, event: RunEvent) -> None:
        if self._run is not None:
            reason = str(event.data.get("reason") or "")
            self._run.set_attribute("rolecast.stop_reason", reason)
            self._run.set_attribute("rolecast.rounds", int(event.data.get("rounds") or 0))
            self._run.set_attribute("rolecast.cost", float(event.data.get("cost") or 0.0))
            if reason.startswith("error"):
                self._fail(self._run, reason, reason.partition(": ")[2] or "error")
        self._end_all(event.ts)

    _HANDLERS = {
        RUN_STARTED: _on_run_started, ROUND_STARTED: _on_round_started, TURN_STARTED: _on_turn_started,
        MESSAGE: _on_message, LLM_CALL: _on_llm_call, TURN_FINISHED: _on_turn_finished,
        TURN_FAILED: _on_turn_failed, ROUND_FINISHED: _on_round_finished, RUN_STOPPED: _on_run_stopped,
        STATE_INVALID: _on_state_invalid,
    }

    # ------------------------------------------------------ actions and tools
    def attach_hooks(self, hooks: Hooks) -> None:
        """Trace every action and tool invocation made through ``hooks`` (a context's)."""
        hooks.on_invoking(self._invoking)
        hooks.on_invoked(self._invoked)

    def _invoking(self, inv: Invocation) -> None:
        if inv.kind == "action":
            name, attrs = f"action {inv.name}", {"rolecast__action": inv.name}
        else:
            name = f"execute_tool {inv.name}"
            attrs = {"gen_ai__operation__name": "execute_tool", "gen_ai__tool__name": inv.name,
                     "rolecast__tool__kind": inv.kind, "rolecast__tool__arguments": _text(inv.arguments)}
        role = current_scope().role or ""
        with self._lock:
            span = self._start(name, self._innermost(role), time.time(), rolecast__role=role or None, **attrs)
            self._stacks[role].append(span)
        inv.metadata["rolecast.span"] = span

    def _invoked(self, inv: Invocation) -> None:
        span = inv.metadata.get("rolecast.span")
        if span is None:
            return
        role = current_scope().role or ""
        with self._lock:
            stack = self._stacks.get(role, [])
            if span in stack:
                stack.remove(span)
        if inv.kind != "action":
            span.set_attribute("rolecast.tool.result", _text(inv.result))
        span.end()

    # ---------------------------------------------------------------- helpers
    def _innermost(self, role: str) -> Span | None:
        stack = self._stacks.get(role)
        return stack[-1] if stack else self._turns.get(role) or self._round or self._run

    def _fail(self, span: Span, message: str, kind: str) -> None:
        from opentelemetry.trace import Status, StatusCode

        span.set_attribute("error.type", kind)
        span.set_status(Status(StatusCode.ERROR, message))

    def _end_turn(self, role: str, ts: float) -> None:
        for span in reversed(self._stacks.pop(role, [])):  # an action that raised never reached on_invoked
            span.end(end_time=_ns(ts))
        if role in self._turns:
            self._turns.pop(role).end(end_time=_ns(ts))

    def _end_round(self, ts: float) -> None:
        for role in list(self._turns):
            self._end_turn(role, ts)
        if self._round is not None:
            self._round.end(end_time=_ns(ts))
            self._round = None

    def _end_all(self, ts: float) -> None:
        self._end_round(ts)
        if self._run is not None:
            self._run.end(end_time=_ns(ts))
            self._run = None


def instrument(
    team: Any, tracer_provider: TracerProvider | None = None, *, run_log: RunLog | None = None
) -> RunTracer:
    """Trace ``team``'s runs (a :class:`~environment.Team`, or anything with ``run_log`` and ``context``)."""
    tracer = RunTracer(tracer_provider)
    (run_log or team.run_log).subscribe(tracer)
    tracer.attach_hooks(team.context.hooks)
    return tracer


__all__ = ["TRACER_NAME", "RunTracer", "instrument"]
