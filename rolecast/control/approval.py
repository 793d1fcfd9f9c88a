"""Human approval: a person approves, edits or rejects a tool call or an action before it runs.

:class:`Approval` is a *before* hook (:meth:`rolecast.control.hooks.Hooks.on_invoking`). For
every invocation of the kinds it watches it asks — a callable you give (a UI, a
policy, a test), or a person at the terminal (:meth:`Approval.stdin`) — and then

* **approve**: the call runs as asked;
* **edit**: the call runs with the arguments given instead (a tool's are validated
  against its schema again: an invalid edit is a :class:`~rolecast.errors.ToolError`);
* **reject**: the call does not run. A rejected *tool* call is answered with an
  observation saying so (``"The user rejected this call: <reason>"``), so the agent
  loop can go on and try something else; a rejected *action* is cancelled
  (:class:`~rolecast.errors.InvocationCancelled`), which stops the role's turn.

::

    from rolecast.control.approval import Approval, approve, edit, reject

    Approval.stdin().install(team.context.hooks)          # ask at the terminal
    Approval.deferred().install(team.context.hooks)       # pause the run; answer later: rolecast runs approve
    Approval(lambda call: reject("no network") if call.name == "fetch" else approve(),
             kinds={"tool", "action"}).install(team.context.hooks)
"""

from __future__ import annotations

import asyncio
import inspect
import json
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, TextIO

from ..accounting.metering import current_meter
from ..errors import ApprovalPending, InvocationCancelled, UsageError
from .hooks import Hooks, Invocation


@dataclass(frozen=True)
class Decision:
    """What the approver said: ``approve``, ``edit`` (with ``arguments``) or ``reject`` (with a ``reason``)."""

    verdict: Literal["approve", "edit", "reject"]
    arguments: dict[str, Any] = field(default_factory=dict)
    reason: str = ""


def approve() -> Decision:
    """Run the call as asked."""
    return Decision("approve")


def edit(arguments: dict[str, Any]) -> Decision:
    """Run the call with these arguments instead."""
    if not isinstance(arguments, dict):
        raise UsageError(f"edit() takes a dict of arguments, got {type(arguments).__name__}")
    return Decision("edit", dict(arguments))


def reject(reason: str = "") -> Decision:
    """Do not run the call."""
    return Decision("reject", reason=reason)


Asker = Callable[[Invocation], "Decision | bool | Awaitable[Decision | bool]"]


class Approval:
    """A before hook asking ``ask(invocation)`` for a :class:`Decision` (``True``/``False`` = approve/reject).

    ``kinds`` are the invocation kinds it watches (``"tool"``, ``"action"``, ``"prompt"`` …);
    ``when(invocation)``, if given, limits it further (e.g. only tools that write).
    ``decisions`` keeps every ``(kind, name, arguments, decision)`` asked, in order.
    """

    def __init__(
        self, ask: Asker, *, kinds: set[str] | frozenset[str] = frozenset({"tool"}),
        when: Callable[[Invocation], bool] | None = None,
    ):
        self.ask = ask
        self.kinds = frozenset(kinds)
        self.when = when
        self.decisions: list[tuple[str, str, dict[str, Any], Decision]] = []

    def install(self, hooks: Hooks) -> Approval:
        """Register on ``hooks`` (a context's: ``team.context.hooks``); returns self."""
        hooks.on_invoking(self, kinds=set(self.kinds))
        return self

    async def __call__(self, inv: Invocation) -> None:
        if self.when is not None and not self.when(inv):
            return
        answer = self.ask(inv)
        if inspect.isawaitable(answer):
            answer = await answer
        decision = _as_decision(answer)
        self.decisions.append((inv.kind, inv.name, dict(inv.arguments), decision))
        if decision.verdict == "edit":
            function = inv.metadata.get("function")
            parse = getattr(function, "parse_arguments", None)
            inv.arguments = parse(decision.arguments) if parse is not None else dict(decision.arguments)
        elif decision.verdict == "reject":
            reason = decision.reason or "no reason given"
            if inv.kind == "action":
                inv.cancel(f"rejected by the approver: {reason}")
            else:
                inv.skip(f"The user rejected this call: {reason}")

    @classmethod
    def deferred(
        cls, *, kinds: set[str] | frozenset[str] = frozenset({"tool"}),
        when: Callable[[Invocation], bool] | None = None,
    ) -> Approval:
        """An approval that waits, across processes, for a person's answer.

        The first time a call needs approval its question is written to the run's log and the run
        pauses: :class:`~rolecast.errors.ApprovalPending` ends the round, ``team.run`` returns a history
        whose ``status`` is ``"waiting"`` (``history.pending`` names the approvals), and the process
        may exit. Answer with ``rolecast runs approve RUN [ID]`` / ``reject RUN ID --why TEXT`` /
        ``edit RUN ID --args JSON`` (or :func:`rolecast.runs.approvals.decide`), then run the script
        again with the same ``run_id``: everything before the question is answered from the log, and
        the call goes on as decided. Needs a run store (the answer comes from another process).
        """
        return cls(_DeferredAsker(), kinds=kinds, when=when)

    @classmethod
    def stdin(
        cls, *, kinds: set[str] | frozenset[str] = frozenset({"tool"}),
        when: Callable[[Invocation], bool] | None = None, input: TextIO | None = None, output: TextIO | None = None,
    ) -> Approval:
        """An approval that asks at the terminal: ``[a]pprove, [e]dit, [r]eject``.

        An edit is typed as a JSON object of arguments (asked again until it is one).
        Reading happens in a worker thread, so the event loop (other roles) goes on.
        """
        return cls(_TerminalAsker(input, output), kinds=kinds, when=when)


