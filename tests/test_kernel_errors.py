"""The error tree: every exception class lives in rolecast/errors.py, under the parent its docstring says."""

from __future__ import annotations

import re

import actions  # noqa: F401  (every package imported: a subclass defined anywhere is found)
import environment  # noqa: F401
import memory  # noqa: F401
import rolecast.errors as errors
import roles  # noqa: F401
from rolecast.errors import RolecastError

ARGS = {
    "BudgetExceeded": (0.5, 1.0),
    "ActionFailed": ("role", "action", ValueError("x")),
    "InvalidChoice": ("maybe", 3),
    "InvocationCancelled": ("fn",),
    "DeadlineExceeded": ("round 2", 1.5),
    "ReplayMismatch": (),
    "ReplayMissing": (),
    "ReplayError": ("has no answer",),
    "RunInUse": ("run-1",),
    "ApprovalPending": ("run-1", "Coder-1"),
    "ModelRequestsBlocked": ("OpenAILLM(model='gpt-4o')",),
    "ApprovalAnswered": ("run-1", "Coder-1", {"verdict": "approve", "by": "x", "at": 0.0}),
    "DamagedRun": ("run-1", 3, "message", "is not JSON"),
    "ContextOverflow": (),
}
KWARGS = {
    "ReplayMismatch": {"role": "r", "action": "a", "recorded": {"last": "x"}, "asked": {"last": "y"}},
    "ReplayMissing": {"role": "r", "action": "a", "asked": {"last": "y"}},
    "ReplayError": {"role": "r", "action": "a", "asked": {"last": "y"}},
    "RunInUse": {"host": "h", "pid": 7, "since": 0.0},
    "ContextOverflow": {"role": "r", "action": "a", "prompt_tokens": 9000, "max_tokens": 512, "window": 8192},
}


def _subclasses(cls: type) -> list[type]:
    found = []
    for sub in cls.__subclasses__():
        found.append(sub)
        found.extend(_subclasses(sub))
    return found


_LINE = re.compile(r"^    ((?:[│ ]   )*)((?:[├└]── )?)([A-Z]\w+)(?:\s{2,}.*)?$")


def _documented_tree() -> dict[str, str]:
    """child name → parent name, read from the module docstring's drawing."""
    parents: dict[str, str] = {}
    stack: list[str] = []
    for line in (errors.__doc__ or "").splitlines():
        match = _LINE.match(line)
        if not match:
            continue
        depth = len(match.group(1)) // 4 + (1 if match.group(2) else 0)
        del stack[depth:]
        if stack:
            parents[match.group(3)] = stack[-1]
        stack.append(match.group(3))
    return parents


def test_every_rolecast_error_is_defined_exported_and_documented_under_its_parent():
    tree = _documented_tree()
    classes = _subclasses(RolecastError)
    assert len(classes) >= 20
    for cls in classes:
        assert cls.__module__ == "rolecast.errors", f"{cls.__qualname__} is defined in {cls.__module__}"
        assert cls.__name__ in errors.__all__, f"{cls.__name__} is not exported"
        assert tree.get(cls.__name__) == cls.__base__.__name__, f"{cls.__name__} is not drawn under its parent"


def test_every_error_keeps_its_cause_when_raised_from_another():
    for cls in _subclasses(RolecastError):
        name = cls.__name__
        error = cls(*ARGS.get(name, ("message",)), **KWARGS.get(name, {}))
        try:
            try:
                raise KeyError("original")
            except KeyError as original:
                raise error from original
        except RolecastError as caught:
            assert isinstance(caught.__cause__, KeyError) and str(caught)


def test_a_test_script_mistake_is_a_usage_error_not_a_server_failure():
    assert issubclass(errors.ScriptExhausted, errors.UsageError)
    assert not issubclass(errors.ScriptExhausted, errors.LLMError)
