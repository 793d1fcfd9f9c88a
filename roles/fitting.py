"""A role's prompts fit its model's context window by construction, and its history may be compacted.

:func:`fit_history_for` keeps the newest messages of a history that fit beside the parts of a prompt
that are never cut — the system prompt, the instruction, and room for the answer (``max_tokens``) —
counted in the model's own tokens (:meth:`~rolecast.llm.base.BaseLLM.count_texts`). What was left out
is said in the prompt (:func:`~rolecast.llm.window.omitted_note`) and recorded in the run log
(a ``history_fitted`` event: ``rolecast runs show`` and the studio list it).

:class:`Compaction` (``Role(compaction=...)`` or ``Team(compaction=...)``) keeps long runs whole
instead: once a role's history passes ``share`` of the window, its older messages are summarised by
a model (the role's own, or a named service) into one marked message kept in memory: prompts then
carry that summary and the newer messages (:func:`compacted_view`); nothing is deleted.
The summary is an ordinary model call (metered, budgeted, in the run log), so a resumed or forked
run is answered it from the log and keeps the same summary, without asking a model.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from memory import Message
from rolecast.errors import ConfigError, UsageError
from rolecast.llm.base import BaseLLM, Messages
from rolecast.llm.window import (
    ACTION_SHARE,
    SAFETY_TOKENS,
    ContextWindow,
    Fitted,
    estimate_prompt_tokens,
    fit_history,
    fit_to_window,
    omitted_note,
    record_fitted,
)
from rolecast.llm.window import answer_room as window_answer_room
from rolecast.runs.log import acting

from .prompts import STATE_TEMPLATE

if TYPE_CHECKING:
    from .role import Role

#: ``cause_by`` of a compaction's summary in memory
COMPACTED = "rolecast.compaction"

SUMMARY_PROMPT = """Summarise the conversation below for a participant who will continue it.
Keep every decision, claim, number, name and open question; drop greetings and repetition.
Write at most {words} words, as plain sentences.
===
{history}
===
Summary:"""


def answer_room(llm: BaseLLM, kind: str = "complete") -> int:
    """The tokens a call of ``kind`` (``complete`` or ``choose``) reserves for its answer."""
    return window_answer_room(llm, None, kind)


@dataclass
class FittedHistory:
    """The history a prompt carries, and what it says about the part left out."""

    messages: list[Message]
    omitted: int

    @property
    def note(self) -> str:
        return omitted_note(self.omitted) if self.omitted else ""

    def text(self, sep: str = "\n") -> str:
        """The kept messages as prompt lines, after the note when some were left out."""
        lines = [str(m) for m in self.messages]
        return sep.join([self.note, *lines] if self.omitted else lines)


async def fit_history_for(
    role: Role | None, llm: BaseLLM, history: Sequence[Message], fixed: Messages, max_tokens: int, *,
    purpose: str, reserve: int = 0,
) -> FittedHistory:
    """The newest messages of ``history`` that fit beside ``fixed`` (the prompt without its history),
    ``reserve`` more tokens and ``max_tokens``; what was left out is logged for ``role``
    (:func:`~rolecast.llm.window.fit_to_window`)."""
    if not history:
        return FittedHistory([], 0)
    omitted = await fit_to_window(llm, list(map(str, history)), fixed, max_tokens, purpose=purpose, reserve=reserve,
                                  role=role)
    return FittedHistory(list(history[omitted:]), omitted)


async def history_for_action(role: Role, action: Any, history: Sequence[Message]) -> list[Message]:
    """The history handed to ``action``: the newest messages that fit its model's window beside the
    role's system prompt, an eighth of the window for the action's own words and its answer's room.
    When messages were left out, the first one handed is a note saying how many. The newest message
    is always handed (the one the action answers: when it cannot fit, the action's call is a
    ContextOverflow, not an answer to a note)."""
    llm = getattr(action, "llm", None) or role.llm
    if not history or not isinstance(llm, ContextWindow):  # (not BaseLLM: an ABC's check is a Python call)
        return list(history)
    fixed: Messages = [{"role": "system", "content": getattr(action, "prefix", "") or ""},
                       {"role": "user", "content": ""}]
    omitted = await fit_to_window(llm, list(map(str, history)), fixed, window_answer_room(llm),
                                  purpose=f"action {action.name}", role=role, keep=1,
                                  reserve=max(64, int(llm.context_window * ACTION_SHARE)))
    if not omitted:
        return list(history)
    note = Message(content=omitted_note(omitted), role="system", sent_from="rolecast", cause_by=COMPACTED,
                   id=f"omitted-{omitted}")
    return [note, *history[omitted:]]


# ------------------------------------------------------------------ memory as MetaGPT code reads it
class MemoryFitter:
    """The view of a role's memory while one of its actions runs (see :mod:`memory.views`): after the
    latest compaction summary (when compaction is on), the newest messages whose text fits the window
    beside the action's own words (an eighth of the window), the role's system prompt and the answer's
    room — counted by the upper-bound estimate (the prompt is checked exactly before it is sent; an
    overflow there tightens the fit to ``scale`` and runs the action once more). The newest message is
    always kept. When messages were left out the first one shown is a note saying how many, a
    ``history_fitted`` event is logged once per action run, and a compaction is due at the next turn."""

    def __init__(self, role: Role, action: Any, scale: float = 1.0):
        self.role, self.action, self.scale = role, action, scale
        self.omitted = 0
        llm = getattr(action, "llm", None) or role.llm
        self.window = llm.context_window if isinstance(llm, ContextWindow) else 0
        self.compacting = role._compaction is not None or role.context.kwargs.get("compaction") is not None
        if self.window:
            room = window_answer_room(llm)
            prefix = estimate_prompt_tokens(getattr(action, "prefix", "") or role._get_prefix(), 2)
            reserve = max(64, int(self.window * ACTION_SHARE))
            self.budget = max(0, int((self.window - room - reserve - prefix - SAFETY_TOKENS) * scale))

    def __call__(self, messages: list[Message]) -> list[Message]:
        shown = compacted_view(messages) if self.compacting else messages
        if not self.window or not shown:
            return shown
        # the common case first: even at a token a character (an upper bound for any tokenizer's count of
        # plain text), the messages fit; nothing is estimated message by message
        chars = 0
        for message in shown:
            chars += len(message.content) + 16
        if chars <= self.budget:
            return shown
        # a summary stands first, and is never left out: the facts it holds are in no other message
        pinned = shown[:1] if self.compacting and shown[0].cause_by == COMPACTED else []
        rest = shown[len(pinned):]
        budget = self.budget - sum(estimate_prompt_tokens(str(m), 0) + 1 for m in pinned)
        costs = [estimate_prompt_tokens(str(m), 0) + 1 for m in rest]
        fitted = fit_history(range(len(rest)), budget, lambda i: costs[i])
        omitted = min(fitted.omitted, len(rest) - 1)  # the newest is always shown
        if omitted <= 0:
            return cut_to_fit(shown, self.budget)
        if not self.omitted:
            record_fitted(f"memory of action {self.action.name}", Fitted(list(range(omitted, len(rest))), omitted,
                          budget, sum(costs[omitted:])), self.window, 0, role=self.role)
            self.role.__dict__["_compaction_due"] = True
        self.omitted = omitted
        note = Message(content=omitted_note(omitted), role="system", sent_from="rolecast", cause_by=COMPACTED,
                       id=f"omitted-{omitted}")
        return cut_to_fit([*pinned, note, *rest[omitted:]], self.budget)

    def fit_news(self, news: list[Message]) -> list[Message]:
        """``rc.news`` while the action runs: the turn's new messages, none left out (they are the newest),
        the longest cut to fit the budget (the same list when they fit)."""
        return cut_to_fit(news, self.budget) if self.window else news  # (news itself when nothing is cut)


#: the estimated tokens of the note that ends a message cut to fit
CUT_NOTE_TOKENS = 24


def cut_to_fit(messages: list[Message], budget: int) -> list[Message]:
    """``messages``, with the longest cut (their head kept, and a note of what was cut) until they fit
    ``budget`` tokens by the estimate: what is always shown (the summary, the newest message) can alone
    pass the budget, as when a 135M model's answers run to 512 tokens in a 1,024-token window."""
    costs = [estimate_prompt_tokens(str(m), 0) + 1 for m in messages]
    over = sum(costs) - budget
    if over <= 0:
        return messages  # the very list given
    out = list(messages)
    for i in sorted(range(len(out)), key=lambda j: -costs[j]):  # the longest first
        if over <= 0 or costs[i] <= 2 * CUT_NOTE_TOKENS:  # (never worth cutting a message shorter than that)
            break
        message = out[i]
        keep = int(len(message.content) * max(16, costs[i] - over - CUT_NOTE_TOKENS) / costs[i])
        cut = message.content[:keep] + f" … [{len(message.content) - keep} characters cut to fit the window]"
        out[i] = message.model_copy(update={"content": cut})
        over -= costs[i] - (estimate_prompt_tokens(str(out[i]), 0) + 1)
    return out


