"""Text from a run, made safe to print on a terminal.

Role names, run ids and what a model wrote come from users and models: a control character
in them (``\\x1b[2J`` clears the screen, ``\\r`` overwrites a line, ``\\u202e`` reverses what
follows, a lone surrogate cannot even be encoded) must reach the terminal as a visible
escape, not as an effect. :func:`printable` writes each such character as Python writes it
in a string literal (``\\x1b``, ``\\u202e``, ``\\ud800``); everything else is left as it is.
"""

from __future__ import annotations

import re

__all__ = ["printable"]

# C0 and C1 controls and DEL, the bidirectional overrides and isolates (U+202A-E, U+2066-9),
# and surrogates (U+D800-DFFF, which a model's text may hold alone: not encodable as UTF-8)
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_UNSAFE_BUT_LINES = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    return _SHORT.get(char) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def printable(text: object, *, lines: bool = False) -> str:
    """``text`` with every control character escaped; ``lines=True`` keeps newlines and tabs
    (a message's body), otherwise they are escaped too (a name, an id: one line)."""
    value = text if isinstance(text, str) else str(text)
    return (_UNSAFE_BUT_LINES if lines else _UNSAFE).sub(_escape, value)
