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
from ..errors import EvalsetError, OutputParseError
from ..llm import create_llm
from ..llm.base import BaseLLM
from ..llm.grammar import alternation, free_text
from ..observe.printable import printable
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
                "meets the rubric. Answer PASS or FAIL first, then one sentence saying why.")
#: the judge's answer as a constrained choice: the verdict first, one of two words, then a one-line reason.
#: A model that decodes under a grammar (the embedded model, a llama.cpp server) can write nothing else;
#: any other model's answer is read strictly and asked again (see :func:`strict_verdict`)
JUDGE_GRAMMAR = f"root ::= {alternation(('PASS', 'FAIL'))} \" - \" {free_text(200)}"
#: answers a model that cannot decode under the grammar gets to put its verdict first
JUDGE_TRIES = 2


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


#: words that turn the verdict word after them round: "does not PASS", "never fails", "isn't a pass"
_NEGATIONS = frozenset({"NOT", "NEVER", "DOESN'T", "DOESNT", "ISN'T", "ISNT", "CANNOT", "CAN'T", "WON'T",
                        "DIDN'T", "DON'T", "NOR", "FAILS", "FAILED", "FAIL"})
#: how many words back a negation reaches ("does not quite PASS the rubric")
_NEGATION_REACH = 3


def verdict_of(text: str) -> bool | None:
    """PASS → True, FAIL → False, None when the answer says neither.

    A first line that is just a verdict word decides (the answer asked for). Otherwise the first verdict
    word of the answer's first 40 words decides, turned round when a negation stands up to three words
    before it: "It does not PASS the rubric … FAIL." is a FAIL, "It does not fail" a PASS. Linear in
    the answer (only its first 40 words are read)."""
    words = [w.strip(".,!?;\"'`()[]").upper() for w in text.replace("*", " ").replace(":", " ").split()[:40]]
    for index, word in enumerate(words):
        if word in ("PASS", "PASSED", "PASSES", "YES"):
            verdict = True
        elif word in ("FAIL", "FAILED", "FAILS", "NO"):
            verdict = False
        else:
            continue
        before = words[max(0, index - _NEGATION_REACH):index]
        if word not in ("YES", "NO") and any(b in _NEGATIONS for b in before):
            return not verdict
        return verdict
    return None


def strict_verdict(text: str) -> bool:
    """The verdict of an answer that starts with PASS or FAIL (as the judge's grammar writes it);
    an :class:`~rolecast.errors.OutputParseError` for any other answer (the judge is asked again)."""
    first = text.replace("*", " ").replace(":", " ").split()[:1]
    word = first[0].strip(".,!-\"'`").upper() if first else ""
    if word in ("PASS", "FAIL"):
        return word == "PASS"
    raise OutputParseError("start the answer with PASS or FAIL, then say why in one sentence", raw=text[:200])


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


async def _one_verdict(
    llm: BaseLLM, messages: list[dict[str, str]], settings: dict[str, Any]
) -> tuple[str, bool | None]:
    """One judge answer and its verdict: PASS/FAIL by the grammar where the model decodes under one, else read
    strictly and asked again (:data:`JUDGE_TRIES` answers); the last free answer is read by :func:`verdict_of`."""
    try:
        answer = ""

        def parse(text: str) -> bool:
            nonlocal answer
            answer = text
            return strict_verdict(text)

        vote = await llm.ask_valid(messages, parse, settings=settings, grammar=JUDGE_GRAMMAR,
                                   tries=1 if llm.supports_grammar else JUDGE_TRIES)
        return answer, vote
    except OutputParseError as exc:
        return exc.raw or answer, verdict_of(exc.raw or answer)


async def run_judge(store: RunStore, record: RunRecord, check: Check, judges: Judges) -> CheckResult:
    """Ask the judge ``samples`` times (answered from the run's log where it holds the same question)."""
    args = check.args
    samples = int(args.get("samples", 1))
    messages = judge_prompt(record, args["rubric"], args.get("role"))
    settings: dict[str, Any] = {"temperature": 0.7 if samples > 1 else 0.0, "max_tokens": JUDGE_MAX_TOKENS}
    # the role the calls are logged under names the check and the request: a run's log answers only the
    # very same question again (another question — a new rubric, another transcript — goes to the model)
    asked = hashlib.sha256(json.dumps([messages, settings, JUDGE_GRAMMAR], sort_keys=True).encode()).hexdigest()[:8]
    votes: list[bool | None] = []
    answers: list[str] = []
    try:
        llm = judges.model(args.get("model"))
        log = RunLog(store, record.run_id)  # the judged run's log: the judge's calls go in it
        try:
            with metered(CostManager(), role=f"{JUDGE_ROLE}{check.key}.{asked}", run_log=log), acting("judge"):
                for _ in range(samples):
                    answer, vote = await _one_verdict(llm, messages, settings)
                    answers.append(answer)
                    votes.append(vote)
        finally:
            log.flush()
            judges.live += log.live_calls
            record.judge_calls += log.live_calls
    except EvalsetError:
        raise
    except Exception as exc:  # the judge's model failed: the check fails, saying why
        return CheckResult(check.label, False, f"the judge could not answer: {type(exc).__name__}: "
                                               f"{printable(exc)[:300]}", "judge")
    yes, no = votes.count(True), votes.count(False)
    passed = yes > samples // 2
    first = " ".join(answers[0].split())[:120] if answers else ""
    unreadable = f", {votes.count(None)} unreadable" if None in votes else ""
    reason = f"the judge voted {yes} PASS / {no} FAIL{unreadable} of {samples}: {first!r}"
    return CheckResult(check.label, passed, reason, "judge")


__all__ = ["Judges", "judge_prompt", "run_judge", "verdict_of"]
