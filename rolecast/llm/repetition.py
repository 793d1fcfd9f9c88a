"""Stopping a small model that loops: the same span of tokens over and over until the token cap.

SmolLM2-135M often ends its free text by repeating one sentence until ``max_tokens``
("The tests are good. The tests are good. …"). :class:`RepetitionStop` is a llama.cpp
logits processor that watches the answer as it is decoded and, once its tail is
``copies`` identical spans of ``min_period`` … ``max_period`` tokens in a row, allows
only the end-of-generation token; :func:`trim_repetition` then keeps one copy of the
repeated span. The check costs one vector comparison per token (a candidate period
must end on the same token as the answer), so decoding speed is unchanged.
"""

from __future__ import annotations

from typing import Any


class RepetitionStop:
    """A llama.cpp ``logits_processor`` ending an answer whose tail repeats itself (see the module)."""

    def __init__(self, eos: int, *, min_period: int = 6, max_period: int = 160, copies: int = 3):
        self.eos = eos
        self.min_period = min_period
        self.max_period = max_period
        self.copies = copies
        self.fired = False
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

    def _repeats(self, answer: Any) -> bool:
        import numpy as np

        n = len(answer)
        longest = min(self.max_period, n // self.copies)
        if longest < self.min_period:
            return False
        last = answer[n - 1]
        # candidate periods p: the token p places before the last one equals it
        window = answer[n - 1 - longest : n - self.min_period]
        for i in np.nonzero(window == last)[0]:
            p = longest - int(i)
            tail = answer[n - p :]
            if all(np.array_equal(answer[n - (k + 1) * p : n - k * p], tail) for k in range(1, self.copies)):
                return True
        return False


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