async def history_budget(role: Role) -> int:
    """The tokens of history the role's model can take in the history handed to an action (as
    :func:`history_for_action` fits it): what long-term memory chooses within, so that nothing it
    chose is left out again."""
    llm = role.llm
    window = llm.context_window
    fixed: Messages = [{"role": "system", "content": role._get_prefix()}, {"role": "user", "content": ""}]
    fixed_tokens = await llm.count_tokens(fixed)
    note_tokens = (await llm.count_texts([omitted_note(len(role.rc.history))]))[0] + 1
    reserve = max(64, int(window * ACTION_SHARE))
    return window - window_answer_room(llm) - reserve - fixed_tokens - note_tokens - SAFETY_TOKENS


async def state_prompt(role: Role, n: int) -> str:
    """The numeric state-selection prompt (MetaGPT's ``STATE_TEMPLATE``) with the newest history that
    fits the role's model beside the identity, the stages and the answer's room."""
    def prompt(history: str) -> str:
        return role._get_prefix() + STATE_TEMPLATE.format(
            history=history, states="\n".join(role.states), n_states=n - 1, previous_state=role.rc.state)

    llm = role.llm
    fitted = await fit_history_for(role, llm, await role.prompt_history(), [{"role": "user", "content": prompt("")}],
                                   window_answer_room(llm, None, "choose"), purpose="state")
    return prompt(fitted.text())


