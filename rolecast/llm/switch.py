"""The switch that blocks requests to real models (tests keep it off): :func:`model_requests_allowed`."""

from __future__ import annotations

import os

from ..errors import UsageError

#: set to 0 (or false, no, off), requests to real models raise ModelRequestsBlocked (tests set it)
ALLOW_MODEL_REQUESTS_ENV = "ROLECAST_ALLOW_MODEL_REQUESTS"
#: set in code (rolecast.testing.allow_model_requests), it overrides the environment variable
_allow_model_requests: bool | None = None


def model_requests_allowed() -> bool:
    """Whether a provider that :attr:`BaseLLM.reaches_a_model` may make a request: as set in code
    (:func:`set_model_requests_allowed`), else by ``ROLECAST_ALLOW_MODEL_REQUESTS`` (allowed unless 0)."""
    if _allow_model_requests is not None:
        return _allow_model_requests
    return os.environ.get(ALLOW_MODEL_REQUESTS_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def set_model_requests_allowed(allowed: bool | None) -> bool | None:
    """Allow (True) or block (False) requests to real models in this process, or go back to the
    environment variable (None); returns the previous setting (see :func:`rolecast.testing.allow_model_requests`)."""
    global _allow_model_requests
    if allowed is not None and not isinstance(allowed, bool):
        raise UsageError(f"model requests are allowed with True or False (None: as the environment says), "
                         f"not {allowed!r}")
    previous, _allow_model_requests = _allow_model_requests, allowed
    return previous


__all__ = ["ALLOW_MODEL_REQUESTS_ENV", "model_requests_allowed", "set_model_requests_allowed"]
