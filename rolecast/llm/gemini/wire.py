"""rolecast's messages (OpenAI chat dictionaries) as Gemini's ``generateContent`` wants them, and back.

* ``system`` messages become ``systemInstruction``; ``assistant`` is the ``model`` role;
* empty text parts are left out (the API rejects them);
* an assistant message's ``tool_calls`` become ``functionCall`` parts, and each ``tool``
  message a ``functionResponse`` part naming its function (found by the call's id) in a
  ``user`` turn; consecutive turns of one role are merged;
* OpenAI-style tools become ``functionDeclarations`` with ``parametersJsonSchema`` (the JSON
  schema as is: ``parameters`` takes only an OpenAPI subset without ``$ref``).

Pure functions on plain dictionaries (the SDK's snake_case fields), no SDK import.
"""

from __future__ import annotations

import json
from typing import Any

from ...errors import OutputParseError, UsageError
from ..types import Messages, ToolCall, Usage

__all__ = ["GENERATED_ID", "choice_config", "contents_of", "declarations_of", "response_parts", "usage_of"]

#: the prefix of tool-call ids made here (Gemini's API often sends calls without an id)
GENERATED_ID = "gemini-call-"


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, list):
        return "".join(str(p.get("text") or "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return str(content)


def _call_part(call: dict[str, Any], signatures: dict[str, bytes]) -> dict[str, Any]:
    function = call.get("function") or {}
    raw = function.get("arguments") or "{}"
    try:
        args = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError as exc:
        raise OutputParseError(f"tool call {function.get('name')!r} has arguments that are not JSON: {exc}",
                               raw=str(raw)) from exc
    part: dict[str, Any] = {"name": str(function.get("name") or ""),
                            "args": args if isinstance(args, dict) else {"value": args}}
    call_id = str(call.get("id") or "")
    if call_id and not call_id.startswith(GENERATED_ID):
        part["id"] = call_id
    if call_id in signatures:  # the model's thought signature goes back with its call (Gemini 3 requires it)
        return {"function_call": part, "thought_signature": signatures[call_id]}
    return {"function_call": part}


def contents_of(
    messages: Messages, signatures: dict[str, bytes] | None = None,
) -> tuple[str | None, list[dict[str, Any]]]:
    """``(system_instruction, contents)`` for ``generateContent``; ``signatures``: the thought signature
    of each function call the model made, by call id."""
    system: list[str] = []
    contents: list[dict[str, Any]] = []
    names: dict[str, str] = {}  # tool-call id -> function name, for functionResponse
    for message in messages:
        role = message.get("role")
        text = _text(message.get("content"))
        parts: list[dict[str, Any]] = []
        if role == "system":
            if text.strip():
                system.append(text)
            continue
        if role == "tool":
            call_id = str(message.get("tool_call_id") or "")
            response: dict[str, Any] = {"name": names.get(call_id, call_id), "response": {"result": text}}
            if call_id and not call_id.startswith(GENERATED_ID):
                response["id"] = call_id
            parts.append({"function_response": response})
        elif role in ("user", "assistant"):
            if text.strip():
                parts.append({"text": text})
            for call in message.get("tool_calls") or []:
                names[str(call.get("id") or "")] = str((call.get("function") or {}).get("name") or "")
                parts.append(_call_part(call, signatures or {}))
        else:
            raise UsageError(f"the Gemini provider cannot send a message of role {role!r}")
        if not parts:
            continue
        wire_role = "model" if role == "assistant" else "user"
        if contents and contents[-1]["role"] == wire_role:
            contents[-1]["parts"].extend(parts)
        else:
            contents.append({"role": wire_role, "parts": parts})
    return ("\n\n".join(system) or None), contents


def declarations_of(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI-style tool schemas as one Gemini tool of function declarations."""
    declarations = []
    for tool in tools:
        function = tool.get("function", tool)
        entry: dict[str, Any] = {"name": function["name"],
                                 "parameters_json_schema": function.get("parameters") or {"type": "object"}}
        if function.get("description"):
            entry["description"] = function["description"]
        declarations.append(entry)
    return [{"function_declarations": declarations}]


def choice_config(n_options: int) -> dict[str, Any]:
    """Gemini's enum mode: the answer is exactly one of the numbers ``-1 … n_options-1``, as text."""
    return {"response_mime_type": "text/x.enum",
            "response_schema": {"type": "STRING", "enum": [str(i) for i in range(-1, n_options)]}}


def usage_of(metadata: Any) -> Usage:
    """``usageMetadata``: prompt tokens, and candidates plus thoughts tokens (both are billed as output)."""
    if metadata is None:
        return Usage()
    output = int(getattr(metadata, "candidates_token_count", 0) or 0)
    output += int(getattr(metadata, "thoughts_token_count", 0) or 0)
    return Usage(int(getattr(metadata, "prompt_token_count", 0) or 0), output)


def response_parts(
    response: Any, counter: int = 0, signatures: dict[str, bytes] | None = None,
) -> tuple[str, list[ToolCall], str | None]:
    """The text, the function calls and the finish reason of a response's first candidate; each
    call's thought signature, if it has one, is put in ``signatures`` under the call's id."""
    candidates = getattr(response, "candidates", None) or []
    if not candidates:
        return "", [], None
    candidate = candidates[0]
    content = getattr(candidate, "content", None)
    texts: list[str] = []
    calls: list[ToolCall] = []
    for part in getattr(content, "parts", None) or []:
        if getattr(part, "thought", False):
            continue
        if getattr(part, "text", None):
            texts.append(str(part.text))
        call = getattr(part, "function_call", None)
        if call is not None:
            call_id = str(call.id) if getattr(call, "id", None) else f"{GENERATED_ID}{counter + len(calls)}"
            calls.append(ToolCall(id=call_id, name=str(call.name),
                                  arguments=json.dumps(call.args or {}, ensure_ascii=False)))
            if signatures is not None and getattr(part, "thought_signature", None):
                signatures[call_id] = part.thought_signature
    finish = getattr(candidate, "finish_reason", None)
    return "".join(texts), calls, (str(getattr(finish, "value", finish)) if finish is not None else None)
