"""The LLM seam's data: messages, an answer (:class:`Completion`), usage, tool calls, embeddings,
and the small pure functions every provider shares (stop words, strict choice parsing).

Kept apart from :mod:`rolecast.llm.base` (the interface itself) so that both stay readable;
``rolecast.llm.base`` re-exports every name here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from pydantic import BaseModel

from ..errors import InvalidChoice, LLMAPIError

Messages = list[dict[str, Any]]
"""A conversation: OpenAI chat dictionaries (``{"role": "user", "content": "..."}``)."""
M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")

#: what a text is embedded for: models trained with two prompts (E5, nomic, Cohere, Voyage)
#: embed a search query differently from the documents it searches; others embed both alike
EmbedPurpose = Literal["document", "query"]

#: what :meth:`BaseLLM.ask_valid` says to the model after an unusable answer
DEFAULT_FIX = "That answer is invalid: {error}\nAnswer again with corrected JSON only."


@dataclass
class Usage:
    """The tokens one model call used (``estimated`` when the provider did not say and they were counted)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    estimated: bool = False

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass
class ToolCall:
    """A native (OpenAI-style) tool call; ``arguments`` is the model's JSON text."""

    id: str
    name: str
    arguments: str


@dataclass
class Completion:
    """One model answer: text, usage, and native tool calls if any were made."""

    text: str
    usage: Usage = field(default_factory=Usage)
    model: str = ""
    finish_reason: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """This answer as the run log keeps it."""
        return {
            "text": self.text,
            "model": self.model,
            "finish_reason": self.finish_reason,
            "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in self.tool_calls],
            "usage": {"prompt_tokens": self.usage.prompt_tokens, "completion_tokens": self.usage.completion_tokens,
                      "estimated": self.usage.estimated},
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Completion:
        """An answer read back from the run log."""
        usage = data.get("usage") or {}
        return cls(
            text=str(data.get("text") or ""),
            usage=Usage(int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0),
                        bool(usage.get("estimated"))),
            model=str(data.get("model") or ""),
            finish_reason=data.get("finish_reason"),
            tool_calls=[ToolCall(str(c["id"]), str(c["name"]), str(c["arguments"]))
                        for c in data.get("tool_calls") or []],
        )


@dataclass
class Embeddings:
    """The vectors of one :meth:`BaseLLM.embed` call, one per text, in order, and its usage."""

    vectors: list[list[float]]
    usage: Usage = field(default_factory=Usage)
    model: str = ""

    @property
    def text(self) -> str:
        """Embeddings generate no text (metering counts no output tokens)."""
        return ""

    def to_json(self) -> dict[str, Any]:
        """These vectors as the run log keeps them (a resumed run reads them back, unpaid)."""
        return {"vectors": self.vectors, "model": self.model,
                "usage": {"prompt_tokens": self.usage.prompt_tokens, "estimated": self.usage.estimated}}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Embeddings:
        """Vectors read back from the run log."""
        usage = data.get("usage") or {}
        return cls(
            vectors=[[float(x) for x in v] for v in data.get("vectors") or []],
            usage=Usage(int(usage.get("prompt_tokens") or 0), 0, bool(usage.get("estimated"))),
            model=str(data.get("model") or ""),
        )


@dataclass
class StructuredRequest:
    """What a provider needs to constrain output to JSON of a schema."""

    schema: dict[str, Any]
    name: str = "output"


def to_messages(prompt: str | Sequence[dict[str, Any]], system_msgs: Sequence[str] | None = None) -> Messages:
    """Turn a prompt (text or chat messages) plus optional system prompts into chat messages."""
    messages: Messages = []
    if system_msgs:
        for s in system_msgs:  # (a loop: no comprehension's frame for one or two system prompts)
            if s:
                messages.append({"role": "system", "content": s})
    if isinstance(prompt, str):
        messages.append({"role": "user", "content": prompt})
    else:
        messages.extend(dict(m) for m in prompt)
    return messages


def messages_text(messages: Messages) -> str:
    parts = []
    for m in messages:  # (a loop: no comprehension's frame; every metered call joins its messages)
        parts.append(str(m.get("content") or ""))
    return "\n".join(parts)


def truncate_at_stop(text: str, stop: Sequence[str] | None) -> str:
    """Cut ``text`` at the first stop sequence, as a server does."""
    if not stop:
        return text
    cut = min((i for i in (text.find(s) for s in stop if s) if i >= 0), default=-1)
    return text if cut < 0 else text[:cut]


def pooled_vector(embedding: Sequence[Any]) -> list[float]:
    """One unit vector from what an embedding endpoint returned: a pooled vector as is, or the mean
    of per-token vectors (llama.cpp answers so for a model without pooling, e.g. a chat model)."""
    values: list[float]
    if embedding and isinstance(embedding[0], (list, tuple)):
        width = len(embedding[0])
        sums = [0.0] * width
        for token in embedding:
            if len(token) != width:
                raise LLMAPIError("per-token embeddings of different widths")
            for i, x in enumerate(token):
                sums[i] += float(x)
        values = [x / len(embedding) for x in sums]
    else:
        values = [float(x) for x in embedding]
    norm = math.sqrt(sum(x * x for x in values))
    if not values or not math.isfinite(norm) or norm == 0.0:
        raise LLMAPIError("the model returned an empty, zero or non-finite embedding")
    return [x / norm for x in values]


#: a choice is at most this many digits: -1 … 999 999 options (and never Python's int-digit limit)
_CHOICE_DIGITS = 6
_QUOTES = "`'\""


def parse_choice(text: str, n_options: int) -> int:
    """Strictly parse a state-selection answer: one whole number in ``-1 … n_options-1``.

    "3", " 3.", "`10`" parse; "stage 1 or 2", "I choose 2" and "3.5" raise
    :class:`InvalidChoice`. Never "the first digit found" (MetaGPT's bug: "10" → 1).
    Linear in the answer's length, with no regular expression to backtrack.
    """
    body = text.strip()
    if body.endswith("."):
        body = body[:-1].rstrip()
    if body[:1] in _QUOTES:  # at most one quote (any kind) on each side
        body = body[1:].lstrip()
    if body[-1:] in _QUOTES:
        body = body[:-1].rstrip()
    digits = body[1:] if body.startswith("-") else body
    if not digits or len(digits) > _CHOICE_DIGITS or not (digits.isascii() and digits.isdigit()):
        raise InvalidChoice(text, n_options)
    value = int(body)
    if not -1 <= value < n_options:
        raise InvalidChoice(text, n_options)
    return value


def choice_schema(n_options: int) -> dict[str, Any]:
    """JSON schema admitting exactly the valid choices, for providers with structured output."""
    return {
        "type": "object",
        "properties": {"choice": {"type": "integer", "enum": list(range(-1, n_options))}},
        "required": ["choice"],
        "additionalProperties": False,
    }


__all__ = [
    "DEFAULT_FIX",
    "Completion",
    "EmbedPurpose",
    "Embeddings",
    "Messages",
    "StructuredRequest",
    "ToolCall",
    "Usage",
    "choice_schema",
    "messages_text",
    "parse_choice",
    "pooled_vector",
    "to_messages",
    "truncate_at_stop",
]