# ------------------------------------------------------------------ compaction
@dataclass
class Compaction:
    """Summarise a role's older messages once its history passes ``share`` of the window.

    ``keep`` newest messages stay as they are; the rest become one summary message (``cause_by``
    :data:`COMPACTED`, ``metadata["compacted"]`` the number it replaced) of at most ``words`` words.
    ``llm`` is the model that writes it: None for the role's own, a service name from the
    configuration, or a model.
    """

    share: float = 0.6
    keep: int = 4
    words: int = 120
    llm: Any = None

    def __post_init__(self) -> None:
        if not 0.05 <= self.share <= 0.95:
            raise UsageError(f"Compaction(share=...) is a share of the window between 0.05 and 0.95, not {self.share}")
        if self.keep < 1 or self.words < 10:
            raise UsageError("Compaction needs keep >= 1 and words >= 10")

    def model_for(self, role: Role) -> BaseLLM:
        if self.llm is None:
            return role.llm
        if isinstance(self.llm, BaseLLM):
            return self.llm
        if isinstance(self.llm, str):
            return role.context.llm(self.llm)
        raise UsageError(f"Compaction(llm=...) takes None, a service name or a model, not {self.llm!r}")


def as_compaction(value: Any) -> Compaction | None:
    """``True`` (the defaults), a :class:`Compaction`, a dict of its fields, or None/False (off)."""
    if value is None or value is False:
        return None
    if value is True:
        return Compaction()
    if isinstance(value, Compaction):
        return value
    if isinstance(value, dict):
        try:
            return Compaction(**value)
        except TypeError as exc:
            raise UsageError(f"compaction: {exc} (fields: share, keep, words, llm)") from None
    raise UsageError(f"compaction must be True, False, a Compaction or a dict of its fields, not {value!r}")


#: turns compaction on for a script that does not (a MetaGPT script run as it is): 1/true/on, 0/false/off,
#: or the share of the window at which a role's history is summarised (0.6 is Compaction's own)
COMPACTION_ENV = "ROLECAST_COMPACTION"


