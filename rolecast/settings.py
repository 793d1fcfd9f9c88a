"""Execution settings of a model call, shared by the configuration and the LLM seam."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


class LLMSettings(BaseModel):
    """Execution settings for one call (Semantic Kernel's *execution settings*).

    ``None`` means "the provider's default". ``extra`` is passed to the provider as is.
    """

    model_config = ConfigDict(extra="forbid")

    temperature: float | None = None
    max_tokens: int | None = None
    top_p: float | None = None
    seed: int | None = None
    timeout: float | None = None
    extra: dict[str, Any] = {}

    def merged(self, override: LLMSettings | dict[str, Any] | None) -> LLMSettings:
        """These settings with every non-None value of ``override`` applied on top."""
        if override is None:
            return self
        if isinstance(override, dict):
            override = LLMSettings(**override)
        data = self.model_dump()
        for key, value in override.model_dump(exclude_none=True).items():
            if key == "extra":
                data["extra"] = {**data["extra"], **value}
            else:
                data[key] = value
        return LLMSettings(**data)


__all__ = ["LLMSettings"]
