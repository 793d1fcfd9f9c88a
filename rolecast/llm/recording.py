"""How a model call is written to the run log and read back: request fingerprints and answers.

The fingerprint hashes everything that decides the answer (the call's kind, the
messages, stop sequences, settings, the schema and tools asked for), so that a
re-executed run meets the same fingerprint exactly when it asks the same thing. The
log keeps a compact, readable summary of the request beside it (the last message and
the size), not the whole prompt: prompts carry the history and would make the log
grow with the square of the run's length.

The text hashed is :func:`~rolecast.runs.calls.fingerprint`'s — ``json.dumps(request,
sort_keys=True, ensure_ascii=False, default=str)`` of ``{"kind", "messages", each parameter
given}`` (a pydantic value, such as the call's settings, as its ``model_dump(exclude_none=True)``),
so a run logged by an earlier version still resumes (:func:`~rolecast.runs.calls.request_fingerprint`
writes that text without building the request).
"""

from __future__ import annotations

from typing import Any

from ..runs.calls import request_fingerprint

REQUEST_PREVIEW = 2000  # characters of the last message kept in the log


def describe_request(kind: str, messages: list[dict[str, Any]], **params: Any) -> tuple[str, dict[str, Any]]:
    """The fingerprint of a call and the compact summary the log keeps."""
    last = str(messages[-1].get("content") or "") if messages else ""
    system = ""
    for message in messages:
        if message.get("role") == "system":
            system = str(message.get("content") or "")
            break
    summary = {
        "kind": kind,
        "n_messages": len(messages),
        "system": system[:300],
        "last": last[-REQUEST_PREVIEW:],
    }
    return request_fingerprint(kind, messages, params), summary


__all__ = ["describe_request"]
