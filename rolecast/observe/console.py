"""A live view of a team run in the terminal: one reader of the run's event stream.

:class:`RunConsole` subscribes to a :class:`~rolecast.runs.log.RunLog` (``Team.run(console=True)``
does it for you) and shows, as the run goes: a header per round, which role is
thinking and on which action, each message as it is published (sender → receivers,
action, content), the model's tokens as they stream (where the provider streams), a
running count of calls, tokens and cost per role, and a summary table when the run
stops (messages, calls, tokens and cost per role, the stop reason, the run id).

On a terminal it draws with `rich <https://rich.readthedocs.io>`_ (a live panel at
the bottom; messages scroll above it). When the output is not a terminal (a pipe, a
file, CI) it writes plain lines without colours or redraws, and no streamed tokens.
``rich`` is imported only when a terminal view is opened.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, TextIO, TypeVar

from ..accounting.cost import CostManager
from ..errors import ConfigError, RolecastError
from ..runs import events as run_events
from ..runs.approvals import EXIT_WAITING
from ..runs.events import HISTORY_FITTED, MESSAGE_ROUTE_TO_ALL, STATE_INVALID
from ..runs.store import (
    LLM_CALL,
    MESSAGE,
    ROUND_STARTED,
    RUN_STARTED,
    RUN_STOPPED,
    TURN_FAILED,
    TURN_FINISHED,
    TURN_STARTED,
    RunEvent,
)
from .printable import printable

THINKING = "thinking"  # passing event: a role starts an action ({"action": name})
LLM_TOKEN = "llm_token"  # passing event: a chunk of streamed model text ({"text": chunk})
COMPACTED_EVENT = "compacted"  # passing event: a role's older messages became a summary ({"replaced", "kept"})
_ALL = MESSAGE_ROUTE_TO_ALL
T = TypeVar("T")


@dataclass
class RoleStats:
    """What the console counts for one role."""

    name: str
    profile: str = ""
    messages: int = 0
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    failures: int = 0
    state: str = "waiting"
    streamed: str = ""  # the tail of the answer being streamed

    @property
    def label(self) -> str:
        """The role as shown: its name (and profile), control characters escaped."""
        return printable(f"{self.name} ({self.profile})" if self.profile and self.profile != self.name else self.name)


def _action_name(cause_by: str) -> str:
    return cause_by.rsplit(".", 1)[-1] if cause_by else ""


def _receivers(send_to: Any) -> str:
    names = sorted(send_to) if isinstance(send_to, (list, set, tuple)) else [str(send_to)]
    return "everyone" if not names or _ALL in names else ", ".join(names)


def _clip(text: str, max_lines: int, max_chars: int) -> str:
    lines = text.strip().splitlines()
    more = len(lines) - max_lines
    text = "\n".join(lines[:max_lines])
    if len(text) > max_chars:
        text, more = text[:max_chars] + "…", max(more, 0)
    return text + (f"\n… ({more} more line{'s' if more != 1 else ''})" if more > 0 else "")


class RunConsole:
    """Renders one run's events (a :class:`~rolecast.runs.log.RunLog` subscriber).

    ``file`` defaults to ``sys.stdout``; ``rich`` forces (``True``) or refuses (``False``)
    the terminal view, and by default follows ``file.isatty()``. ``max_lines`` bounds
    how much of each message is shown. Call :meth:`close` if a run ends without a
    ``run_stopped`` event (``Team.run`` does). ``costs`` (a
    :class:`~rolecast.accounting.cost.CostManager`) is where the per-role figures come from when given;
    otherwise they are counted from the ``llm_call`` events.
    """

    def __init__(
        self, file: TextIO | None = None, *, rich: bool | None = None, max_lines: int = 12, width: int | None = None,
        costs: CostManager | None = None,
    ):
        self.file = file if file is not None else sys.stdout
        is_tty = bool(getattr(self.file, "isatty", lambda: False)())
        self.rich = is_tty if rich is None else rich
        self.max_lines = max_lines
        #: the team's cost manager, when known (``Team.run`` sets it): the figures per role come
        #: from it, so calls that logged no event (a provider outside the seam's log) still count
        self.costs = costs
        self.roles: dict[str, RoleStats] = {}
        self.run_id = ""
        self.rounds = 0
        self.stop_reason: str | None = None
        self.total_cost: float | None = None
        #: model calls answered from another run's log (a rerun with ``reuse=``), what they cost there,
        #: and those that reached a model (from the run's stop)
        self.reused_calls = 0
        self.saved_cost = 0.0
        self.live_calls = 0
        self.closed = False
        self._last_fitted: tuple[Any, ...] | None = None
        self._lock = threading.RLock()
        self._live: Any = None
        self._console: Any = None
        if self.rich:
            from rich.console import Console

            self._console = Console(file=self.file, width=width, force_terminal=True, highlight=False)

    # ----------------------------------------------------------------- dispatch
    def __call__(self, event: RunEvent) -> None:
        with self._lock:
            if self.closed:
                return
            handler = self._HANDLERS.get(event.kind)
            if handler is not None:
                handler(self, event)
                self._refresh()

    def stats(self, role: str) -> RoleStats:
        """The counters of ``role`` (created on first sight)."""
        if role not in self.roles:
            self.roles[role] = RoleStats(role)
        return self.roles[role]

    def _on_run_started(self, event: RunEvent) -> None:
        data = event.data
        self.run_id = event.run_id
        for spec in data.get("roles") or []:
            stats = self.stats(str(spec.get("name", "")))
            stats.profile = str(spec.get("profile") or "")
        idea = str(data.get("idea") or "")
        what = "resuming run" if data.get("resumed") else "run"
        team = printable(data.get("team") or "-")
        head = f"{what} {printable(event.run_id)} · team {team} · {len(self.roles)} role(s)"
        budget = data.get("investment")
        if budget is not None:
            head += f" · budget ${float(budget):.2f}"
        self._rule(head)
        if idea:
            self._line(f"idea: {_clip(idea, 3, 400)}", style="bold")
        if self.rich and self._live is None:
            from rich.live import Live

            self._live = Live(self._panel(), console=self._console, refresh_per_second=8, transient=True)
            self._live.start()

    def _on_round_started(self, event: RunEvent) -> None:
        self.rounds = max(self.rounds, event.round)
        self._rule(f"round {event.round}")

    def _on_turn_started(self, event: RunEvent) -> None:
        self.stats(event.role).state = "turn started"

    def _on_thinking(self, event: RunEvent) -> None:
        stats = self.stats(event.role)
        action = str(event.data.get("action") or "")
        state = f"thinking on {action}" if action else "thinking"
        if state == stats.state:  # a role's _act override running the same action: said once
            return
        stats.state = state
        stats.streamed = ""
        if not self.rich:
            self._line(f"… {stats.label} is thinking on {action or '?'}")

    def _on_token(self, event: RunEvent) -> None:
        stats = self.stats(event.role)
        stats.streamed = (stats.streamed + str(event.data.get("text") or ""))[-400:]

    def _on_llm_call(self, event: RunEvent) -> None:
        stats = self.stats(event.role)
        data = event.data
        usage = data.get("usage") or run_events.usage(event) or {}  # ("usage": a Ray worker's summary)
        stats.calls += 1
        stats.prompt_tokens += int(usage.get("prompt_tokens") or 0)
        stats.completion_tokens += int(usage.get("completion_tokens") or 0)
        stats.cost += float(data.get("cost") or 0.0)
        stats.streamed = ""
        if data.get("error"):
            self._line(f"! {stats.label}: model call failed: {data['error']}", style="yellow")

    def _on_message(self, event: RunEvent) -> None:
        message = event.data.get("message") or {}
        sender = str(message.get("sent_from") or event.role or message.get("role") or "user")
        stats = self.stats(sender) if sender in self.roles else None
        if stats is not None:
            stats.messages += 1
            stats.state = "sent a message"
        label = stats.label if stats is not None else printable(sender)
        action = _action_name(str(message.get("cause_by") or ""))
        head = printable(f"{label} → {_receivers(message.get('send_to'))}" + (f" · {action}" if action else ""))
        body = printable(_clip(str(message.get("content") or ""), self.max_lines, 4000), lines=True)
        if self.rich:
            from rich.padding import Padding
            from rich.text import Text

            self._print(Text(head, style="bold cyan"))
            self._print(Padding(Text(body or "(empty)"), (0, 0, 0, 4)))
        else:
            self._line(head)
            for line in (body or "(empty)").splitlines():
                self._line("    " + line)

    def _on_turn_finished(self, event: RunEvent) -> None:
        self.stats(event.role).state = "done"

    def _on_turn_failed(self, event: RunEvent) -> None:
        stats = self.stats(event.role)
        error = event.data.get("error") or "?"
        kind = event.data.get("type") or "error"
        if kind == "ApprovalPending":  # (not a failure: the turn waits for a person's answer)
            stats.state = "waiting for approval"
            self._line(f"⏸ {stats.label} waits: {error} — answer with rolecast runs approve|reject|edit",
                       style="bold yellow")
            return
        stats.failures += 1
        stats.state = "failed"
        self._line(f"✗ {stats.label} failed: {kind}: {error}", style="bold red")

    def _on_state_invalid(self, event: RunEvent) -> None:
        stats = self.stats(event.role)
        stats.state = "invalid choice"
        n = int(event.data.get("n_options") or 0)
        raw = str(event.data.get("raw") or "")[:200]
        self._line(f"! {stats.label}: the answer to \"choose the next action\" was {raw!r}, not a number "
                   f"from -1 to {n - 1}; its turn ended", style="yellow")

    def _on_history_fitted(self, event: RunEvent) -> None:
        data = event.data
        key = (event.role, data.get("purpose"), data.get("omitted"))
        if key == self._last_fitted:  # (the same fit again, turn after turn: said once)
            return
        self._last_fitted = key
        label = self.stats(event.role).label if event.role in self.roles else printable(event.role or "run")
        self._line(printable(f"↳ {label}: {data.get('purpose')}: left out the {data.get('omitted')} oldest "
                             f"{data.get('unit') or 'message'}(s), kept {data.get('kept')}, to fit the window of "
                             f"{data.get('window')} tokens"), style="dim")

    def _on_compacted(self, event: RunEvent) -> None:
        label = self.stats(event.role).label if event.role in self.roles else printable(event.role or "run")
        self._line(printable(f"↳ {label}: summarised {event.data.get('replaced')} earlier messages into one "
                             f"(the newest {event.data.get('kept')} kept whole)"), style="dim")

    def _on_run_stopped(self, event: RunEvent) -> None:
        self.stop_reason = str(event.data.get("reason") or "")
        self.reused_calls = int(event.data.get("reused_calls") or 0)
        self.saved_cost = float(event.data.get("saved_cost") or 0.0)
        self.live_calls = int(event.data.get("live_calls") or 0)
        self.rounds = int(event.data.get("rounds") or self.rounds)
        cost = event.data.get("cost")
        self.total_cost = float(cost) if cost is not None else None
        self.close()

    _HANDLERS = {
        RUN_STARTED: _on_run_started,
        ROUND_STARTED: _on_round_started,
        TURN_STARTED: _on_turn_started,
        THINKING: _on_thinking,
        LLM_TOKEN: _on_token,
        LLM_CALL: _on_llm_call,
        MESSAGE: _on_message,
        TURN_FINISHED: _on_turn_finished,
        TURN_FAILED: _on_turn_failed,
        STATE_INVALID: _on_state_invalid,
        HISTORY_FITTED: _on_history_fitted,
        COMPACTED_EVENT: _on_compacted,
        RUN_STOPPED: _on_run_stopped,
    }

    def figures(self, stats: RoleStats) -> tuple[int, int, int, float]:
        """(calls, prompt tokens, completion tokens, cost) of a role so far."""
        if self.costs is not None:
            totals = self.costs.by_role.get(stats.name)
            if totals is None:
                return 0, 0, 0, 0.0
            return totals.calls, totals.prompt_tokens, totals.completion_tokens, totals.cost
        return stats.calls, stats.prompt_tokens, stats.completion_tokens, stats.cost

    # ------------------------------------------------------------------ closing
    def close(self) -> None:
        """Stop the live panel and print the summary (once)."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            if self._live is not None:
                self._live.stop()
                self._live = None
            self._summary()

    def _summary(self) -> None:
        rows = [(s.label, s.messages, *self.figures(s)) for s in self.roles.values()]
        total_cost = self.total_cost if self.total_cost is not None else sum(r[5] for r in rows)
        totals = ("total", *(sum(int(r[i]) for r in rows) for i in range(1, 5)), total_cost)
        reason = self.stop_reason or "unfinished"
        footer = printable(f"stopped: {reason} after {self.rounds} round(s) · run id {self.run_id or '-'}")
        if self.reused_calls:
            footer += (f"\nmodel calls: {self.live_calls} live, {self.reused_calls} reused "
                       f"(saved ${self.saved_cost:.4f})")
        headers = ("role", "messages", "calls", "prompt tok", "completion tok", "cost")
        if self.rich:
            from rich.table import Table
            from rich.text import Text

            table = Table(title="run summary", title_justify="left")
            for i, name in enumerate(headers):
                table.add_column(name, justify="left" if i == 0 else "right")
            for row in [*rows, totals]:
                table.add_row(Text(str(row[0])), *(str(v) for v in row[1:5]), f"${row[5]:.4f}")  # not markup
            self._print(table)
            self._line(footer)
            return
        cells = [[str(r[0]), *(str(v) for v in r[1:5]), f"${r[5]:.4f}"] for r in [*rows, totals]]
        widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(headers)]
        fmt = "  ".join(f"{{:{'<' if i == 0 else '>'}{w}}}" for i, w in enumerate(widths))
        self._line("── run summary ──")
        self._line(fmt.format(*headers))
        for c in cells:
            self._line(fmt.format(*c))
        self._line(footer)

    # ---------------------------------------------------------------- rendering
    def _panel(self) -> Any:
        from rich.table import Table
        from rich.text import Text

        table = Table.grid(padding=(0, 2), expand=True)
        for _ in range(4):
            table.add_column(no_wrap=True)
        table.add_column(overflow="ellipsis", no_wrap=True, ratio=1)
        for s in self.roles.values():
            calls, prompt, completion, cost = self.figures(s)
            table.add_row(
                Text(s.label, style="bold"), Text(printable(s.state), style="magenta"),
                f"{calls} calls", f"{prompt + completion} tok · ${cost:.4f}",
                Text(printable(s.streamed.replace("\n", " ⏎ ")[-70:]), style="dim"),
            )
        return table

    def _refresh(self) -> None:
        if self._live is not None:
            self._live.update(self._panel())

    def _print(self, renderable: Any) -> None:
        (self._live.console if self._live is not None else self._console).print(renderable)

    def _line(self, text: str, *, style: str | None = None) -> None:
        """Print one line (or a few): control characters in it are shown escaped, never sent raw."""
        text = printable(text, lines=True)
        if self.rich:
            from rich.text import Text

            self._print(Text(text, style=style or ""))
        else:
            self.file.write(text + "\n")
            self.file.flush()

    def _rule(self, title: str) -> None:
        title = printable(title)
        if self.rich:
            from rich.text import Text  # (a str title would be read as rich markup)

            console = self._console if self._live is None else self._live.console
            console.rule(Text(title))
        else:
            self._line(f"── {title} ──")


