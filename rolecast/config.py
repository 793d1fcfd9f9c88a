"""Configuration: which model, where, with which key.

Read only when a model is first needed (never at import). Sources, later wins:

1. a YAML file: ``$ROLECAST_CONFIG``, else ``./rolecast.yaml``, else ``~/.rolecast/config.yaml``;
2. environment variables: ``OPENAI_API_KEY``, ``OPENAI_BASE_URL``, ``ROLECAST_MODEL``,
   ``ROLECAST_PROVIDER`` (``openai`` or ``local``), ``ROLECAST_MODEL_PATH`` (a GGUF file);
3. values passed in code (``Config(llm=LLMConfig(...))``).

YAML shape::

    llm:
      provider: openai          # or local; omitted = decide from what is configured
      model: gpt-4o-mini
      api_key: sk-...
      base_url: https://api.openai.com/v1
    services:                   # more named models, chosen by Action(service="fast")
      fast: {provider: local}
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError

from .errors import ConfigError


class LLMConfig(BaseModel):
    """How to reach one model."""

    model_config = ConfigDict(extra="forbid")

    provider: Literal["openai", "local"] | None = None
    model: str | None = None
    api_key: SecretStr | None = None
    base_url: str | None = None
    timeout: float = 60.0
    max_retries: int = 3
    temperature: float | None = None
    max_tokens: int | None = None
    seed: int | None = None
    model_path: str | None = Field(default=None, description="GGUF file for the local provider")
    n_ctx: int = 8192
    n_threads: int | None = None
    prefix_cache_mib: float = Field(
        default=256.0, ge=0,
        description="local provider: memory for the per-role saved prompt states (0 = re-read every prompt)",
    )
    structured_outputs: bool | None = Field(
        default=None,
        description="whether the OpenAI-compatible server accepts response_format json_schema; "
        "None = try it and fall back on an error",
    )


class Config(BaseModel):
    """The default model plus optional named services."""

    model_config = ConfigDict(extra="forbid")

    llm: LLMConfig = Field(default_factory=LLMConfig)
    services: dict[str, LLMConfig] = Field(default_factory=dict)

    @classmethod
    def from_yaml(cls, path: str | Path) -> Config:
        import yaml  # only when a file is actually read

        p = Path(path)
        if not p.is_file():
            raise ConfigError(f"config file {p} does not exist")
        try:
            data = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
            return cls.model_validate(data)
        except (yaml.YAMLError, ValidationError) as exc:
            raise ConfigError(f"config file {p} is invalid: {exc}") from exc

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, *, use_files: bool = True) -> Config:
        """The configuration from the YAML file (if any) with environment variables on top."""
        env = os.environ if environ is None else environ
        config = cls()
        if use_files:
            explicit = env.get("ROLECAST_CONFIG")
            if explicit:
                config = cls.from_yaml(explicit)
            else:
                for candidate in (Path("rolecast.yaml"), Path.home() / ".rolecast" / "config.yaml"):
                    if candidate.is_file():
                        config = cls.from_yaml(candidate)
                        break
        overrides: dict[str, Any] = {}
        if env.get("OPENAI_API_KEY"):
            overrides["api_key"] = SecretStr(env["OPENAI_API_KEY"])
        if env.get("OPENAI_BASE_URL"):
            overrides["base_url"] = env["OPENAI_BASE_URL"]
        if env.get("ROLECAST_MODEL"):
            overrides["model"] = env["ROLECAST_MODEL"]
        if env.get("ROLECAST_MODEL_PATH"):
            overrides["model_path"] = env["ROLECAST_MODEL_PATH"]
        if env.get("ROLECAST_PROVIDER"):
            provider = env["ROLECAST_PROVIDER"].strip().lower()
            if provider not in ("openai", "local"):
                raise ConfigError(f"ROLECAST_PROVIDER must be 'openai' or 'local', not {provider!r}")
            overrides["provider"] = provider
        if overrides:
            config = config.model_copy(update={"llm": config.llm.model_copy(update=overrides)})
        return config
