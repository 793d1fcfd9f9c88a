"""How many tokens a model can take at once, and how prompts are made to fit it.

Every model knows its context window (:attr:`rolecast.llm.base.BaseLLM.context_window`):

1. ``context_window:`` in the configuration (or ``llm.context_window = n``), over
2. what the provider knows (the embedded model: its ``n_ctx``, capped by the GGUF's trained
   context), over
3. :data:`MODEL_WINDOWS`, a table of known models' windows (longest matching name prefix), else
4. :data:`DEFAULT_CONTEXT_WINDOW`, a conservative default for a model nobody describes.

Providers added later inherit the table and the hook (``_default_context_window``); one that
knows better overrides the hook.

:func:`fit_history` is how the framework's own prompts fit by construction: the fixed parts (system
prompt, instruction, room for ``max_tokens``) are never cut; the newest history items that fit
beside them are kept, in order; the number left out is said in the prompt (:func:`omitted_note`)
and recorded in the run log by the caller.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from loguru import logger

from ..accounting.cost import max_prompt_tokens
from ..accounting.metering import current_meter
from ..errors import ContextOverflow, UsageError
from ..runs.events import HISTORY_FITTED
from ..runs.log import current_action
from .types import Messages, messages_text

#: the window of a model nobody describes (configure ``context_window:`` for it): 8,192 tokens, what the
#: open models served by Ollama, vLLM or llama.cpp have at the least today (Llama 3, Gemma 2, SmolLM2),
#: and half of GPT-3.5's. An answer without max_tokens of its own gets at most half of it.
DEFAULT_CONTEXT_WINDOW = 8192
#: the least room for an answer that a call's ``max_tokens`` is cut to, where the prompt leaves less than it
#: asks (see :meth:`ContextWindow._answer_room`); below it the call is a ContextOverflow
MIN_ANSWER_ROOM = 128

#: known models' windows by name prefix (the longest matching prefix wins; case-insensitive; a
#: ``vendor/`` or ``vendor:`` path before the name is ignored). Published figures, input + output.
MODEL_WINDOWS: dict[str, int] = {
    # OpenAI
    "gpt-3.5-turbo": 16_385,
    "gpt-3.5-turbo-instruct": 4_096,
    "gpt-4": 8_192,
    "gpt-4-32k": 32_768,
    "gpt-4-turbo": 128_000,
    "gpt-4-1106": 128_000,
    "gpt-4-0125": 128_000,
    "gpt-4o": 128_000,
    "gpt-4.1": 1_047_576,
    "gpt-4.5": 128_000,
    "gpt-5": 400_000,
    "o1": 200_000,
    "o1-mini": 128_000,
    "o3": 200_000,
    "o4-mini": 200_000,
    "chatgpt-4o": 128_000,
    # Anthropic
    "claude-2": 100_000,
    "claude-3": 200_000,
    "claude-sonnet-4": 200_000,
    "claude-opus-4": 200_000,
    "claude-haiku-4": 200_000,
    "claude": 200_000,
    # Google
    "gemini-1.0-pro": 32_760,
    "gemini-1.5-flash": 1_048_576,
    "gemini-1.5-pro": 2_097_152,
    "gemini-2.0": 1_048_576,
    "gemini-2.5": 1_048_576,
    "gemma-2": 8_192,
    "gemma-3": 131_072,
    # open models as servers name them (Ollama, vLLM, llama.cpp)
    "llama-3": 8_192,
    "llama3": 8_192,
    "llama-3.1": 131_072,
    "llama3.1": 131_072,
    "llama-3.2": 131_072,
    "llama3.2": 131_072,
    "llama-3.3": 131_072,
    "llama3.3": 131_072,
    "mistral": 32_768,
    "mixtral": 32_768,
    "qwen2": 32_768,
    "qwen2.5": 32_768,
    "qwen3": 40_960,
    "phi3": 4_096,
    "phi-3": 4_096,
    "phi4": 16_384,
    "deepseek-chat": 65_536,
    "deepseek-reasoner": 65_536,
    "smollm2": 8_192,
}


def known_window(model: str) -> int | None:
    """The window :data:`MODEL_WINDOWS` gives ``model`` (longest prefix), or None."""
    name = model.strip().lower().rsplit("/", 1)[-1]
    best = ""
    for prefix in MODEL_WINDOWS:
        if name.startswith(prefix) and len(prefix) > len(best):
            best = prefix
    return MODEL_WINDOWS[best] if best else None


def estimate_prompt_tokens(text: str, messages: int = 1) -> int:
    """A high estimate of ``text``'s tokens for prose and code: three ASCII characters a token, two tokens
    for any other character, a few per chat message (see ``max_prompt_tokens``). Not a bound: digits and
    hex take up to three times more — what must fit a window is checked with :func:`token_upper_bound`."""
    return max_prompt_tokens(text, messages)


def token_upper_bound(text: str, messages: int = 1) -> int:
    """A true upper bound of ``text``'s tokens where no tokenizer is at hand, whatever the text (digits,
    hex, base64, CJK, emoji): one token per UTF-8 byte — every tokenizer's token covers at least one byte
    (byte-level BPE; SentencePiece falls back to single bytes) — one more for a leading word marker, and
    the chat framing (roles, separators) of ``messages`` messages. English takes about a quarter of it."""
    return len(text.encode("utf-8", errors="surrogatepass")) + 1 + _FRAMING_PER_MESSAGE * messages + _FRAMING


#: the most tokens a chat template adds around one message (role markers, separators), and to a prompt:
#: the generation prompt and the default system prompt some templates add (SmolLM2's takes about 20,
#: Llama 3's date lines about 25)
_FRAMING_PER_MESSAGE, _FRAMING = 8, 48


class ContextWindow:
    """The context-window part of :class:`~rolecast.llm.base.BaseLLM` (mixed into it): every provider
    inherits the window (configured, known or the default), token counting and the check made before a
    request leaves."""

    model: str

    @property
    def context_window(self) -> int:
        """How many tokens one call may take, prompt and answer together: as configured
        (``context_window:``), else what the provider knows (:meth:`_default_context_window`)."""
        d = self.__dict__
        configured = d.get("_context_window")
        if configured:
            return configured
        # the provider's default, remembered for the model it was found for (every call and every fitted
        # prompt asks for the window: the lookup through the table is made once per model name)
        known = d.get("_default_window")
        if known is None or known[0] != self.model:
            known = d["_default_window"] = (self.model, self._default_context_window())
        return known[1]

    @context_window.setter
    def context_window(self, tokens: int | None) -> None:
        if tokens is not None and (isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 1):
            raise UsageError(f"context_window must be a positive number of tokens (or None), not {tokens!r}")
        self.__dict__["_context_window"] = tokens
        self.__dict__.pop("_default_window", None)

    def _default_context_window(self) -> int:
        """The window when none is configured: the table of known models
        (:data:`~rolecast.llm.window.MODEL_WINDOWS`), else a conservative default. Providers that
        know their model's window (the embedded engine's ``n_ctx``) override this."""
        return known_window(self.model) or DEFAULT_CONTEXT_WINDOW

    @property
    def context_window_known(self) -> bool:
        """Whether the window is configured or known (False: the conservative default is a guess)."""
        return bool(self.__dict__.get("_context_window")) or type(self)._default_context_window is not \
            ContextWindow._default_context_window or known_window(self.model) is not None

    def token_bound(self, text: str, messages: int = 0) -> int:
        """A count of ``text``'s tokens (in ``messages`` chat messages) never below this model's, without
        counting: :func:`token_upper_bound`, a true upper bound for any tokenizer."""
        return token_upper_bound(text, messages)

    async def count_texts(self, texts: Sequence[str]) -> list[int]:
        """Tokens of each text in this model's tokens: its tokenizer where the provider has one, else
        :meth:`token_bound`. Framework prompts are fitted with these counts."""
        return [self.token_bound(t, 0) for t in texts]

    async def count_tokens(self, messages: Messages) -> int:
        """The prompt tokens of ``messages`` as this model would count them (chat framing included)."""
        return self.token_bound(messages_text(messages), len(messages))

    async def _answer_room(self, messages: Messages, max_tokens: int, tools: Any = None, schema: Any = None) -> int:
        """``max_tokens``, or less where the prompt leaves less of the window: at least
        :data:`MIN_ANSWER_ROOM` tokens (or ``max_tokens`` when smaller) must remain, else it is left as it
        is and the check before sending raises :class:`~rolecast.errors.ContextOverflow`. (A history fitted
        to the window leaves a prompt that fits; the answer's room is what is left, as llama.cpp's own
        server bounds ``n_predict`` by the context: a 1,024-token debate otherwise died on a 531-token
        prompt plus the default 512 tokens of answer.)"""
        prompt = await self._prompt_if_tight(messages, max_tokens, request_tokens(self, tools, schema))
        if prompt is None:
            return max_tokens
        room = self.context_window - prompt
        if room >= max_tokens or room < min(max_tokens, MIN_ANSWER_ROOM):
            return max_tokens
        logger.debug("{}: the answer's room cut from {} to {} tokens, what the window leaves", self.model,
                     max_tokens, room)
        return room

    async def _check_window(self, messages: Messages, max_tokens: int, request: dict[str, Any], role: str) -> None:
        """Raise :class:`~rolecast.errors.ContextOverflow` when the prompt and ``max_tokens`` cannot fit
        the window: before anything is sent, never retried."""
        window = self.context_window
        prompt = await self._prompt_if_tight(messages, max_tokens,
                                             request_tokens(self, request.get("tools"), request.get("schema")))
        if prompt is not None and prompt + max_tokens > window:
            raise ContextOverflow(role=role, action=current_action(), prompt_tokens=prompt, max_tokens=max_tokens,
                                  window=window, model=self.model)

    async def _prompt_if_tight(self, messages: Messages, max_tokens: int, extra: int) -> int | None:
        """None when the prompt (``extra``: its tools and schema) and ``max_tokens`` surely fit the window,
        nothing counted: a safe upper bound first (see fit_to_window), then the safe estimate; else the
        prompt's tokens, counted exactly."""
        window = self.context_window
        text = messages_text(messages)
        if 4 * len(text) + 16 * len(messages) + extra + max_tokens <= window:
            return None
        if self.token_bound(text, len(messages)) + extra + max_tokens <= window:
            return None
        return await self.count_tokens(messages) + extra


