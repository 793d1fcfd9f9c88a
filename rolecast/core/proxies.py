"""MetaGPT's ``proxy`` setting, read strictly when the configuration is (``rolecast info`` says what is wrong)."""

from __future__ import annotations

from typing import Annotated, Any, Union
from urllib.parse import urlsplit

from pydantic import BeforeValidator

from .redact import redact_urls


def _proxy_url(value: Any) -> str | None:
    """MetaGPT's ``proxy``: an ``http://`` or ``https://`` URL with a host (``""``: none). Anything else —
    MetaGPT's placeholder ``YOUR_PROXY``, a bare ``host:port`` — is refused here, when the configuration
    is read (``rolecast info`` says so), not by the SDK at the first call."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if not isinstance(value, str):
        raise ValueError("proxy must be a URL such as http://proxy.example:3128")
    text = value.strip()
    parts = urlsplit(text)
    try:
        port_ok = parts.port is None or parts.port > 0
    except ValueError:
        port_ok = False
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname or not port_ok:
        raise ValueError(f"{redact_urls(text)!r} is not a proxy URL: give one such as http://proxy.example:3128 "
                         "(http:// or https://), or leave proxy out")
    return text


ProxyURL = Annotated[Union[str, None], BeforeValidator(_proxy_url)]


__all__ = ["ProxyURL"]
