"""The exception tree of rolecast.

Every error the framework raises on purpose derives from :class:`RolecastError`, so
``except RolecastError`` catches all of them and nothing else::

    RolecastError
    ├── UsageError                  the caller used the API wrongly
    │   ├── ConfigError             a model or setting is missing or invalid
    │   ├── VectorIndexError        a vector or record does not fit a vector index (dimension, id, file)
    │   ├── ScriptExhausted         a scripted test model was called more often than scripted
    │   ├── NestedEventLoopError    a sync helper was called inside a running loop
    │   ├── PlanEditError           a plan edit names a task that is not (or already) there
    │   ├── NothingToRun            a bare Action was run with no run() of its own, instruction or input
    │   ├── NodeNotFilled           an ActionNode was reviewed or revised before it was filled
    │   ├── ModelRequestsBlocked    a real model was asked while model requests are off (tests)
    │   ├── ApprovalAnswered        a deferred approval was answered already (the first answer holds)
    │   ├── UnsafeCommand           a run's recorded command is not a Python script rolecast would record
    │   ├── DataError               saved data (a message, a memory, a plan file) cannot be read
    │   │   └── BodyTooLarge        an HTTP request's body (sent without a length) grew past the limit
    │   ├── ShadowedPackage         a project's own actions/, roles/ … folder hides rolecast's package
    │   ├── TuningError             a tuning file cannot be used (a key the team lacks, a bad value)
    │   └── EvalsetError            an evalset file has an unknown key or check, or a bad value
    ├── RunError                    something failed while a team was running
    │   ├── BudgetExceeded          the next LLM call would pass the budget
    │   ├── WorkerLost              a runtime worker died and could not be brought back
    │   ├── ActionFailed            an action (or a role's override) raised
    │   ├── PlanError               no valid plan after the allowed re-asks / re-plans
    │   ├── ToolError               a tool could not be found or called
    │   │   └── TemplateError       a prompt template could not be rendered
    │   ├── SandboxError            the code sandbox could not run the code
    │   ├── StoreError              the run store could not be written or read
    │   │   ├── RunInUse            the run is being written by another live process (host, pid, since)
    │   │   └── DamagedRun          a run's log holds an event that cannot be read (not JSON, wrong shape)
    │   ├── ReplayError             a resumed or replayed run met a call its log cannot answer
    │   │   ├── ReplayMismatch      the run asked something else than the log recorded here
    │   │   └── ReplayMissing       a replayed run asked something the log never recorded
    │   ├── DeadlineExceeded        a round or a run took longer than its deadline
    │   └── LLMError                the model could not give a usable answer
    │       ├── LLMConnectionError  the server could not be reached (after retries)
    │       ├── LLMTimeoutError     the server did not answer in time (after retries)
    │       ├── LLMRateLimitError   HTTP 429 (after retries)
    │       ├── LLMAPIError         any other error status from the server
    │       │   └── ContextOverflow  a prompt past the model's window (before it is sent; never retried)
    │       ├── LLMResponseError    the server answered, but not a usable completion (after retries)
    │       │   ├── LLMIncompleteError   a stream broke off before the answer ended
    │       │   └── LLMEmptyAnswerError  no text and no tool call where an answer was expected
    │       └── OutputParseError    the model's text does not have the asked format
    │           ├── InvalidChoice   a state-selection answer that is not a number in range
    │           └── PlanParseError  one answer could not be read as a plan (the planner re-asks)
    └── ControlFlow                 signals, not failures
        ├── InvocationCancelled     a hook cancelled an action / tool / function call
        ├── HumanStopped            the person playing a role ended the run (exit / end of input)
        ├── ApprovalPending         a deferred approval waits for a person's answer (the run pauses)
        └── Abandoned               a studio comparison was stopped: the client that asked for it left

Errors keep what they are about as attributes (``raw`` text, ``spent`` / ``limit``,
the ``role`` and ``action``) and chain the original exception as ``__cause__``;
they never flatten a traceback into a string.
"""

from __future__ import annotations

import time
from typing import Any


class RolecastError(Exception):
    """Root of every error rolecast raises on purpose."""

    def __reduce__(self) -> tuple[Any, ...]:
        # Subclasses take keyword-only or extra constructor arguments, which plain exception
        # pickling cannot rebuild; errors must cross process boundaries (Ray workers), so
        # rebuild from the message and the attributes instead of calling __init__.
        state = {k: v for k, v in self.__dict__.items() if k != "__traceback__"}
        return (_rebuild_error, (type(self), self.args, state))


