"""Structured-output helpers shared by the actions that ask for JSON (plans, planners)."""

from __future__ import annotations

import copy
from typing import Any, ClassVar, TypeVar, cast

from pydantic import BaseModel, create_model

M = TypeVar("M", bound=BaseModel)


class _SchemaOverride(BaseModel):
    """A model that validates as declared but shows providers another JSON schema."""

    schema_override: ClassVar[dict[str, Any] | None] = None

    @classmethod
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
        if cls.schema_override is not None:
            return copy.deepcopy(cls.schema_override)
        return super().model_json_schema(*args, **kwargs)


def with_json_schema(model: type[M], schema: dict[str, Any]) -> type[M]:
    """A subclass of ``model`` that validates as ``model`` but shows providers ``schema``.

    For a grammar-constrained model a tighter schema than pydantic can express (bounded
    strings, one object shape per function, acyclic ids) keeps the answer valid and short.
    """
    sub = create_model(model.__name__, __base__=(model, _SchemaOverride))
    cast(Any, sub).schema_override = schema
    return cast("type[M]", sub)


__all__ = ["with_json_schema"]


def parse_code(text: str) -> str:
    """The code of a model's answer: the first fenced block (```python … ```), else the whole text.

    An opening fence the model never closed (it hit the token cap) still counts: the code
    runs to the end of the text, without the fence. Linear time (``str.find``, no backtracking).
    """
    start = text.find("```")
    if start < 0:
        return text.strip()
    line_end = text.find("\n", start + 3)
    tag = text[start + 3 : line_end if line_end >= 0 else len(text)].strip()
    if line_end >= 0 and (not tag or tag.replace("+", "").replace("-", "").isalnum()):
        body_start = line_end + 1  # ```python⏎ … : the code starts on the next line
    else:
        body_start = start + 3  # ```code``` on one line
    end = text.find("```", body_start)
    body = text[body_start : end if end >= 0 else len(text)].strip()
    if end < 0 and line_end < 0 and body.isalnum():
        return ""  # a lone "```python" cut off by the token cap: no code at all
    return body
