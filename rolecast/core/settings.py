"""Execution settings of a model call, shared by the configuration and the LLM seam."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class LLMSettings(BaseModel):
    """Execution settings for one call (Semantic Kernel's *execution settings*).

    ``None`` means "the provider's default". ``extra`` is passed to the provider as is.
    """

    model_config = ConfigDict(extra="forbid", defer_build=True)

    temperature: float | None = None
    max_tokens: int | None = None
    top_p: float | None = None
    seed: int | None = None
    timeout: float | None = None
    extra: dict[str, Any] = Field(default_factory=dict)

    def merged(self, override: LLMSettings | dict[str, Any] | None) -> LLMSettings:
        """These settings with every non-None value of ``override`` applied on top."""
        if override is None:
            return self
        if isinstance(override, dict):
            override = LLMSettings(**override)
        # both sides are validated already: a copy with the updates needs no second validation
        updates: dict[str, Any] = {
            name: value for name in type(self).model_fields
            if name != "extra" and (value := getattr(override, name)) is not None
        }
        if override.extra:
            updates["extra"] = {**self.extra, **override.extra}
        return self.model_copy(update=updates) if updates else self


__all__ = ["LLMSettings"]