# ---------------------------------------------------------------- usage errors
class UsageError(RolecastError):
    """The API was used in a way it does not support."""


class ConfigError(UsageError):
    """A model, key or setting the run needs is missing or invalid."""


class VectorIndexError(UsageError):
    """A vector or record does not fit a vector index: another dimension than the index holds,
    an empty or non-finite vector, a bad id or filter, or an index file of another layout."""


class ScriptExhausted(UsageError):
    """A scripted test model was called more times than it has replies (a mistake in the test script)."""


class NestedEventLoopError(UsageError):
    """A synchronous convenience (``run_sync``) was called inside a running event loop."""


class PlanEditError(UsageError, AssertionError):
    """A plan edit (``replace_task``, ``append_task``) names a task id that is not, or is already, in the plan.

    Also an ``AssertionError``, which is what MetaGPT's plan raises there.
    """


class NothingToRun(UsageError, NotImplementedError):
    """A bare :class:`~actions.Action` was run with no ``run`` of its own, no instruction, no
    ``desc`` and no input: there is no prompt to send.

    Also a ``NotImplementedError``, which is what MetaGPT's base ``Action.run`` raises.
    """


class NodeNotFilled(UsageError, RuntimeError):
    """An :class:`~actions.ActionNode` was reviewed, revised or read before ``fill`` gave it output.

    Also a ``RuntimeError``, which is what MetaGPT's ``ActionNode.review`` / ``revise`` raise.
    """


class ModelRequestsBlocked(UsageError):
    """A real model (a server, or a model loaded in this process) was asked while model requests are
    off: ``ROLECAST_ALLOW_MODEL_REQUESTS=0``, or :func:`rolecast.testing.allow_model_requests` (False).
    Raised before the call reaches the model; scripted doubles and answers read from a run log are not
    model requests."""

    def __init__(self, provider: str):
        self.provider = provider
        super().__init__(
            f"{provider} would ask a real model, but model requests are off (ROLECAST_ALLOW_MODEL_REQUESTS=0 or "
            "rolecast.testing.allow_model_requests(False)); use a scripted double from rolecast.testing, or "
            "allow them for this test: `with allow_model_requests(True): ...`"
        )


class ApprovalAnswered(UsageError):
    """A second answer to a deferred approval: the first one holds (``decision``: its verdict, who and when)."""

    def __init__(self, run_id: str, approval_id: str, decision: dict[str, Any]):
        self.run_id = run_id
        self.approval_id = approval_id
        self.decision = decision
        by = f" by {decision['by']}" if decision.get("by") else ""
        when = decision.get("at")
        at = f" at {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(when))}" if isinstance(when, (int, float)) else ""
        super().__init__(f"approval {approval_id!r} of run {run_id!r} was answered already: "
                         f"{decision.get('verdict', '?')}{by}{at}; an approval is answered once")


class UnsafeCommand(UsageError):
    """A command read from a run store (``rolecast runs rerun``) that rolecast would not have recorded:
    not a Python script or module run with this Python; it is refused, never run."""


class DataError(UsageError):
    """Saved data handed to the framework (a message, a memory, a plan file) is malformed.

    Not JSON, nested too deep, or not the shape of the thing it should be; the
    original error is ``__cause__``.
    """


class BodyTooLarge(DataError):
    """A request's body sent to ``rolecast serve`` in chunks with no length grew past the limit while it
    was read (the server answers 413; a body whose stated length is too big is refused before reading)."""


class ShadowedPackage(UsageError):
    """One of rolecast's top-level packages (``actions``, ``roles``, ``environment``, ``memory``) would be
    imported from another place: a project's own folder of that name comes first on ``sys.path``. The
    message names both places and how to fix it."""


class TuningError(UsageError):
    """A tuning file (``Team(tuning=...)``, ``ROLECAST_TUNING``, ``rolecast eval --tuning``) cannot be used: not
    YAML, a key no role or action of the team has (the message names the closest), a value of the wrong kind."""


# ------------------------------------------------------------------ run errors
class EvalsetError(UsageError):
    """An evalset (``rolecast eval``) cannot be used: not YAML/JSON, an unknown key or check (the
    message names the closest known one), a value of the wrong kind, a team that cannot be imported."""


class RunError(RolecastError):
    """Something failed while actions, roles or a team were running."""


