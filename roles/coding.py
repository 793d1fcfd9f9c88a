"""MetaGPT's Engineer and QaEngineer in single-file form, and what they need: code that is run,
tested and debugged before the team is done (MetaGPT's executable feedback).

* :class:`Engineer` watches the user's requirement and bug reports: it writes the code
  (:class:`~actions.coding.WriteCode`, ``n_candidates`` sampled and checked against the requirement's
  visible examples) and, on a bug report, rewrites it; ``use_code_review`` adds a
  :class:`~actions.coding.WriteCodeReview` of each version.
* :class:`QaEngineer` watches the code: it writes tests once (:class:`~actions.coding.WriteTest`), runs
  them in the sandbox (:class:`~actions.coding.RunCode`) and, on a failure, asks
  :class:`~actions.coding.DebugError` whom to blame: a wrong test is rewritten and run again at once; wrong
  code goes back to the Engineer as a bug report. It stops after ``test_round_allowed`` runs (MetaGPT's
  field and default, 5), or when every test passes.

What differs from MetaGPT: its Engineer works through a project's task list into a git repository and
its QaEngineer tests each file of it and rewrites the code itself; here there is one file, the code is
the Engineer's message, and the Engineer rewrites its own code from the QaEngineer's bug report.
:func:`final_code` reads the team's answer from a run's history; :func:`environment.coding_team` makes the team.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from actions import UserRequirement
from actions.coding import DebugError, RunCode, WriteCode, WriteCodeReview, WriteTest
from actions.structured import parse_code
from memory import Message
from memory.message_fields import any_to_str
from rolecast.errors import UsageError

from .role import Role

_WRITE_CODE, _DEBUG = any_to_str(WriteCode), any_to_str(DebugError)


def _requirement(role: Role) -> str:
    """The user's requirement: the first message caused by it (the idea the team was given), from the
    role's whole memory (its index by cause: not the view fitted to the window that ``_act`` reads)."""
    found = role.rc.memory.get_by_action(UserRequirement)
    return found[0].content if found else ""


class Engineer(Role):
    """Writes the code for the requirement and rewrites it on a bug report (MetaGPT's Engineer)."""

    name: str = "Alex"
    profile: str = "Engineer"
    goal: str = "write elegant, readable, extensible, efficient code"
    constraints: str = "the code should conform to standards like PEP8 and be modular and maintainable"
    #: candidates WriteCode samples, keeping the first that passes the requirement's visible examples
    n_candidates: int = 1
    #: review each version of the code (WriteCodeReview) before sending it
    use_code_review: bool = False

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        if isinstance(self.n_candidates, bool) or not isinstance(self.n_candidates, int) or self.n_candidates < 1:
            raise UsageError(f"Engineer n_candidates is a whole number >= 1, not {self.n_candidates!r}")
        self.set_actions([WriteCode(k=self.n_candidates)])
        self._watch([UserRequirement, DebugError])

    async def _act(self) -> Message:
        memories = self.get_memories()
        requirement = _requirement(self)
        report = next((m for m in reversed(self.rc.news) if m.cause_by == _DEBUG), None)
        mine = next((m.content for m in reversed(memories) if m.cause_by == _WRITE_CODE), "")
        todo = self.rc.todo
        assert isinstance(todo, WriteCode)
        if report is not None and mine:
            code = await todo.run(requirement, parse_code(mine), report.content)
        else:
            code = await todo.run(requirement)
        if self.use_code_review:
            review = WriteCodeReview()
            review.llm = self.llm
            code = await review.run(code, requirement)
        return Message(content=code, role=self.profile, cause_by=WriteCode, sent_from=self.name)


class QaEngineer(Role):
    """Tests the Engineer's code in the sandbox and debugs the failures (MetaGPT's QaEngineer)."""

    name: str = "Edward"
    profile: str = "QaEngineer"
    goal: str = "write comprehensive and robust tests to ensure the code works as expected without bugs"
    constraints: str = "the test code should conform to standards like PEP8 and be modular and maintainable"
    #: test runs so far, and how many are allowed (MetaGPT's fields and default)
    test_round: int = 0
    test_round_allowed: int = 5
    #: the tests written so far (kept across the Engineer's rewrites)
    test_code: str = ""

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        allowed = self.test_round_allowed
        if isinstance(allowed, bool) or not isinstance(allowed, int) or allowed < 1:
            raise UsageError(f"QaEngineer test_round_allowed is a whole number >= 1, not {allowed!r}")
        self.set_actions([WriteTest, RunCode, DebugError])
        self._watch([UserRequirement, WriteCode])  # (the requirement: its examples become a test)

    async def _think(self) -> bool:
        # one action a turn, decided by what is new (MetaGPT's QaEngineer decides in _act as well)
        if self.test_round >= self.test_round_allowed or not any(m.cause_by == _WRITE_CODE for m in self.rc.news):
            return False
        self._set_state(0)
        return True

    async def _act(self) -> Message:
        memories = self.get_memories()
        requirement = _requirement(self)
        code_msg = next((m for m in reversed(memories) if m.cause_by == _WRITE_CODE), None)
        if code_msg is None:
            return Message(content="No code to test yet.", role=self.profile, cause_by=RunCode, sent_from=self.name)
        code = code_msg.content
        if not self.test_code:
            writer = self.actions[0]
            assert isinstance(writer, WriteTest)
            self.test_code = await writer.run(code, requirement)
        runner, debugger = self.actions[1], self.actions[2]
        assert isinstance(runner, RunCode) and isinstance(debugger, DebugError)
        while self.test_round < self.test_round_allowed:
            self.test_round += 1
            if not self.test_code:
                return Message(content="No tests could be written for this code.", role=self.profile,
                               cause_by=RunCode, sent_from=self.name)
            result = await runner.run(code, self.test_code)
            if result.ok:
                return Message(content=f"All tests passed ({len(result.passed)}).\n{result.summary}",
                               role=self.profile, cause_by=RunCode, sent_from=self.name)
            debugged = await debugger.run(code, self.test_code, result, requirement, rewrite_code=False)
            if debugged.blame == "test":
                self.test_code = debugged.code  # a wrong test: rewritten, and run again now
                continue
            return Message(content=f"## Bug report\n{result.summary}", role=self.profile, cause_by=DebugError,
                           sent_from=self.name, send_to={code_msg.sent_from or "Engineer"})
        return Message(content=f"Stopped after {self.test_round_allowed} test rounds; the tests still fail.",
                       role=self.profile, cause_by=RunCode, sent_from=self.name)


def final_code(history: Sequence[Message]) -> str:
    """The code of the newest WriteCode message of a run's ``history`` ("" when none)."""
    return next((parse_code(m.content) for m in reversed(list(history)) if m.cause_by == _WRITE_CODE), "")


__all__ = ["Engineer", "QaEngineer", "final_code"]
