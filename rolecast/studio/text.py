"""How text from a run is written on a studio page: escaped, neutralised, folded, code as code.

Everything a model or a person wrote is text, never markup (the templates autoescape). Three more
rules, for what escaping does not cover:

* :func:`neutral` (every value a template writes): control characters, and the bidirectional
  overrides and isolates (U+202A–E, U+2066–9) that make a page show text in another order than
  it holds (``evil\\u202etxt.exe``), are shown as escapes (``\\u202e``), as the CLI shows them;
* :func:`fold`: a text longer than :data:`FOLD_AT` characters shows its start and how much more
  there is (the JSON API has it all): a 50 MB message is not 50 MB of HTML;
* :func:`rich`: a message's fenced code (```` ``` ````) is written as code, in a ``<pre><code>``
  block, its fences gone — the code escaped like any text.
"""

from __future__ import annotations

import re
from typing import Any

from markupsafe import Markup, escape

from ..observe.printable import printable

#: characters of one text a page shows (the rest: counted, and one click on the JSON API away)
FOLD_AT = 20_000

_FENCE = re.compile(r"```[ \t]*([\w+#.-]*)[ \t]*\r?\n?$")


def neutral(value: Any) -> Any:
    """A template value with its control and bidi characters made visible escapes (a Markup stays one)."""
    if isinstance(value, Markup):
        return Markup(printable(str(value), lines=True))
    if isinstance(value, str):
        return printable(value, lines=True)
    return value


def _folded(text: str, limit: int) -> tuple[str, Markup]:
    if len(text) <= limit:
        return text, Markup("")
    more = len(text) - limit
    return text[:limit], Markup('<span class="folded">… {} more characters (the whole text: the JSON API, '
                                '/api/runs/…/events)</span>').format(f"{more:,}")


def fold(value: Any, limit: int = FOLD_AT) -> Markup:
    """``value`` as text, escaped, at most ``limit`` characters of it, then how many more there are."""
    head, note = _folded(value if isinstance(value, str) else str(value), limit)
    return escape(neutral(head)) + note


def rich(value: Any, limit: int = FOLD_AT) -> Markup:
    """A message's text (folded as :func:`fold`) with its fenced code blocks written as code (one pass
    over its lines; a fence never closed is text, as it was written)."""
    head, note = _folded(value if isinstance(value, str) else str(value), limit)
    out: list[Markup] = []
    text: list[str] = []  # lines of text not yet written
    code: list[str] | None = None  # the lines of an open fence's code
    language = ""
    for line in head.splitlines(keepends=True):
        fence = _FENCE.match(line)
        if code is None and fence is not None:
            code, language = [], fence.group(1)
            opened = line
        elif code is not None and line.strip() == "```":
            out.append(escape(neutral("".join(text))))
            attribute = Markup(' data-lang="{}"').format(language) if language else ""
            out.append(Markup('<pre class="code"{}><code>{}</code></pre>').format(
                attribute, neutral("".join(code).rstrip("\n"))))
            text, code = [], None
        elif code is not None:
            code.append(line)
        else:
            text.append(line)
    if code is not None:  # never closed: its fence and lines are text
        text += [opened, *code]
    out.append(escape(neutral("".join(text))))
    return Markup("").join(out) + note


__all__ = ["FOLD_AT", "fold", "neutral", "rich"]