def _as_decision(answer: Any) -> Decision:
    if isinstance(answer, Decision):
        return answer
    if isinstance(answer, bool):
        return approve() if answer else reject()
    raise UsageError(f"an approver must return a Decision (approve/edit/reject) or a bool, not {answer!r}")


class _DeferredAsker:
    """Answers from the run's log, or writes the question there and pauses the run."""

    def __call__(self, inv: Invocation) -> Decision:
        meter = current_meter()
        log = meter.run_log
        if log is None or log.store is None:
            raise UsageError("Approval.deferred() needs a run store: the answer comes later, from another "
                             "process (give the team a store, or use Approval.stdin())")
        role = meter.role or ""
        approval_id = log.approval_id(role)
        decided = log.decision(approval_id)
        if decided is not None:
            verdict = decided.get("verdict")
            if verdict == "edit":
                return edit(decided.get("arguments") or {})
            if verdict == "reject":
                return reject(decided.get("reason") or "")
            return approve()
        function = inv.metadata.get("function")
        schema = getattr(function, "json_schema", None)
        log.request_approval(approval_id, {
            "kind": inv.kind, "name": inv.name, "arguments": _plain(inv.arguments),
            "schema": schema if isinstance(schema, dict) else {},
        }, role=role)
        raise ApprovalPending(log.run_id, approval_id, inv.name, role)


def _plain(arguments: dict[str, Any]) -> dict[str, Any]:
    """The arguments as JSON can hold them (what a person reads and edits)."""
    return json.loads(json.dumps(arguments, ensure_ascii=False, default=str))


class _TerminalAsker:
    def __init__(self, input: TextIO | None, output: TextIO | None):
        self.input = input
        self.output = output

    def _readline(self, prompt: str) -> str:
        out = self.output or sys.stdout
        out.write(prompt)
        out.flush()
        line = (self.input or sys.stdin).readline()
        if not line:
            raise InvocationCancelled("approval", "no answer from the approver (end of input)")
        return line.strip()

    def _ask(self, inv: Invocation) -> Decision:
        shown = json.dumps(inv.arguments, ensure_ascii=False, default=str)
        header = f"\n{inv.kind} {inv.name} wants to run with {shown}\n"
        while True:
            choice = self._readline(header + "[a]pprove, [e]dit, [r]eject? ").lower()
            header = ""
            if choice in ("a", "approve", "y", "yes"):
                return approve()
            if choice in ("r", "reject", "n", "no"):
                return reject(self._readline("reason (optional): "))
            if choice in ("e", "edit"):
                while True:
                    text = self._readline("arguments as a JSON object: ")
                    try:
                        value = json.loads(text)
                    except json.JSONDecodeError as exc:
                        (self.output or sys.stdout).write(f"not JSON: {exc}\n")
                        continue
                    if isinstance(value, dict):
                        return edit(value)
                    (self.output or sys.stdout).write("a JSON object is needed, such as {\"x\": 1}\n")

    async def __call__(self, inv: Invocation) -> Decision:
        return await asyncio.to_thread(self._ask, inv)


__all__ = ["Approval", "Decision", "approve", "edit", "reject"]
