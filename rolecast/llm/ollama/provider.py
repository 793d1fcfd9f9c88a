"""Ollama, through its OpenAI-compatible API (``/v1``).

MetaGPT configures Ollama with ``base_url: http://127.0.0.1:11434/api`` (its native API);
rolecast sends to the same server's ``/v1`` instead — ``/api`` is replaced by ``/v1`` — because
Ollama's OpenAI-compatible endpoints carry everything the seam uses in one tested client:
``/v1/chat/completions`` with tools, ``response_format`` JSON schemas (Ollama's structured
outputs, so ``choose`` is an enum), server-sent-event streams with usage, and
``/v1/embeddings``. No key is needed (none is sent but a placeholder); calls are free.
"""

from __future__ import annotations

from typing import Any

from ...core.config import HostedConfig
from ...errors import ConfigError
from ..hosted import proxied_http_client
from ..openai.provider import OpenAILLM

__all__ = ["DEFAULT_URL", "OllamaLLM", "openai_url"]

DEFAULT_URL = "http://127.0.0.1:11434/v1"


def openai_url(base_url: str | None) -> str:
    """Ollama's OpenAI-compatible address for a configured one: ``…/api`` -> ``…/v1``, a bare host + ``/v1``."""
    if not base_url:
        return DEFAULT_URL
    url = base_url.rstrip("/")
    if url.endswith("/v1"):
        return url
    if url.endswith("/api"):
        url = url[: -len("/api")]
    return f"{url}/v1"


class OllamaLLM(OpenAILLM):
    """A model served by Ollama (see the module)."""

    free = True
    gen_ai_system = "ollama"

    @classmethod
    def from_config(cls, cfg: Any, **kwargs: Any) -> OllamaLLM:
        if not isinstance(cfg, HostedConfig):
            raise ConfigError(f"the ollama provider needs a HostedConfig, not {type(cfg).__name__}")
        if not cfg.model:
            raise ConfigError("the Ollama provider needs a model name (llm.model, e.g. llama3.2)")
        params: dict[str, Any] = {
            "model": cfg.model, "base_url": openai_url(cfg.base_url),
            "api_key": cfg.api_key.get_secret_value() if cfg.api_key is not None else None,
            "timeout": cfg.timeout, "max_retries": cfg.max_retries, "deadline": cfg.deadline,
            "structured_outputs": cfg.structured_outputs, "settings": cfg.settings, "grammars": False,
            "http_client": proxied_http_client(cfg.proxy, cfg.timeout) if cfg.proxy else None,
        }
        return cls(**{**params, **kwargs})
