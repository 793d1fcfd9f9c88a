"""What a run id may be, checked wherever one comes in.

A run id names a run in the store, and a few things on disk are named after it (a failed
run's checkpoint folder, ``<store dir>/checkpoints/<run id>``). So it is a plain name, never a
path: 1 to 128 characters of ASCII letters, digits, ``.``, ``_`` and ``-``, beginning with a
letter or a digit (``20261125-103000-1a2b3c4d``, ``nightly_2``, ``run-1.retry``). That rules
out ``/``, ``..``, an absolute path, whitespace, control characters and lone surrogates:
every path derived from a run id is one folder inside the store's own.

A bad id — given to ``Team(run_id=...)``, ``RunLog``, ``ReplayLLM.from_store`` or
``rolecast runs show`` — is a :class:`~rolecast.errors.UsageError` that says what is allowed.
"""

from __future__ import annotations

import re
from typing import Any

from ..errors import UsageError

#: the characters and length a run id may have
RUN_ID_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}"
"""What a run id may be: 1–128 letters, digits, ``.``, ``_`` or ``-``, starting with a letter or digit."""
_RUN_ID = re.compile(RUN_ID_PATTERN)


def check_run_id(run_id: Any) -> str:
    """``run_id`` when it is a valid run id (see the module's docstring), else :class:`UsageError`."""
    if isinstance(run_id, str) and _RUN_ID.fullmatch(run_id):
        return run_id
    shown = ascii(run_id)
    shown = shown if len(shown) <= 80 else shown[:79] + "…"
    raise UsageError(
        f"{shown} is not a run id: use 1 to 128 ASCII letters, digits, '.', '_' or '-', "
        "beginning with a letter or a digit"
    )


#: the largest event number a store holds (SQLite's and PostgreSQL's signed 64-bit integer)
MAX_SEQ = 2**63 - 1


def parse_seq(value: Any, what: str = "after") -> int:
    """An event number (``?after=``, ``Last-Event-ID``, a checkpoint's seq) from text or an int: a whole
    number from 0 to :data:`MAX_SEQ`; anything else — ``99999999999999999999999``, ``-1``, ``1e3``,
    60 digits of text — a :class:`UsageError`, never an ``OverflowError`` from the database."""
    text = str(value).strip() if not isinstance(value, int) or isinstance(value, bool) else None
    if text is not None and not (text.isascii() and text.isdigit() and len(text) <= 19):
        shown = ascii(text) if len(text) <= 40 else ascii(text[:39]) + "…"
        raise UsageError(f"{what} is an event's number, a whole number from 0 to {MAX_SEQ}: not {shown}")
    number = int(text) if text is not None else int(value)
    if not 0 <= number <= MAX_SEQ:
        raise UsageError(f"{what} is an event's number, a whole number from 0 to {MAX_SEQ}: not {number}")
    return number


__all__ = ["MAX_SEQ", "RUN_ID_PATTERN", "check_run_id", "parse_seq"]