T = TypeVar("T")


@dataclass
class Fitted:
    """What :func:`fit_history` kept: the items, in order, and how many older ones were left out."""

    kept: list
    omitted: int
    budget: int  # tokens the history could use
    used: int  # tokens the kept items take


def fit_history(items: Sequence[T], budget: int, cost: Callable[[T], int]) -> Fitted:
    """The newest ``items`` whose costs add up to at most ``budget``, oldest first.

    Counting stops at the first item (from the newest) that does not fit: what is kept is always a
    contiguous tail of the history, so a conversation never has holes in it.
    """
    used = 0
    start = len(items)
    for i in range(len(items) - 1, -1, -1):
        c = cost(items[i])
        if used + c > budget:
            break
        used += c
        start = i
    return Fitted(list(items[start:]), start, max(0, budget), used)


def omitted_note(n: int, what: str = "message", which: str = "earlier") -> str:
    """The line a prompt carries where ``n`` ``which`` (earlier, later) units (``what``: message, step …)
    were left out to fit the window."""
    return f"[{n} {which} {what}{'s' if n != 1 else ''} left out to fit the context window]"


def request_tokens(llm: Any, tools: Any = None, schema: Any = None) -> int:
    """The tokens a call's tool definitions and output schema add to its prompt, as the check before
    sending counts them (a safe estimate; a grammar-constrained model's schema constrains the answer
    and is not in the prompt)."""
    if getattr(llm, "grammar_constrained", False):
        schema = None
    bound = getattr(llm, "token_bound", token_upper_bound)
    return bound(json.dumps([tools, schema], default=str), 0) if tools or schema else 0


