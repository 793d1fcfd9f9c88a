"""Per-conversation prompt-prefix reuse for the embedded llama.cpp model.

A role's prompts share their beginning from one call to the next (system prompt,
role prefix, the history so far), and on a CPU evaluating the prompt, not generating
the answer, is most of a call's latency. One llama.cpp context holds one KV cache, so
the cache is swapped per *conversation key* (the calling role, see
:func:`conversation_key`): before a call the context is cleared and that key's own
saved KV state is restored (or nothing, for a key seen for the first time); after the
call the state is saved again under the key. llama.cpp then evaluates only the part of
the prompt that differs from what the key's previous call left in the cache.

Reuse never changes an answer. llama.cpp's arithmetic depends on how tokens are batched
(a prefix evaluated with the rest of the prompt and one evaluated alone give slightly
different logits), so every prompt is evaluated in chunks of :data:`PREFIX_CHUNK` tokens
at fixed positions (0, 128, 256 …), cold or not (:class:`ChunkedPrompt`), and only
whole chunks of an earlier *prompt* are reused, never the cells of generated tokens
(evaluated one at a time). A prompt thus gets exactly the KV cells and logits it would
get in an empty context: same prompt, seed and temperature 0, same answer, whatever was
called before. And every call starts from "clear, then restore this key's bytes", so
one role's calls never see another's.

Saved states live in memory (about 23 KB per token for SmolLM2-135M: only the KV
cells of sequence 0, not the logits), bounded by a byte budget with least recently used
eviction.

A call without a seed samples with llama-cpp-python's running seed, which every call
moves on. That seed is kept per key too, but apart from the states and whatever the
budget: a role's sampled answers (temperature above 0) are the same with reuse on or
off, and after its state was evicted.
"""

from __future__ import annotations

import ctypes
import hashlib
import itertools
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from ..metering import current_meter

DEFAULT_PREFIX_CACHE_MIB = 256.0
#: running sampling seeds kept (one int per conversation key, least recently used forgotten first)
SEED_KEYS = 4096
#: prompts are evaluated in chunks of this many tokens at fixed positions (llama.cpp's n_batch):
#: smaller reuses more of a grown prompt, larger evaluates a cold prompt faster
PREFIX_CHUNK = 128
_MIB = 1 << 20


@dataclass
class SavedState:
    """One conversation's KV cache: the tokens it holds and llama.cpp's bytes for them."""

    tokens: Any  # numpy int array, the tokens whose KV cells are saved, in order
    kv: Any  # a ctypes uint8 array (kept as is: restoring it needs no further copy)
    kv_size: int
    seed: int  # llama-cpp-python's sampling seed after the call (the cache keeps seeds apart too)
    reusable: int = 0  # the leading tokens that are whole chunks of the call's prompt (may be reused)

    @property
    def nbytes(self) -> int:
        """Memory held by this state."""
        return int(self.kv_size) + int(self.tokens.nbytes)


@dataclass(frozen=True)
class PrefixCacheStats:
    """What the cache holds and how it has been used."""

    entries: int
    bytes: int
    budget_bytes: int
    hits: int  # calls that started from a saved state
    misses: int  # calls that started from an empty context
    evictions: int
    reused_tokens: int  # tokens restored instead of evaluated, summed over the hits


