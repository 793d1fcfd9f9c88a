"""rolecast's messages (OpenAI chat dictionaries) as Anthropic's Messages API wants them, and back.

* ``system`` messages become the request's ``system`` field (Anthropic rejects a
  ``system`` role inside ``messages``);
* an assistant message with ``tool_calls`` becomes ``text`` and ``tool_use`` blocks, and
  the ``tool`` messages answering it one ``user`` message of ``tool_result`` blocks;
* consecutive messages of one role are merged (turns alternate), empty text is left out;
* OpenAI-style tools (``{"type": "function", "function": {...}}``) become
  ``{"name", "description", "input_schema"}``.

Pure functions, no SDK: tested on their own and by the fake server.
"""

from __future__ import annotations

import json
from typing import Any

from ...errors import OutputParseError, UsageError
from ..types import Messages, ToolCall, Usage

__all__ = ["request_messages", "response_parts", "tools_of", "usage_of"]


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts: the text ones
        return "".join(str(p.get("text") or "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return str(content)


def _arguments(call: dict[str, Any]) -> dict[str, Any]:
    function = call.get("function") or {}
    raw = function.get("arguments") or "{}"
    try:
        value = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError as exc:
        raise OutputParseError(f"tool call {function.get('name')!r} has arguments that are not JSON: {exc}",
                               raw=str(raw)) from exc
    return value if isinstance(value, dict) else {"value": value}


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    role = message.get("role")
    if role == "tool":
        return [{"type": "tool_result", "tool_use_id": str(message.get("tool_call_id") or ""),
                 "content": _text(message.get("content")) or "(no output)"}]
    blocks: list[dict[str, Any]] = []
    text = _text(message.get("content"))
    if text.strip():
        blocks.append({"type": "text", "text": text})
    for call in message.get("tool_calls") or []:
        blocks.append({"type": "tool_use", "id": str(call.get("id") or ""),
                       "name": str((call.get("function") or {}).get("name") or ""), "input": _arguments(call)})
    return blocks


def request_messages(messages: Messages) -> tuple[str | None, list[dict[str, Any]]]:
    """``(system, messages)`` for the Messages API."""
    system: list[str] = []
    turns: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role")
        if role == "system":
            if _text(message.get("content")).strip():
                system.append(_text(message.get("content")))
            continue
        if role not in ("user", "assistant", "tool"):
            raise UsageError(f"the Anthropic provider cannot send a message of role {role!r}")
        wire_role = "assistant" if role == "assistant" else "user"
        blocks = _blocks(message)
        if not blocks:
            continue
        if turns and turns[-1]["role"] == wire_role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": wire_role, "content": blocks})
    if not turns or turns[0]["role"] != "user":  # the API wants a user turn first
        turns.insert(0, {"role": "user", "content": [{"type": "text", "text": "(start)"}]})
    return ("\n\n".join(system) or None), turns


def tools_of(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI-style tool schemas as Anthropic's tool definitions."""
    converted = []
    for tool in tools:
        function = tool.get("function", tool)
        schema = function.get("parameters") or {"type": "object", "properties": {}}
        entry = {"name": function["name"], "input_schema": schema}
        if function.get("description"):
            entry["description"] = function["description"]
        converted.append(entry)
    return converted


def usage_of(usage: Any) -> Usage:
    """Input tokens (cache writes and reads included: all were read) and output tokens."""
    if usage is None:
        return Usage()
    prompt = sum(int(getattr(usage, name, 0) or 0)
                 for name in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"))
    return Usage(prompt, int(getattr(usage, "output_tokens", 0) or 0))


def response_parts(content: list[Any]) -> tuple[str, list[ToolCall]]:
    """The text and the tool calls of a message's content blocks."""
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in content or []:
        kind = getattr(block, "type", None)
        if kind == "text":
            texts.append(str(block.text))
        elif kind == "tool_use":
            calls.append(ToolCall(id=str(block.id), name=str(block.name),
                                  arguments=json.dumps(block.input, ensure_ascii=False)))
    return "".join(texts), calls