def answer_room(llm: Any, settings: Any = None, kind: str = "complete") -> int:
    """The tokens a call of ``kind`` (``complete`` or ``choose``) with ``settings`` reserves for its answer
    (what :meth:`~rolecast.llm.base.BaseLLM.complete` asks ``max_tokens`` to be)."""
    merged = llm.settings if settings is None else llm.settings.merged(settings)
    if merged.max_tokens:
        return int(merged.max_tokens)
    return int(llm._effective(merged, llm.choice_max_tokens if kind == "choose" else None).max_tokens or 0)


async def schema_tokens(llm: Any, output_type: Any) -> int:
    """The tokens :meth:`~rolecast.llm.base.BaseLLM.structured` adds to a prompt for ``output_type``: the
    schema it writes into the prompt (counted in the model's tokens, with its sentence) and the schema
    in the request (as the check before sending counts it)."""
    schema = output_type.model_json_schema()
    in_prompt = (await llm.count_texts([json.dumps(schema, ensure_ascii=False)]))[0] + 32
    return in_prompt + request_tokens(llm, schema=schema)


#: what an action's own words (its template, its instruction) may take, as a share of the window,
#: when the framework hands it a history: the history gets the rest, less the answer's room
ACTION_SHARE = 0.125
#: tokens kept free besides the counted parts: joins between texts can tokenize a little differently
SAFETY_TOKENS = 16


#: texts whose tokens a model remembers for fitting (a history's messages, counted once, not every turn)
COUNT_CACHE = 4096