class PrefixCache:
    """Saved states by conversation key, least recently used evicted beyond ``budget_bytes``.

    ``snapshot(llama) -> SavedState | None``, ``apply(llama, state)`` and ``clear(llama)``
    do the llama.cpp work (injected so the bookkeeping is testable without a model).
    Callers hold the model's lock around :meth:`begin` … :meth:`end`.
    ``budget_bytes`` 0 turns reuse off: every call starts from an empty context.
    """

    def __init__(
        self,
        budget_bytes: int,
        *,
        snapshot: Callable[[Any], SavedState | None],
        apply: Callable[[Any, SavedState], None],
        clear: Callable[[Any], None],
        initial_seed: int | None = None,
    ):
        self._states: OrderedDict[Hashable, SavedState] = OrderedDict()
        self._seeds: OrderedDict[Hashable, int] = OrderedDict()  # kept whatever the budget (see the module)
        self._budget = max(0, int(budget_bytes))
        self._bytes = 0
        self._snapshot, self._apply, self._clear = snapshot, apply, clear
        self.initial_seed = initial_seed
        self._hits = self._misses = self._evictions = self._reused = 0
        self._lock = threading.Lock()  # stats and resizing may come from another thread

    # ------------------------------------------------------------ a call
    def begin(self, llama: Any, key: Hashable) -> int:
        """Give the context ``key``'s saved state (or an empty one) and its running sampling seed;
        returns the tokens restored."""
        self._clear(llama)
        with self._lock:
            state = self._states.get(key) if self._budget else None
            if state is None:
                self._misses += 1
            else:
                self._states.move_to_end(key)
                self._hits += 1
                self._reused += len(state.tokens)
            seed = self._seeds.get(key, self.initial_seed)  # a new key never inherits another's seed
            if key in self._seeds:
                self._seeds.move_to_end(key)
        if state is not None:
            self._apply(llama, state)
        if seed is not None:
            llama._seed = seed
        return 0 if state is None else len(state.tokens)

    def end(self, llama: Any, key: Hashable) -> None:
        """Save the context's state and sampling seed under ``key`` (after a successful call)."""
        if self.initial_seed is not None:
            with self._lock:
                self._seeds[key] = int(llama._seed)
                self._seeds.move_to_end(key)
                while len(self._seeds) > SEED_KEYS:
                    self._seeds.popitem(last=False)
        if not self._budget:
            return
        state = self._snapshot(llama)
        with self._lock:
            self._drop(key)
            if state is None or state.nbytes > self._budget:
                return  # nothing to keep, or a state larger than the whole budget
            self._states[key] = state
            self._bytes += state.nbytes
            self._evict()

    def discard(self, key: Hashable) -> None:
        """Forget ``key``'s state (a failed call: the context may hold half an evaluation)."""
        with self._lock:
            self._drop(key)

    # ------------------------------------------------------------ management
    @property
    def budget_bytes(self) -> int:
        """The most memory the saved states may hold; setting it evicts down to it."""
        return self._budget

    @budget_bytes.setter
    def budget_bytes(self, value: int) -> None:
        with self._lock:
            self._budget = max(0, int(value))
            self._evict()

    def clear(self) -> None:
        """Forget every saved state (not the sampling seeds: clearing changes no answer)."""
        with self._lock:
            self._states.clear()
            self._bytes = 0

    def keys(self) -> list[Hashable]:
        """The saved conversation keys, least recently used first."""
        with self._lock:
            return list(self._states)

    def stats(self) -> PrefixCacheStats:
        with self._lock:
            return PrefixCacheStats(len(self._states), self._bytes, self._budget, self._hits, self._misses,
                                    self._evictions, self._reused)

    def _drop(self, key: Hashable) -> None:
        old = self._states.pop(key, None)
        if old is not None:
            self._bytes -= old.nbytes

    def _evict(self) -> None:
        while self._states and self._bytes > self._budget:
            _, old = self._states.popitem(last=False)
            self._bytes -= old.nbytes
            self._evictions += 1


# ------------------------------------------------------------------ llama.cpp state
class ChunkedPrompt:
    """Wraps ``llama.eval`` so that a prompt is evaluated in chunks at fixed positions.

    llama-cpp-python evaluates a prompt from the end of the prefix it reuses, in batches
    of ``n_batch`` (which must equal ``chunk``). The first ``eval`` of a call (the prompt)
    is moved back to the start of a chunk, and to no further than ``cap`` restored tokens,
    re-evaluating the tokens in between; the evals of generated tokens pass unchanged.
    """

    def __init__(self, llama: Any, chunk: int = PREFIX_CHUNK):
        self.llama, self.chunk = llama, chunk
        self._eval = llama.eval
        self.cap = 0
        self.prompt_end = 0
        self._first = False
        llama.eval = self

    def start(self, cap: int) -> None:
        """A call begins; at most ``cap`` restored tokens may be kept."""
        self.cap, self.prompt_end, self._first = cap, 0, True

    @property
    def reusable(self) -> int:
        """Leading tokens of the last call that were evaluated as whole prompt chunks."""
        return self.prompt_end // self.chunk * self.chunk

    def __call__(self, tokens: Sequence[int]) -> None:
        llama = self.llama
        if self._first:
            self._first = False
            past = int(llama.n_tokens)
            keep = min(past, self.cap) // self.chunk * self.chunk
            if keep < past:
                tokens = [*llama.input_ids[keep:past].tolist(), *tokens]
                llama.n_tokens = keep  # eval drops the KV cells from here on
            self.prompt_end = keep + len(tokens)
        self._eval(tokens)


