"""The built-in Python tool: model-written code run in the sandbox, never in this process.

:class:`PythonTool` (``python_tool()``) runs the model's code with
:func:`actions.tools.sandbox.run_python` — in a limited subprocess — and answers with
what it printed, or the error's last line (``NameError: name 'fibonacci' is not
defined``). Inside a tool loop (:func:`tool_run_scope`) definitions persist between
the calls of that one run.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from rolecast.context import Context

from .arguments import strip_code_fence
from .function import KernelFunction, ToolParameter
from .sandbox import PythonSession, run_python

# --------------------------------------------------------------- run scoping
_RUN_STATE: ContextVar[dict[Any, Any] | None] = ContextVar("rolecast_tool_run_state", default=None)


@contextmanager
def tool_run_scope() -> Iterator[dict[Any, Any]]:
    """Mark one run of a tool loop: stateful tools keep their state here, and only here.

    Tool loops open one scope per run, so two runs (even concurrent ones, each in its
    own task) never share a Python session. Outside any scope tools are stateless.
    """
    state: dict[Any, Any] = {}
    token = _RUN_STATE.set(state)
    try:
        yield state
    finally:
        _RUN_STATE.reset(token)


def current_run_state() -> dict[Any, Any] | None:
    """The state dictionary of the innermost :func:`tool_run_scope`, or None."""
    return _RUN_STATE.get()


# ---------------------------------------------------------------- python tool
PYTHON_TOOL_DESCRIPTION = (
    "A Python shell. Use this to execute python commands. Input should be a valid python command. "
    "If you want to see the output of a value, you should print it out with `print(...)`."
)

class PythonTool(KernelFunction):
    """Runs Python code in the sandbox and reports stdout, or the error's last line.

    Within one :func:`tool_run_scope` (one agent run) the tool keeps a
    :class:`~actions.tools.sandbox.PythonSession`, so a function defined in one call can be
    used in the next; with ``keep_state=False``, or outside a scope, every call starts
    from nothing.
    """

    def __init__(
        self,
        *,
        name: str = "python",
        description: str = PYTHON_TOOL_DESCRIPTION,
        timeout: float = 10,
        memory_mb: int | None = 512,
        max_output: int = 20_000,
        keep_state: bool = True,
        echo_last_expression: bool = False,
        env: Mapping[str, str] | None = None,
        return_direct: bool = False,
        plugin_name: str | None = None,
    ):
        super().__init__(
            name,
            description,
            [ToolParameter("code", "the Python code to run", str)],
            plugin_name=plugin_name,
            return_direct=return_direct,
            human_name="Python",
        )
        self.timeout = timeout
        self.memory_mb = memory_mb
        self.max_output = max_output
        self.keep_state = keep_state
        self.echo_last_expression = echo_last_expression
        self.env = dict(env or {})

    def _session(self) -> PythonSession | None:
        state = current_run_state()
        if not self.keep_state or state is None:
            return None
        key = ("python-session", id(self))
        session = state.get(key)
        if session is None:
            session = state[key] = PythonSession(
                timeout=self.timeout,
                memory_mb=self.memory_mb,
                max_output=self.max_output,
                env=self.env,
                echo_last_expression=self.echo_last_expression,
            )
        return session

    async def _call(self, arguments: dict[str, Any], context: Context) -> str:
        code = strip_code_fence(str(arguments["code"]))
        session = self._session()
        if session is not None:
            result = await session.run(code)
        else:
            result = await run_python(
                code,
                timeout=self.timeout,
                memory_mb=self.memory_mb,
                max_output=self.max_output,
                env=self.env,
                echo_last_expression=self.echo_last_expression,
            )
        return result.observation()


def python_tool(**kwargs: Any) -> PythonTool:
    """A :class:`PythonTool`; keywords as its constructor (``name``, ``timeout``, …)."""
    return PythonTool(**kwargs)


__all__ = [
    "PYTHON_TOOL_DESCRIPTION",
    "PythonTool",
    "current_run_state",
    "python_tool",
    "tool_run_scope",
]