class BudgetExceeded(RunError):
    """The next LLM call could take the spend past the budget.

    Raised *before* the call is made, so nothing is paid for that was not allowed:
    ``spent`` so far, ``reserved`` by calls still running, ``needed`` the worst case
    of the refused call (its prompt plus its ``max_tokens``).
    """

    def __init__(
        self, spent: float, limit: float, *, role: str | None = None, model: str | None = None,
        reserved: float = 0.0, needed: float = 0.0,
    ):
        self.spent = spent
        self.limit = limit
        self.role = role
        self.model = model
        self.reserved = reserved
        self.needed = needed
        who = f" (role {role!r}, model {model!r})" if role or model else ""
        more = f"; ${reserved:.6f} reserved by calls running, this call may cost ${needed:.6f}" if needed else ""
        super().__init__(f"budget exceeded: spent ${spent:.6f} of ${limit:.6f}{more}{who}")


class WorkerLost(RunError):
    """A worker of a distributed runtime died and was not brought back (restarts exhausted)."""

    def __init__(self, worker: str, roles: list[str] | None = None, cause: BaseException | None = None):
        self.worker = worker
        self.roles = list(roles or [])
        self.cause = cause
        shown = ", ".join(self.roles[:5]) + (f" and {len(self.roles) - 5} more" if len(self.roles) > 5 else "")
        super().__init__(f"worker {worker} (roles {shown}) died and could not be restarted: {cause}")


class ActionFailed(RunError):
    """An action raised while a role was acting; the original error is ``__cause__``."""

    def __init__(self, role: str, action: str, cause: BaseException):
        self.role = role
        self.action = action
        self.cause = cause
        super().__init__(f"role {role!r} failed in action {action!r}: {type(cause).__name__}: {cause}")


class PlanError(RunError):
    """A plan could not be made valid, or could not be carried out after re-planning."""

    def __init__(self, message: str, *, raw: str | None = None, errors: list[str] | None = None):
        self.raw = raw
        self.errors = list(errors or [])
        super().__init__(message)


class ToolError(RunError):
    """A tool or function could not be found, or its arguments were invalid."""


class TemplateError(ToolError):
    """A prompt template could not be rendered (bad syntax, unknown function, bad call)."""


class SandboxError(RunError):
    """The sandbox could not start or run the code (not: the code itself failed)."""


class StoreError(RunError):
    """The run store could not be written or read."""


class RunInUse(StoreError):
    """Another live process writes this run (one writer per run): ``holder`` is its host, pid and
    since when (a Unix time) it holds the run's lease."""

    def __init__(self, run_id: str, *, host: str, pid: int, since: float, heartbeat: float | None = None):
        self.run_id = run_id
        self.host = host
        self.pid = pid
        self.since = since
        self.heartbeat = since if heartbeat is None else heartbeat
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(since))
        super().__init__(
            f"run {run_id!r} is in use by process {pid} on host {host!r} since {when}; wait for it to end "
            "(a holder that died is detected at once on its own host, after the lease times out on another)"
        )


class DamagedRun(StoreError):
    """A run's log holds an event that cannot be read: its payload is not JSON, or not the shape its
    kind has. The other runs of the store still read; ``seq`` is the damaged event's number."""

    def __init__(self, run_id: str, seq: int, kind: str, problem: str):
        self.run_id = run_id
        self.seq = seq
        self.kind = kind
        self.problem = problem
        super().__init__(f"run {run_id!r} is damaged: its event {seq} ({kind}) {problem}")


class ReplayError(RunError):
    """A resumed or replayed run met a model call its log cannot answer."""

    def __init__(self, message: str, *, role: str, action: str, asked: Any, run_id: str = ""):
        self.role = role
        self.action = action
        self.asked = asked
        self.run_id = run_id
        super().__init__(f"run {run_id}: role {role!r} in action {action!r} {message}")


class ReplayMismatch(ReplayError):
    """The run asked the model something else than the log recorded at this point (the script changed)."""

    def __init__(
        self, *, role: str, action: str, recorded: Any, asked: Any, recorded_action: str = "", run_id: str = ""
    ):
        self.recorded = recorded
        super().__init__(
            "asked the model something the log does not hold; the log's next call of this role "
            f"(action {recorded_action!r}) asked {_brief(recorded)}, now it asks {_brief(asked)}",
            role=role, action=action, asked=asked, run_id=run_id,
        )


class ReplayMissing(ReplayError):
    """A replayed run asked the model something the log never recorded."""

    def __init__(self, *, role: str, action: str, asked: Any, run_id: str = ""):
        super().__init__(f"has no recorded answer to replay for {_brief(asked)}",
                         role=role, action=action, asked=asked, run_id=run_id)


