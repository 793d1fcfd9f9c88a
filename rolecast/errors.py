"""The exception tree of rolecast.

Every error the framework raises on purpose derives from :class:`RolecastError`, so
``except RolecastError`` catches all of them and nothing else::

    RolecastError
    ├── UsageError                  the caller used the API wrongly
    │   ├── ConfigError             a model or setting is missing or invalid
    │   ├── ScriptExhausted         a scripted test model was called more often than scripted
    │   └── NestedEventLoopError    a sync helper was called inside a running loop
    ├── RunError                    something failed while a team was running
    │   ├── BudgetExceeded          the next LLM call would pass the budget
    │   ├── ActionFailed            an action (or a role's override) raised
    │   ├── PlanError               no valid plan after the allowed re-asks / re-plans
    │   ├── ToolError               a tool could not be found or called
    │   │   └── TemplateError       a prompt template could not be rendered
    │   ├── SandboxError            the code sandbox could not run the code
    │   ├── StoreError              the run store could not be written or read
    │   ├── ReplayError             a resumed or replayed run met a call its log cannot answer
    │   │   ├── ReplayMismatch      the run asked something else than the log recorded here
    │   │   └── ReplayMissing       a replayed run asked something the log never recorded
    │   └── LLMError                the model could not give a usable answer
    │       ├── LLMConnectionError  the server could not be reached (after retries)
    │       ├── LLMTimeoutError     the server did not answer in time (after retries)
    │       ├── LLMRateLimitError   HTTP 429 (after retries)
    │       ├── LLMAPIError         any other error status from the server
    │       └── OutputParseError    the model's text does not have the asked format
    │           ├── InvalidChoice   a state-selection answer that is not a number in range
    │           └── PlanParseError  one answer could not be read as a plan (the planner re-asks)
    └── ControlFlow                 signals, not failures
        └── InvocationCancelled     a hook cancelled an action / tool / function call

Errors keep what they are about as attributes (``raw`` text, ``spent`` / ``limit``,
the ``role`` and ``action``) and chain the original exception as ``__cause__``;
they never flatten a traceback into a string.
"""

from __future__ import annotations

from typing import Any


class RolecastError(Exception):
    """Root of every error rolecast raises on purpose."""


# ---------------------------------------------------------------- usage errors
class UsageError(RolecastError):
    """The API was used in a way it does not support."""


class ConfigError(UsageError):
    """A model, key or setting the run needs is missing or invalid."""


class ScriptExhausted(UsageError):
    """A scripted test model was called more times than it has replies (a mistake in the test script)."""


class NestedEventLoopError(UsageError):
    """A synchronous convenience (``run_sync``) was called inside a running event loop."""


# ------------------------------------------------------------------ run errors
class RunError(RolecastError):
    """Something failed while actions, roles or a team were running."""


class BudgetExceeded(RunError):
    """The next LLM call would take the spend past the budget.

    Raised *before* the call is made, so nothing is paid for that was not allowed.
    """

    def __init__(self, spent: float, limit: float, *, role: str | None = None, model: str | None = None):
        self.spent = spent
        self.limit = limit
        self.role = role
        self.model = model
        who = f" (role {role!r}, model {model!r})" if role or model else ""
        super().__init__(f"budget exceeded: spent ${spent:.6f} of ${limit:.6f}{who}")


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


class ReplayError(RunError):
    """A resumed or replayed run met a model call its log cannot answer."""


class ReplayMismatch(ReplayError):
    """The run asked the model something else than the log recorded at this point (the script changed)."""

    def __init__(
        self, *, role: str, action: str, recorded: Any, asked: Any, recorded_action: str = "", run_id: str = ""
    ):
        self.role = role
        self.action = action
        self.recorded = recorded
        self.asked = asked
        self.run_id = run_id
        super().__init__(
            f"run {run_id}: role {role!r} in action {action!r} asked the model something the log does not hold; "
            f"the log's next call of this role (action {recorded_action!r}) asked {_brief(recorded)}, "
            f"now it asks {_brief(asked)}"
        )


class ReplayMissing(ReplayError):
    """A replayed run asked the model something the log never recorded."""

    def __init__(self, *, role: str, action: str, asked: Any, run_id: str = ""):
        self.role = role
        self.action = action
        self.asked = asked
        self.run_id = run_id
        super().__init__(
            f"run {run_id}: replay has no recorded answer for role {role!r} in action {action!r}: {_brief(asked)}"
        )


def _brief(request: Any, limit: int = 300) -> str:
    text = repr(request)
    return text if len(text) <= limit else text[: limit - 1] + "…"


class LLMError(RunError):
    """The language model did not give a usable answer."""


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
    """A hook cancelled an action, tool or prompt-function call."""

    def __init__(self, name: str, reason: str = ""):
        self.name = name
        self.reason = reason
        super().__init__(f"invocation of {name!r} cancelled" + (f": {reason}" if reason else ""))


__all__ = [
    "ActionFailed",
    "BudgetExceeded",
    "ConfigError",
    "ControlFlow",
    "InvalidChoice",
    "InvocationCancelled",
    "LLMAPIError",
    "LLMConnectionError",
    "LLMError",
    "LLMRateLimitError",
    "LLMTimeoutError",
    "NestedEventLoopError",
    "OutputParseError",
    "PlanError",
    "PlanParseError",
    "ReplayError",
    "ReplayMismatch",
    "ReplayMissing",
    "RolecastError",
    "RunError",
    "SandboxError",
    "ScriptExhausted",
    "StoreError",
    "TemplateError",
    "ToolError",
    "UsageError",
]