#: shows every team run live (1) or none (0) that does not say; unset: shown when stdout is a terminal
CONSOLE_ENV = "ROLECAST_CONSOLE"


def console_by_default() -> bool:
    """Whether a run that does not say (``Team.run(console=None)``) is shown: ``$ROLECAST_CONSOLE`` (1 or 0),
    else whether stdout is a terminal — a script run by a person shows its run as it goes, as MetaGPT's
    stream by default; a pipe, a test, a server's log stay quiet."""
    raw = os.environ.get(CONSOLE_ENV, "").strip().lower()
    if raw in ("1", "true", "on", "yes"):
        return True
    if raw in ("0", "false", "off", "no"):
        return False
    if raw:
        raise ConfigError(f"{CONSOLE_ENV}={raw!r}: give 1 (show every run) or 0 (show none)")
    return bool(getattr(sys.stdout, "isatty", lambda: False)())


def open_console(console: bool | RunConsole | None) -> RunConsole | None:
    """The console for ``Team.run(console=...)``: a given one, a new one for ``True``, none for ``False``;
    ``None`` (not said): :func:`console_by_default`."""
    if isinstance(console, RunConsole):
        return console
    if console is None:
        console = console_by_default()
    return RunConsole() if console else None


def run_script(main: Coroutine[Any, Any, T]) -> T:
    """For scripts and examples: ``asyncio.run(main)``, ending a failure with one line, not a traceback.

    A :class:`~rolecast.errors.RolecastError` prints ``error: <Type>: <message>`` (and
    its notes, such as where a failed run was saved) on stderr and exits with status 1;
    Ctrl-C exits with 130; a run that waits for a deferred approval (``main`` returned a history
    whose ``status`` is ``"waiting"``) exits with :data:`~rolecast.runs.approvals.EXIT_WAITING` (3).
    Set ``ROLECAST_TRACEBACK=1`` to get the full traceback.
    """
    try:
        result = asyncio.run(main)
    except RolecastError as exc:
        if os.environ.get("ROLECAST_TRACEBACK"):
            raise
        lines = [f"error: {type(exc).__name__}: {exc}", *getattr(exc, "__notes__", [])]
        print("\n".join(lines), file=sys.stderr)
        raise SystemExit(1) from None
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        raise SystemExit(130) from None
    if getattr(result, "status", None) == "waiting":  # a run paused for a deferred approval
        pending = ", ".join(getattr(result, "pending", ())) or "?"
        print(f"the run waits for approval {pending}: answer with rolecast runs approve|reject|edit, then run "
              f"this again with the same run id", file=sys.stderr)
        raise SystemExit(EXIT_WAITING)
    return result


__all__ = ["LLM_TOKEN", "THINKING", "RoleStats", "RunConsole", "open_console", "run_script"]