def _rebuild_error(cls: type[RolecastError], args: tuple[Any, ...], state: dict[str, Any]) -> RolecastError:
    error = cls.__new__(cls)
    Exception.__init__(error, *args)
    error.__dict__.update(state)
    return error


def _brief(request: Any, limit: int = 300) -> str:
    text = repr(request)
    return text if len(text) <= limit else text[: limit - 1] + "…"


class LLMError(RunError):
    """The language model did not give a usable answer.

    ``partial`` keeps what a stream delivered before it broke (it was paid for).
    """

    partial: str = ""


class DeadlineExceeded(RunError):
    """A round or a whole run took longer than the deadline it was given (``what``, ``seconds``)."""

    def __init__(self, what: str, seconds: float):
        self.what = what
        self.seconds = seconds
        super().__init__(f"{what} did not finish within its deadline of {seconds:g} s")


class LLMConnectionError(LLMError):
    """The model server could not be reached, after the configured retries."""


class LLMTimeoutError(LLMError):
    """The model server did not answer in time, after the configured retries."""


class LLMRateLimitError(LLMError):
    """The model server kept answering HTTP 429, after the configured retries."""


class LLMAPIError(LLMError):
    """The model server answered with an error status that retrying cannot fix."""

    def __init__(self, message: str, *, status_code: int | None = None, body: Any = None):
        self.status_code = status_code
        self.body = body
        super().__init__(message)


class ContextOverflow(LLMAPIError):
    """A prompt does not fit the model's context window; raised before the request leaves the process
    (or mapped from a provider's own "context exceeded" answer). Never retried: the same prompt
    would not fit again. ``role``, ``action``, ``prompt_tokens``, ``max_tokens`` and ``window`` say
    which call and by how much. (An :class:`LLMAPIError`, which a server's refusal always was; an
    action's ContextOverflow is not wrapped in :class:`ActionFailed`.)"""

    def __init__(
        self, *, role: str = "", action: str = "", prompt_tokens: int | None = None, max_tokens: int = 0,
        window: int | None = None, model: str = "", detail: str = "", status_code: int | None = None,
        body: Any = None, fitted: bool = False,
    ):
        self.role = role
        self.fitted = fitted  # the history the action read was already fitted to the window
        self.action = action
        self.prompt_tokens = prompt_tokens
        self.max_tokens = max_tokens
        self.window = window
        self.model = model
        self.detail = detail
        super().__init__(self._text(), status_code=status_code, body=body)

    def _text(self) -> str:
        who = ", ".join(x for x in (f"role {self.role!r}" if self.role else "",
                                    f"action {self.action!r}" if self.action else "") if x) or "a model call"
        size = f"its prompt ({self.prompt_tokens} tokens)" if self.prompt_tokens is not None else "its prompt"
        room = f" and the room for its answer ({self.max_tokens} tokens, max_tokens)" if self.max_tokens else ""
        window = f"the context window ({self.window} tokens)" if self.window else "the context window"
        model = f" of {self.model}" if self.model else ""
        detail = f" [{self.detail}]" if self.detail else ""
        verb = "do not" if self.max_tokens else "does not"
        larger = "use a model with a larger window (context_window: in the configuration, n_ctx: for a local model)"
        if self.fitted:  # compaction cannot help: the history the action read was already cut to fit
            return (f"{who}: {size}{room} {verb} fit {window}{model}{detail}, though the history it read was "
                    f"already fitted to the window (compaction cannot help): the rest is the action's own text. "
                    f"Shorten its template or instruction, lower max_tokens, or {larger}")
        return (f"{who}: {size}{room} {verb} fit {window}{model}{detail}. Shorten the prompt, lower "
                f"max_tokens, turn on compaction (Role(compaction=True), Team(compaction=True), or "
                f"ROLECAST_COMPACTION=1 for a script as it is), or {larger}")

    def located(self, role: str, action: str) -> ContextOverflow:
        """This error naming ``role`` and ``action`` where it did not know them yet."""
        if (self.role or not role) and (self.action or not action):
            return self
        return ContextOverflow(role=self.role or role, action=self.action or action,
                               prompt_tokens=self.prompt_tokens, max_tokens=self.max_tokens, window=self.window,
                               model=self.model, detail=self.detail, status_code=self.status_code, body=self.body,
                               fitted=self.fitted)

    def after_fitting(self) -> ContextOverflow:
        """This error, raised again where the history its action read was already fitted to the window (its
        advice then says so, not "turn on compaction")."""
        return ContextOverflow(role=self.role, action=self.action, prompt_tokens=self.prompt_tokens,
                               max_tokens=self.max_tokens, window=self.window, model=self.model, detail=self.detail,
                               status_code=self.status_code, body=self.body, fitted=True)