def compaction_from_env() -> Compaction | None:
    """:data:`COMPACTION_ENV` read: the compaction of a team given none (None when unset or off)."""
    raw = os.environ.get(COMPACTION_ENV, "").strip().lower()
    if raw in ("", "0", "false", "off", "no"):
        return None
    if raw in ("1", "true", "on", "yes"):
        return Compaction()
    try:
        share = float(raw)
    except ValueError:
        share = -1.0
    if not 0 < share < 1:
        raise ConfigError(f"{COMPACTION_ENV}={raw!r}: give 1 (on), 0 (off) or the share of the window at which "
                          f"history is summarised, between 0 and 1 (e.g. 0.6)")
    return Compaction(share=share)


def compacted_view(history: Sequence[Message]) -> list[Message]:
    """The history as prompts see it: after a compaction, its newest summary and the messages it kept
    (and those that came later); nothing is deleted from memory."""
    for i in range(len(history) - 1, -1, -1):
        summary = history[i]
        if summary.cause_by == COMPACTED and "kept_from" in summary.metadata:
            kept_from = summary.metadata["kept_from"]
            start = next((j for j, m in enumerate(history) if m.id == kept_from), i)
            return [summary, *(m for m in history[start:] if m is not summary)]
    return list(history)


def summary_tokens(words: int) -> int:
    """The answer room a summary of at most ``words`` words gets: two tokens a word, and a little more."""
    return 2 * words + 32


async def compact(role: Role, compaction: Compaction) -> Message | None:
    """Summarise the role's older messages when its history passes the share of the window: the
    summary (a marked message added to memory, see :func:`compacted_view`), or None when not needed."""
    history = compacted_view(role.rc.history)
    older = history[: len(history) - compaction.keep]
    # a summary again only once ``keep`` new messages have aged past the kept ones: a summary and the kept
    # messages may pass the share by themselves on a small window, and must not be summarised every turn
    if sum(1 for m in older if m.cause_by != COMPACTED) < compaction.keep:
        return None
    llm = compaction.model_for(role)
    window = role.llm.context_window
    # due: an action's own prompt (MetaGPT code reading its memory) had to leave messages out last turn
    due = role.__dict__.pop("_compaction_due", False)
    if not due:
        tokens = sum(await role.llm.count_texts([str(m) for m in history])) + len(history)
        if tokens <= compaction.share * window:
            return None
    prompt = SUMMARY_PROMPT.format(words=compaction.words, history="{history}")
    # the answer's room is what ``words`` words take (a small model writes on to max_tokens otherwise)
    room = min(window_answer_room(llm), summary_tokens(compaction.words))
    # the previous summary is never left out (the facts it holds are in no other message any more): it is a
    # fixed part of the prompt, and the messages after it are fitted beside it
    previous = older[0] if older and older[0].cause_by == COMPACTED else None
    rest = older[1:] if previous is not None else older
    head = f"{previous}\n" if previous is not None else ""
    fitted = await fit_history_for(role, llm, rest, [{"role": "user", "content": prompt.format(history=head)}],
                                   room, purpose="compaction")
    with acting(COMPACTED):  # logged as the compaction's call (the studio marks it a summary)
        summary = (await llm.ask(prompt.format(history=head + fitted.text()), settings={"max_tokens": room})).strip()
    replaced = sum(int(m.metadata.get("compacted", 1)) if m.cause_by == COMPACTED else 1 for m in older)
    digest = hashlib.sha256("\n".join(m.content for m in older).encode()).hexdigest()[:16]
    message = Message(
        content=f"[summary of {replaced} earlier messages]\n{summary}", role="system", sent_from=role.name,
        cause_by=COMPACTED, id=f"summary-{digest}", send_to={role.name},
        metadata={"compacted": replaced, "kept_from": history[len(older)].id},
    )
    role.rc.memory.add(message)
    log = role.context.run_log
    if log is not None and not log.idle:  # (the live console says so: one line)
        log.notify("compacted", {"replaced": replaced, "kept": len(history) - len(older)}, role=role.name)
    return message


__all__ = ["COMPACTED", "COMPACTION_ENV", "Compaction", "FittedHistory", "MemoryFitter", "answer_room",
           "as_compaction", "compact", "compacted_view", "compaction_from_env", "cut_to_fit", "fit_history_for",
           "history_budget", "history_for_action", "state_prompt", "summary_tokens"]
