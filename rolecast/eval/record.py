"""A finished run as the checks read it, through the runs door: no team, no model.

:func:`read_run` gathers what the checks look at from the store's events — the messages in
order (who sent them, the action that caused each), the team's model calls (a judge's calls,
logged in the same run under a ``judge:`` role, are kept apart), what the run cost, and how it
stopped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..runs.base import RunStore
from ..runs.events import LLM_CALL, MESSAGE, RUN_STARTED, RUN_STOPPED, llm_call, message, run_started, run_stopped

#: the role a judge's calls are logged under, in the run it judged: ``judge:<check key>``
JUDGE_ROLE = "judge:"
#: stop reasons of a run that did not end on its own: it was interrupted and is resumed, not scored
INTERRUPTED = ("error: CancelledError", "error: KeyboardInterrupt", "error: SystemExit")


@dataclass
class Said:
    """One published message: its sender, the action that caused it (short name), its text."""

    sender: str
    action: str
    content: str
    profile: str = ""


@dataclass
class RunRecord:
    """What a run did, as read back from the store."""

    run_id: str
    tags: dict[str, str] = field(default_factory=dict)
    messages: list[Said] = field(default_factory=list)
    calls: int = 0
    live_calls: int = 0
    reused_calls: int = 0
    judge_calls: int = 0
    cost: float = 0.0
    stop_reason: str | None = None
    seconds: float = 0.0
    idea: str = ""

    @property
    def finished(self) -> bool:
        """The run ended (with or without an error of its own); an interrupted one did not."""
        return self.stop_reason is not None and not self.stop_reason.startswith(INTERRUPTED)

    @property
    def failed(self) -> str | None:
        """The run's own error (``"error: ActionFailed"``), or None."""
        reason = self.stop_reason or ""
        return reason if reason.startswith("error:") or reason in ("deadline", "budget") else None

    def said_by(self, who: str | None) -> list[Said]:
        """The messages of the role named (or profiled) ``who``; every role's (not the user's) for None."""
        if who is None:
            return [m for m in self.messages if m.sender != "user"]
        return [m for m in self.messages if who in (m.sender, m.profile)]

    @property
    def transcript(self) -> str:
        return "\n\n".join(f"[{m.sender or m.profile} / {m.action}]\n{m.content}" for m in self.messages)


def _action_name(cause_by: Any) -> str:
    return str(cause_by or "").rsplit(".", 1)[-1]


def read_run(store: RunStore, run_id: str) -> RunRecord:
    """The run ``run_id`` as the checks read it (an empty record when the store holds none of it)."""
    record = RunRecord(run_id)
    first = last = None
    profiles: dict[str, str] = {}
    for event in store.events(run_id, [RUN_STARTED, MESSAGE, LLM_CALL, RUN_STOPPED]):
        first = first if first is not None else event.ts
        last = event.ts
        if event.kind == RUN_STARTED:
            started = run_started(event)
            record.tags = dict(started.get("tags") or record.tags)
            record.idea = record.idea or str(started.get("idea") or "")
            profiles.update({r.get("name", ""): r.get("profile", "") for r in started.get("roles", [])})
        elif event.kind == MESSAGE:
            data = message(event)
            sender = str(data.get("sent_from") or "")
            record.messages.append(Said(sender, _action_name(data.get("cause_by")), str(data.get("content") or ""),
                                        profiles.get(sender, str(data.get("role") or ""))))
        elif event.kind == LLM_CALL:
            call = llm_call(event)
            if event.role.startswith(JUDGE_ROLE):
                record.judge_calls += 0 if call.get("error") else 1
            elif not call.get("error"):
                record.calls += 1
        elif event.kind == RUN_STOPPED:
            stopped = run_stopped(event)
            record.stop_reason = str(stopped.get("reason"))
            record.cost = float(stopped.get("cost") or 0.0)
            record.live_calls = int(stopped.get("live_calls") or 0)
            record.reused_calls = int(stopped.get("reused_calls") or 0)
    if first is not None and last is not None:
        record.seconds = max(0.0, last - first)
    return record


__all__ = ["INTERRUPTED", "JUDGE_ROLE", "RunRecord", "Said", "read_run"]
