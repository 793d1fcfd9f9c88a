"""Stopping a small model that loops: the same span of tokens over and over until the token cap.

SmolLM2-135M often ends its free text by repeating one sentence until ``max_tokens``
("The tests are good. The tests are good. …"). :class:`RepetitionStop` watches the
answer as the engine streams it, one token's text at a time, and once its tail is
``copies`` identical spans of ``min_period`` … ``max_period`` tokens in a row it says
stop (the engine then cancels the rest of that request); :meth:`RepetitionStop.trim`
keeps one copy of the repeated span. A long span (``long_period`` tokens or more) needs
only ``long_copies`` copies: a paragraph said twice in a row is already a loop, and
waiting for its third copy would only decode tokens to throw away. The check costs one
pass over at most ``max_period`` tokens per token (a candidate period must end on the
same token as the answer), in pure Python: decoding speed is unchanged.

Tokens are compared by their text: each distinct piece the engine streams gets a number.
"""

from __future__ import annotations


class RepetitionStop:
    """Watches a streamed answer and says when its tail repeats itself (see the module)."""

    def __init__(
        self, *, min_period: int = 6, max_period: int = 160, copies: int = 3,
        long_period: int = 32, long_copies: int = 2,
    ):
        self.min_period = min_period
        self.max_period = max_period
        self.copies = copies
        self.long_period = long_period
        self.long_copies = min(long_copies, copies)
        self.fired = False
        self.span: list[int] = []  # once fired: the repeated span's tokens
        self.found_copies = 0  # once fired: how many copies of it ended the answer
        self._answer: list[int] = []
        self._ids: dict[str, int] = {}
        self._pieces: list[str] = []

    def feed(self, piece: str) -> bool:
        """One more streamed token (its text); True once the answer loops (stop decoding)."""
        if self.fired:
            return True
        token = self._ids.get(piece)
        if token is None:
            token = self._ids[piece] = len(self._pieces)
            self._pieces.append(piece)
        self._answer.append(token)
        self.fired = self._repeats(self._answer)
        return self.fired

    def copies_needed(self, period: int) -> int:
        """How many copies of a span of ``period`` tokens in a row stop the answer."""
        return self.long_copies if period >= self.long_period else self.copies

    def _repeats(self, answer: list[int]) -> bool:
        n = len(answer)
        longest = min(self.max_period, n // self.long_copies)
        if longest < self.min_period:
            return False
        last = answer[n - 1]
        # candidate periods p, longest first: the token p places before the last one equals it
        for p in range(longest, self.min_period - 1, -1):
            if answer[n - 1 - p] != last:
                continue
            copies = self.copies_needed(p)
            if copies * p > n:
                continue
            tail = answer[n - p :]
            if all(answer[n - (k + 1) * p : n - k * p] == tail for k in range(1, copies)):
                self.span, self.found_copies = tail, copies
                return True
        return False

    def text_of(self, tokens: list[int]) -> str:
        """The text of watched tokens."""
        return "".join(self._pieces[t] for t in tokens)

    def trim(self, text: str) -> str:
        """``text`` (the answer this watcher stopped) with one copy of its repeated tail.

        The copies of a long span are cut exactly; a short span's are found in the text
        (:func:`trim_repetition`).
        """
        if not self.fired:
            return text
        if self.found_copies >= self.copies or not self.span:
            return trim_repetition(text, self.copies)
        span = self.text_of(self.span)
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