def llama_ops(llama_cpp: Any, chunked: ChunkedPrompt) -> tuple[
    Callable[[Any], SavedState | None], Callable[[Any, SavedState], None], Callable[[Any], None]
]:
    """``snapshot``, ``apply`` and ``clear`` for a ``llama_cpp.Llama`` (sequence 0's KV cells only)."""

    def clear(llama: Any) -> None:
        # the whole KV memory, and its insertion head: a restored state lands in the same cells
        # whatever the previous caller left, so its answer is computed the same way
        llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(llama._ctx.ctx), True)
        llama.reset()
        chunked.start(0)

    def snapshot(llama: Any) -> SavedState | None:
        n = int(llama.n_tokens)
        if n == 0:
            return None
        ctx = llama._ctx.ctx
        size = int(llama_cpp.llama_state_seq_get_size(ctx, 0))
        buf = (ctypes.c_uint8 * size)()
        got = int(llama_cpp.llama_state_seq_get_data(ctx, buf, size, 0))
        if got == 0 or got > size:
            return None
        return SavedState(tokens=llama.input_ids[:n].copy(), kv=buf, kv_size=got, seed=int(llama._seed),
                          reusable=min(n, chunked.reusable))

    def apply(llama: Any, state: SavedState) -> None:
        if llama_cpp.llama_state_seq_set_data(llama._ctx.ctx, state.kv, state.kv_size, 0) != state.kv_size:
            clear(llama)  # could not load: start empty, correct but cold
            return
        n = len(state.tokens)
        llama.input_ids[:n] = state.tokens
        llama.n_tokens = n
        llama._requires_eval = True  # no live logits: llama-cpp-python re-evaluates the last prompt token
        chunked.start(state.reusable)

    return snapshot, apply, clear


# ------------------------------------------------------------------ conversation keys
_TEAM_IDS: dict[int, tuple[weakref.ref[Any], int]] = {}
_TEAM_COUNTER = itertools.count(1)
_TEAM_IDS_LOCK = threading.Lock()


def _team_id(cost_manager: Any) -> int:
    """A number for this team's cost manager, never reused: a new team whose cost manager lands at a
    dead one's address (same ``id()``) must not inherit its states. (Cost managers are not hashable.)"""
    with _TEAM_IDS_LOCK:
        found = _TEAM_IDS.get(id(cost_manager))
        if found is not None and found[0]() is cost_manager:
            return found[1]
        number = next(_TEAM_COUNTER)
        key = id(cost_manager)

        def forget(_ref: weakref.ref[Any]) -> None:
            _TEAM_IDS.pop(key, None)

        _TEAM_IDS[key] = (weakref.ref(cost_manager, forget), number)
        return number


def conversation_key(messages: Sequence[dict[str, Any]]) -> Hashable:
    """Whose saved state a call continues: the running role of its team, else its system prompt.

    The role (and its team's cost manager) come from the meter the team sets around a
    role's turn (:func:`rolecast.metering.current_meter`). Outside any role, calls sharing
    a system message (or, with none, a first message) share a state.
    """
    meter = current_meter()
    if meter.role:
        return ("role", _team_id(meter.cost_manager), meter.role)
    first = messages[0] if messages else {}
    content = first.get("content")
    text = content if isinstance(content, str) else repr(content)
    digest = hashlib.blake2b(text.encode(), digest_size=16).hexdigest()
    return ("system" if first.get("role") == "system" else "first", digest)


__all__ = [
    "DEFAULT_PREFIX_CACHE_MIB", "PREFIX_CHUNK", "SEED_KEYS", "ChunkedPrompt", "PrefixCache", "PrefixCacheStats",
    "SavedState", "conversation_key", "llama_ops",
]