async def counted_texts(llm: ContextWindow, texts: Sequence[str]) -> list[int]:
    """``llm.count_texts(texts)``, each text counted once per model: a long run fits the same history
    every turn, and only the messages new since the last fitting are counted (by the tokenizer, on a
    local model). The memo holds at most :data:`COUNT_CACHE` texts (emptied when full)."""
    d = llm.__dict__
    memo = d.get("_token_count_memo")  # (not "_counted": LocalLLM has a method of that name)
    if memo is None or memo[0] != llm.model:
        memo = d["_token_count_memo"] = (llm.model, {})
    known: dict[str, int] = memo[1]
    new = [t for t in dict.fromkeys(texts) if t not in known]
    if new:
        if len(known) + len(new) > COUNT_CACHE:
            known.clear()
        known.update(zip(new, await llm.count_texts(new), strict=True))
    return [known[t] for t in texts]


async def fit_to_window(
    llm: ContextWindow, texts: Sequence[str], fixed: Messages, max_tokens: int, *, purpose: str,
    what: str = "message", reserve: int = 0, role: Any = None, keep: int = 0,
) -> int:
    """How many of the oldest ``texts`` (a history, oldest first) a prompt leaves out so that the newest
    fit beside ``fixed`` (the prompt's parts that are never cut: system prompt, instruction, format),
    ``reserve`` more tokens (tool definitions, a schema) and ``max_tokens``, counted in ``llm``'s tokens.
    What is kept is always a contiguous tail: ``texts[omitted:]``. The caller says how many were left
    out with :func:`omitted_note` (``what``: the unit's name).

    The newest ``keep`` are kept even when they do not fit (the message an action answers: better a
    ContextOverflow than an answer to a prompt without it).

    When some were left out, a ``history_fitted`` event goes to the run log for ``role`` (a role, or a
    name; else the running turn's). When even the fixed parts and ``max_tokens`` do not fit, all are left
    out, and the call itself is a :class:`~rolecast.errors.ContextOverflow` before it is sent.
    """
    n = len(texts)
    window = llm.context_window
    room = window - max_tokens - reserve - SAFETY_TOKENS
    # a safe upper bound first (a token covers at least one UTF-8 byte, a character at most four, and a
    # chat template adds a few per message): when even that fits, nothing is counted — the common case
    chars = sum(map(len, texts))
    for message in fixed:  # (a loop: no generator's frame on every turn's path)
        chars += len(str(message.get("content") or ""))
    if 4 * chars + 16 * (n + len(fixed)) <= room:
        return 0
    fixed_tokens = await llm.count_tokens(fixed)
    note_tokens = (await counted_texts(llm, [omitted_note(n, what)]))[0] + 1
    budget = room - fixed_tokens - note_tokens
    costs = await counted_texts(llm, texts)
    fitted = fit_history(range(n), budget, lambda i: costs[i] + 1)  # +1: the break between two items
    if fitted.omitted > n - keep:
        fitted = Fitted(list(range(n - keep, n)), n - keep, fitted.budget, sum(costs[n - keep:]) + keep)
    if fitted.omitted:
        history_tokens = sum(costs) + n
        record_fitted(purpose, fitted, window, max_tokens, what=what, role=role,
                      tokens=(history_tokens, history_tokens - fitted.used))
    return fitted.omitted


def record_fitted(purpose: str, fitted: Fitted, window: int, max_tokens: int, *, what: str = "message",
                  role: Any = None, tokens: tuple[int, int] | None = None) -> None:
    """A ``history_fitted`` event in the run log (``rolecast runs show`` and the studio list it), for
    ``role`` (a role: its name and its team's log; a name, or None: the running turn's log);
    ``tokens``: the whole history's tokens and those left out, when they were counted."""
    meter = current_meter()
    log, name = meter.run_log, meter.role or ""
    if isinstance(role, str):
        name = role
    elif role is not None:
        name, log = role.name, role.context.run_log or log
    if log is not None:
        log.emit(HISTORY_FITTED, {
            "purpose": purpose, "kept": len(fitted.kept), "omitted": fitted.omitted, "unit": what,
            "window": window, "budget": fitted.budget, "max_tokens": max_tokens,
            **({"history_tokens": tokens[0], "omitted_tokens": tokens[1]} if tokens else {}),
        }, role=name)


__all__ = [
    "ACTION_SHARE",
    "COUNT_CACHE",
    "DEFAULT_CONTEXT_WINDOW",
    "MODEL_WINDOWS",
    "SAFETY_TOKENS",
    "ContextWindow",
    "Fitted",
    "answer_room",
    "counted_texts",
    "estimate_prompt_tokens",
    "fit_history",
    "fit_to_window",
    "known_window",
    "omitted_note",
    "record_fitted",
    "request_tokens",
    "schema_tokens",
    "token_upper_bound",
]