class LLMResponseError(LLMError):
    """The server answered, but not with a usable completion: malformed JSON, an HTML or
    plain-text page, no ``choices``, garbled server-sent events. Retried like a 5xx."""

    def __init__(self, message: str, *, body: Any = None):
        self.body = body
        super().__init__(message)


class LLMIncompleteError(LLMResponseError):
    """A streamed answer stopped before it ended (no ``finish_reason``, no ``[DONE]``).

    ``partial`` holds the text that arrived; it is never returned as if it were the answer.
    """


class LLMEmptyAnswerError(LLMResponseError):
    """The model answered with no text and no tool call (``content: null``) where an answer was expected."""


class OutputParseError(LLMError):
    """The model's answer does not have the format that was asked for.

    ``raw`` keeps the full answer so that nothing is lost.
    """

    def __init__(self, message: str, *, raw: str = "", errors: list[str] | None = None):
        self.raw = raw
        #: every attempt's error, when a re-ask loop gave up (the last one is the message's)
        self.errors = list(errors or [])
        super().__init__(message)


class InvalidChoice(OutputParseError):
    """A state-selection answer that is not a whole number in ``-1 … n_options-1``."""

    def __init__(self, raw: str, n_options: int):
        self.n_options = n_options
        super().__init__(
            f"answer {raw!r} is not a whole number between -1 and {n_options - 1}", raw=raw
        )


class PlanParseError(OutputParseError):
    """One answer of the model could not be read as a plan (the planner re-asks)."""


# ---------------------------------------------------------------- control flow
class ControlFlow(RolecastError):
    """Signals used to steer a run; not failures."""


class InvocationCancelled(ControlFlow):
    """A hook cancelled an action, tool or prompt-function call (``kind``: which, when a hook cancelled
    it: a role's turn whose *action* was cancelled ends with no message, and the run goes on)."""

    def __init__(self, name: str, reason: str = "", *, kind: str = ""):
        self.name = name
        self.reason = reason
        self.kind = kind
        super().__init__(f"invocation of {name!r} cancelled" + (f": {reason}" if reason else ""))


class HumanStopped(ControlFlow):
    """The person playing a role (``Role(is_human=True)``) typed ``exit``/``quit``, or their input ended."""


class ApprovalPending(ControlFlow):
    """A deferred approval (:meth:`rolecast.control.approval.Approval.deferred`) is waiting for a person's
    answer: the run pauses (``team.run`` returns a history whose ``status`` is ``"waiting"``); answer
    with ``rolecast runs approve|reject|edit RUN ID`` and run the script again with the same run id."""

    def __init__(self, run_id: str, approval_id: str, name: str = "", role: str = ""):
        self.run_id = run_id
        self.approval_id = approval_id
        self.name = name
        self.role = role
        super().__init__(f"run {run_id!r}: {role or 'a role'} waits for approval {approval_id!r} of {name!r}")


class Abandoned(ControlFlow):
    """A studio comparison was stopped between two steps (its ``stop()`` said so: the client left)."""


__all__ = [
    "Abandoned",
    "ActionFailed",
    "ApprovalAnswered",
    "ApprovalPending",
    "BodyTooLarge",
    "BudgetExceeded",
    "ConfigError",
    "ContextOverflow",
    "ControlFlow",
    "DamagedRun",
    "DataError",
    "DeadlineExceeded",
    "EvalsetError",
    "HumanStopped",
    "InvalidChoice",
    "InvocationCancelled",
    "LLMAPIError",
    "LLMConnectionError",
    "LLMEmptyAnswerError",
    "LLMError",
    "LLMIncompleteError",
    "LLMRateLimitError",
    "LLMResponseError",
    "LLMTimeoutError",
    "ModelRequestsBlocked",
    "NestedEventLoopError",
    "NodeNotFilled",
    "NothingToRun",
    "OutputParseError",
    "PlanEditError",
    "PlanError",
    "PlanParseError",
    "ReplayError",
    "ReplayMismatch",
    "ReplayMissing",
    "RolecastError",
    "RunError",
    "RunInUse",
    "SandboxError",
    "ScriptExhausted",
    "ShadowedPackage",
    "StoreError",
    "TemplateError",
    "ToolError",
    "TuningError",
    "UnsafeCommand",
    "UsageError",
    "VectorIndexError",
    "WorkerLost",
]
