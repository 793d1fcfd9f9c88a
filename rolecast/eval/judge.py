"""The ``judge`` check: a model reads the run's transcript and says whether it meets a rubric.

The judge is any configured model: the default one (the embedded model when nothing is
configured), ``local`` (the embedded model), or a named service of the configuration; the
Python API may pass models by name (``judges={"default": my_llm}``). Its calls are logged in
the run it judges, under the role ``judge:<the check's digest>.<the request's digest>``, like any model call: ``runs
show`` lists them, and scoring the run again answers an unchanged judge check from the log (no
model call) while a new or edited one (another digest) asks the model. ``samples: N`` asks N
times and takes the majority.
"""

from __future__ import annotations

import difflib
import hashlib
import json
from typing import Any

from ..accounting.cost import CostManager
from ..accounting.metering import metered
from ..context import Context
from ..core.config import LocalConfig
from ..errors import EvalsetError
from ..llm import create_llm
from ..llm.base import BaseLLM
from ..runs.base import RunStore
from ..runs.log import RunLog, acting
from .checks import CheckResult
from .evalset import Check
from .record import JUDGE_ROLE, RunRecord

#: the judge's answer is read from its first words: a short one is enough (and quick on a small model)
JUDGE_MAX_TOKENS = 64
#: the transcript a judge reads is cut to its last this many characters (a small model's window)
TRANSCRIPT_CHARS = 4000
JUDGE_SYSTEM = ("You are a strict judge of a team of AI agents. You read what they wrote and decide whether it "
                "meets the rubric. Answer PASS or FAIL on the first line, then one sentence saying why.")


class Judges:
    """The models judge checks name, made once per eval: ``None``/``"default"`` (the configured
    default), ``"local"`` (the embedded model), or a named service; ``given`` overrides any name."""

    def __init__(self, given: dict[str, BaseLLM] | None = None, context: Context | None = None):
        self._models: dict[str, BaseLLM] = dict(given or {})
        self._context = context
        #: the judge's calls that reached a model (not answered from a run's log)
        self.live = 0

    @property
    def context(self) -> Context:
        if self._context is None:
            self._context = Context()
        return self._context

    def check(self, name: str | None) -> None:
        """An :class:`EvalsetError` (with "did you mean") when no model answers to ``name``; makes none."""
        key = name or "default"
        if key in ("default", "local") or key in self._models or key in self.context.config.services:
            return
        known = ["default", "local", *sorted(self.context.config.services), *sorted(self._models)]
        close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise EvalsetError(f"judge model {key!r} is not configured{hint}: use default, local, or a service "
                           f"of the configuration ({', '.join(known)})")

    def model(self, name: str | None) -> BaseLLM:
        key = name or "default"
        if key in self._models:
            return self._models[key]
        self.check(key)
        if key == "default":
            llm = self.context.llm()
        elif key == "local":
            llm = create_llm(LocalConfig())
        else:
            llm = self.context.llm(key)
        self._models[key] = llm
        return llm


def verdict_of(text: str) -> bool | None:
    """PASS → True, FAIL → False, from the answer's first word that is one of them; None when neither."""
    for word in text.replace("*", " ").replace(":", " ").split()[:40]:
        upper = word.strip(".,!\"'`").upper()
        if upper in ("PASS", "PASSED", "YES"):
            return True
        if upper in ("FAIL", "FAILED", "NO"):
            return False
    return None


def judge_prompt(record: RunRecord, rubric: str, role: str | None) -> list[dict[str, str]]:
    said = record.said_by(role)
    transcript = "\n\n".join(f"[{m.sender or m.profile} / {m.action}]\n{m.content}" for m in said)
    if len(transcript) > TRANSCRIPT_CHARS:
        transcript = "…" + transcript[-TRANSCRIPT_CHARS:]
    task = f"The task was: {record.idea}\n\n" if record.idea else ""
    return [
        {"role": "system", "content": JUDGE_SYSTEM},
        {"role": "user", "content": f"{task}What the agents wrote:\n{transcript or '(nothing)'}\n\n"
                                    f"Rubric: {rubric}\n\nDoes it meet the rubric? PASS or FAIL:"},
    ]


async def run_judge(store: RunStore, record: RunRecord, check: Check, judges: Judges) -> CheckResult:
    """Ask the judge ``samples`` times (answered from the run's log where it holds the same question)."""
    args = check.args
    samples = int(args.get("samples", 1))
    messages = judge_prompt(record, args["rubric"], args.get("role"))
    settings: dict[str, Any] = {"temperature": 0.7 if samples > 1 else 0.0, "max_tokens": JUDGE_MAX_TOKENS}
    # the role the calls are logged under names the check and the request: a run's log answers only the
    # very same question again (another question — a new rubric, another transcript — goes to the model)
    asked = hashlib.sha256(json.dumps([messages, settings], sort_keys=True).encode()).hexdigest()[:8]
    votes: list[bool | None] = []
    answers: list[str] = []
    try:
        llm = judges.model(args.get("model"))
        log = RunLog(store, record.run_id)  # the judged run's log: the judge's calls go in it
        try:
            with metered(CostManager(), role=f"{JUDGE_ROLE}{check.key}.{asked}", run_log=log), acting("judge"):
                for _ in range(samples):
                    answer = await llm.ask(messages, settings=settings)
                    answers.append(answer)
                    votes.append(verdict_of(answer))
        finally:
            log.flush()
            judges.live += log.live_calls
            record.judge_calls += log.live_calls
    except EvalsetError:
        raise
    except Exception as exc:  # the judge's model failed: the check fails, saying why
        return CheckResult(check.label, False, f"the judge could not answer: {type(exc).__name__}: {exc}", "judge")
    yes, no = votes.count(True), votes.count(False)
    passed = yes > samples // 2
    first = " ".join(answers[0].split())[:120] if answers else ""
    unreadable = f", {votes.count(None)} unreadable" if None in votes else ""
    reason = f"the judge voted {yes} PASS / {no} FAIL{unreadable} of {samples}: {first!r}"
    return CheckResult(check.label, passed, reason, "judge")


__all__ = ["Judges", "judge_prompt", "run_judge", "verdict_of"]
