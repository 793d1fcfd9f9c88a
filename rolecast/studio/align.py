"""Lining two sequences up in bounded time: the comparison's alignment.

``difflib.SequenceMatcher`` (with ``autojunk=False``, which a comparison of messages needs: a
repeated "I agree." is not junk) takes time that grows with the square of the length, and worse
where items repeat: two runs of 16,000 near-identical messages took 47 s of a server thread.
:func:`opcodes` gives the same kind of answer (``difflib``'s ``(tag, i1, i2, j1, j2)``) in
near-linear time:

1. the common start and end are cut off (one pass: runs that part once cost nothing more);
2. in what is left, the items that occur exactly once on each side and in the same order (the
   longest increasing run of them: "patience" anchors, ``O(n log n)``) are matched, and each gap
   between two anchors is lined up the same way, a few levels deep;
3. a gap that is still left is handed to ``difflib`` only while it is small (at most
   :data:`SMALL` pairs of items); a bigger one in windows of :data:`WINDOW` items a side.

The work is then at most about ``(DEPTH + WINDOW) * n`` comparisons of keys.
"""

from __future__ import annotations

import bisect
import difflib
from collections.abc import Callable, Hashable, Sequence

from ..errors import Abandoned

#: the most pairs of items (len(a) * len(b)) a gap may have to be lined up by difflib
SMALL = 40_000
#: the items on each side of one window of a big stretch with no anchors (WINDOW ** 2 <= SMALL)
WINDOW = 200
#: how many times the anchors are looked for again inside a gap
DEPTH = 4

Opcode = tuple[str, int, int, int, int]
Stop = Callable[[], bool]


def _never() -> bool:
    return False


def opcodes(a: Sequence[Hashable], b: Sequence[Hashable], stop: Stop = _never) -> list[Opcode]:
    """``difflib``-style opcodes (``equal``, ``replace``, ``delete``, ``insert``) turning ``a`` into ``b``;
    :class:`Abandoned` as soon as ``stop()`` (asked between steps) is true."""
    found: list[Opcode] = []
    if len(a) * len(b) <= SMALL:  # (small: difflib's own answer, at once)
        _gap(a, b, 0, len(a), 0, len(b), found, stop)
        return found
    _align(a, b, 0, len(a), 0, len(b), DEPTH, found, stop)
    return _merged(found)


def _align(a: Sequence[Hashable], b: Sequence[Hashable], i1: int, i2: int, j1: int, j2: int, depth: int,
           out: list[Opcode], stop: Stop) -> None:
    if stop():
        raise Abandoned("the comparison was stopped")
    start = 0
    while i1 + start < i2 and j1 + start < j2 and a[i1 + start] == b[j1 + start]:
        start += 1
    if start:
        out.append(("equal", i1, i1 + start, j1, j1 + start))
        i1, j1 = i1 + start, j1 + start
    end = 0
    while i1 < i2 - end and j1 < j2 - end and a[i2 - end - 1] == b[j2 - end - 1]:
        end += 1
    tail = ("equal", i2 - end, i2, j2 - end, j2)
    i2, j2 = i2 - end, j2 - end
    if i1 < i2 or j1 < j2:
        anchors = _anchors(a, b, i1, i2, j1, j2) if depth > 0 and i1 < i2 and j1 < j2 else []
        if anchors:
            at_i, at_j = i1, j1
            for i, j in anchors:
                _align(a, b, at_i, i, at_j, j, depth - 1, out, stop)
                out.append(("equal", i, i + 1, j, j + 1))
                at_i, at_j = i + 1, j + 1
            _align(a, b, at_i, i2, at_j, j2, depth - 1, out, stop)
        else:
            _gap(a, b, i1, i2, j1, j2, out, stop)
    if end:
        out.append(tail)


def _anchors(a: Sequence[Hashable], b: Sequence[Hashable], i1: int, i2: int, j1: int, j2: int
             ) -> list[tuple[int, int]]:
    """The items found exactly once in ``a[i1:i2]`` and once in ``b[j1:j2]``, the longest run of them
    in the same order on both sides, as ``(i, j)`` pairs."""
    seen_a: dict[Hashable, int] = {}
    for i in range(i1, i2):
        seen_a[a[i]] = -1 if a[i] in seen_a else i
    seen_b: dict[Hashable, int] = {}
    for j in range(j1, j2):
        if b[j] in seen_a:
            seen_b[b[j]] = -1 if b[j] in seen_b else j
    pairs = sorted((i, seen_b[k]) for k, i in seen_a.items() if i >= 0 and seen_b.get(k, -1) >= 0)
    return _increasing(pairs)


def _increasing(pairs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The longest run of ``pairs`` (sorted by their first) whose seconds increase (patience sorting)."""
    tops: list[int] = []  # the smallest second that ends a run of each length
    ends: list[int] = []  # the index in pairs of that run's last pair
    back = [-1] * len(pairs)
    for k, (_, j) in enumerate(pairs):
        place = bisect.bisect_left(tops, j)
        if place == len(tops):
            tops.append(j)
            ends.append(k)
        else:
            tops[place], ends[place] = j, k
        back[k] = ends[place - 1] if place else -1
    run: list[tuple[int, int]] = []
    k = ends[-1] if ends else -1
    while k >= 0:
        run.append(pairs[k])
        k = back[k]
    return run[::-1]


def _gap(a: Sequence[Hashable], b: Sequence[Hashable], i1: int, i2: int, j1: int, j2: int, out: list[Opcode],
         stop: Stop) -> None:
    """A stretch with no anchors: lined up by difflib while small; a big one in windows of
    :data:`WINDOW` items on each side, side by side (a message put in or left out shifts what follows
    by one: the next window lines that up again)."""
    if (i2 - i1) * (j2 - j1) <= SMALL:
        matcher = difflib.SequenceMatcher(a=a[i1:i2], b=b[j1:j2], autojunk=False)
        out += [(tag, i1 + p1, i1 + p2, j1 + q1, j1 + q2) for tag, p1, p2, q1, q2 in matcher.get_opcodes()]
        return
    for k in range(0, max(i2 - i1, j2 - j1), WINDOW):
        p1, p2 = min(i2, i1 + k), min(i2, i1 + k + WINDOW)
        q1, q2 = min(j2, j1 + k), min(j2, j1 + k + WINDOW)
        if stop():
            raise Abandoned("the comparison was stopped")
        _gap(a, b, p1, p2, q1, q2, out, stop)


def _merged(found: list[Opcode]) -> list[Opcode]:
    """Neighbouring opcodes of the same tag joined; empty ones dropped."""
    out: list[Opcode] = []
    for tag, i1, i2, j1, j2 in found:
        if i1 == i2 and j1 == j2:
            continue
        if out and out[-1][0] == tag and out[-1][2] == i1 and out[-1][4] == j1:
            out[-1] = (tag, out[-1][1], i2, out[-1][3], j2)
        else:
            out.append((tag, i1, i2, j1, j2))
    return out


__all__ = ["DEPTH", "SMALL", "WINDOW", "Abandoned", "opcodes"]
