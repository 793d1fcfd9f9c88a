"""Credentials inside URLs (``https://user:password@host``, ``http://token@proxy:3128``) are secrets too.

A configured ``base_url`` or ``proxy`` may carry them; wherever such an address is shown — ``rolecast
info``, a configuration error, an exception's text, and so the run log, the run store, ``runs show``
and OpenTelemetry spans — its userinfo is replaced by ``***``. One linear pass over the text.
"""

from __future__ import annotations

__all__ = ["redact_url", "redact_urls"]

import re

# the userinfo of a URL: after "://", up to the "@" before the host (no "/", whitespace, "?" or "#" in it);
# a scan from one "://" stops at the next "/", so the whole substitution is linear
_USERINFO = re.compile(r"://[^/\s@?#]*@")


def redact_urls(text: str) -> str:
    """``text`` with the credentials of every URL in it replaced by ``***``."""
    return _USERINFO.sub("://***@", text) if "@" in text else text


def redact_url(url: str | None) -> str | None:
    """One configured address (``base_url``, ``proxy``) as it may be shown."""
    return None if url is None else redact_urls(url)
