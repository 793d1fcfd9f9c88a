"""A provider's words in rolecast's errors: credentials redacted, control characters escaped, bounded.

What a model server answers an error with (its message, its body) and the addresses a provider
was configured with (``base_url``, ``proxy``) end up in exception text, and from there in the
console, the run log, the run store, ``rolecast runs show``, OpenTelemetry spans and the logs of
``rolecast eval`` and ``serve``. So before any of that sees them:

* a URL's credentials (``https://user:password@host``, ``http://token@proxy``) become ``***``;
* control characters (``\\x1b[2J``, ``\\r``, bidirectional overrides) are escaped (see
  :func:`~rolecast.observe.printable.printable`);
* the text is cut at :data:`MAX_ERROR_CHARS` characters, saying how many more there were.

Each function is one linear pass over its text.
"""

from __future__ import annotations

import json
from typing import Any

from ..core.redact import redact_url, redact_urls
from ..observe.printable import printable

__all__ = ["MAX_ERROR_CHARS", "bounded_body", "error_text", "redact_url", "redact_urls"]

#: the most characters of a server's error kept in an exception's text or body
MAX_ERROR_CHARS = 2000

def error_text(text: object, limit: int = MAX_ERROR_CHARS) -> str:
    """``text`` as exception text may hold it: credentials redacted, control characters escaped, at
    most ``limit`` characters of the original kept (and how many more there were said)."""
    value = redact_urls(text if isinstance(text, str) else str(text))
    if len(value) <= limit:
        return printable(value)
    return f"{printable(value[:limit])} … [{len(value) - limit:,} more characters]"


def bounded_body(body: Any, limit: int = MAX_ERROR_CHARS) -> Any:
    """A server's error body as an exception keeps it: as it is when small, else its text cut to ``limit``
    characters (a 3 MB body is not carried through the run log and every ``repr``)."""
    if body is None or isinstance(body, (int, float, bool)):
        return body
    if isinstance(body, bytes):
        body = body.decode("utf-8", errors="replace")
    if isinstance(body, str):
        return error_text(body, limit) if len(body) > limit or "@" in body else body
    try:
        text = json.dumps(body, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):
        return error_text(repr(body)[: limit * 2], limit)
    if len(text) > limit or "@" in text:
        return error_text(text, limit)
    return body
