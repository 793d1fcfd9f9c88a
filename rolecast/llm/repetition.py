"""Stopping a small model that loops: the same span of tokens over and over until the token cap.

SmolLM2-135M often ends its free text by repeating one sentence until ``max_tokens``
("The tests are good. The tests are good. …"). :class:`RepetitionStop` is a llama.cpp
logits processor that watches the answer as it is decoded and, once its tail is
``copies`` identical spans of ``min_period`` … ``max_period`` tokens in a row, allows
only the end-of-generation token; :meth:`RepetitionStop.trim` then keeps one copy of the
repeated span. A long span (``long_period`` tokens or more) needs only ``long_copies``
copies: a paragraph said twice in a row is already a loop, and waiting for its third copy
would only decode tokens to throw away. The check costs one vector comparison per token
(a candidate period must end on the same token as the answer), so decoding speed is
unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class RepetitionStop:
    """A llama.cpp ``logits_processor`` ending an answer whose tail repeats itself (see the module)."""

    def __init__(
        self, eos: int, *, min_period: int = 6, max_period: int = 160, copies: int = 3,
        long_period: int = 32, long_copies: int = 2,
    ):
        self.eos = eos
        self.min_period = min_period
        self.max_period = max_period
        self.copies = copies
        self.long_period = long_period
        self.long_copies = min(long_copies, copies)
        self.fired = False
        self.span: list[int] = []  # once fired: the repeated span's tokens
        self.found_copies = 0  # once fired: how many copies of it ended the answer
        self._start: int | None = None  # where the answer begins in input_ids (the prompt's length)

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import numpy as np

        if self._start is None:
            self._start = len(input_ids)
        if self.fired or self._repeats(np.asarray(input_ids[self._start :])):
            self.fired = True
            scores[:] = -np.inf
            scores[self.eos] = 0.0
        return scores

    def copies_needed(self, period: int) -> int:
        """How many copies of a span of ``period`` tokens in a row stop the answer."""
        return self.long_copies if period >= self.long_period else self.copies

    def _repeats(self, answer: Any) -> bool:
        import numpy as np

        n = len(answer)
        longest = min(self.max_period, n // self.long_copies)
        if longest < self.min_period:
            return False
        last = answer[n - 1]
        # candidate periods p: the token p places before the last one equals it
        window = answer[n - 1 - longest : n - self.min_period]
        for i in np.nonzero(window == last)[0]:
            p = longest - int(i)
            copies = self.copies_needed(p)
            if copies * p > n:
                continue
            tail = answer[n - p :]
            if all(np.array_equal(answer[n - (k + 1) * p : n - k * p], tail) for k in range(1, copies)):
                self.span, self.found_copies = [int(t) for t in tail], copies
                return True
        return False

    def trim(self, text: str, detokenize: Callable[[list[int]], bytes]) -> str:
        """``text`` (the answer this processor stopped) with one copy of its repeated tail.

        ``detokenize`` turns the span's tokens back into bytes: the copies of a long span
        are cut exactly; a short span's are found in the text (:func:`trim_repetition`).
        """
        if not self.fired:
            return text
        if self.found_copies >= self.copies or not self.span:
            return trim_repetition(text, self.copies)
        span = detokenize(self.span).decode("utf-8", errors="ignore")
        kept = text
        for _ in range(self.found_copies - 1):
            if not span or not kept.endswith(span) or not kept[: len(kept) - len(span)].endswith(span):
                break
            kept = kept[: len(kept) - len(span)]
        return kept.rstrip()


def trim_repetition(text: str, copies: int = 3, min_chars: int = 8) -> str:
    """``text`` without the repeated copies of its tail: ``"a. b. b. b."`` → ``"a. b."`` (else unchanged).

    The shortest period (in characters) of which the tail holds ``copies`` copies in a
    row is found; the extra copies are dropped. Quadratic in the worst case, so it is
    run once, on an answer the model already cut short (at most ``max_tokens`` long).
    """
    n = len(text)
    for p in range(min_chars, n // copies + 1):
        tail = text[n - p :]
        if all(text[n - (k + 1) * p : n - k * p] == tail for k in range(1, copies)):
            return text[: n - (copies - 1) * p].rstrip()
    return text


__all__ = ["RepetitionStop", "trim_repetition"]
