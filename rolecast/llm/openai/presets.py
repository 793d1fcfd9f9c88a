"""The OpenAI-compatible services MetaGPT names by ``api_type`` (deepseek, moonshot, openrouter,
mistral, yi, siliconflow, zhipuai, dashscope, fireworks, ark, qianfan, spark, bedrock, open_llm …):
the OpenAI provider with the service's default server (:data:`rolecast.core.providers.OPENAI_COMPATIBLE`);
``base_url`` in the configuration wins. The key comes from the configuration, else the
service's own variable (``DEEPSEEK_API_KEY`` …); a hosted service without one is a ConfigError.
"""

from __future__ import annotations

from typing import Any

from ...core.config import HostedConfig
from ...core.providers import OPENAI_COMPATIBLE, canonical_provider, gen_ai_system, key_variables
from ...errors import ConfigError
from ..hosted import proxied_http_client
from .provider import OpenAILLM

__all__ = ["from_config", "preset_url"]


def preset_url(cfg: HostedConfig) -> str:
    """Where a preset's calls go: the configuration's ``base_url``, else the service's default."""
    name = canonical_provider(cfg.provider)
    if cfg.base_url:
        return cfg.base_url
    default = OPENAI_COMPATIBLE[name].base_url
    if default is None:
        raise ConfigError(f"api_type {cfg.provider!r} is a self-hosted OpenAI-compatible server: "
                          "give its address as base_url (for example http://127.0.0.1:8000/v1)")
    if "{region}" in default:
        if not cfg.region_name:
            raise ConfigError(f"api_type {cfg.provider!r} needs region_name (the AWS region, e.g. us-east-1) "
                              "or a base_url")
        default = default.format(region=cfg.region_name)
    return default


def from_config(cfg: HostedConfig, **kwargs: Any) -> OpenAILLM:
    """An :class:`OpenAILLM` for one of the OpenAI-compatible ``api_type`` presets."""
    if not isinstance(cfg, HostedConfig) or canonical_provider(cfg.provider) not in OPENAI_COMPATIBLE:
        raise ConfigError(f"an OpenAI-compatible preset needs a HostedConfig naming one of "
                          f"{', '.join(OPENAI_COMPATIBLE)}, not {cfg!r:.80}")
    url = preset_url(cfg)
    key = cfg.api_key.get_secret_value() if cfg.api_key is not None else None
    if key is None and OPENAI_COMPATIBLE[canonical_provider(cfg.provider)].base_url is not None:
        variables = " or ".join(key_variables(cfg.provider)) or "llm.api_key"
        raise ConfigError(f"api_type {cfg.provider!r} needs an API key: set api_key in the configuration "
                          f"(or {variables})")
    if not cfg.model:
        raise ConfigError(f"api_type {cfg.provider!r} needs a model name (llm.model)")
    params: dict[str, Any] = {
        "model": cfg.model, "api_key": key, "base_url": url, "timeout": cfg.timeout,
        "max_retries": cfg.max_retries, "deadline": cfg.deadline, "structured_outputs": cfg.structured_outputs,
        "settings": cfg.settings, "grammars": False,
        "http_client": proxied_http_client(cfg.proxy, cfg.timeout) if cfg.proxy else None,
    }
    llm = OpenAILLM(**{**params, **kwargs})
    llm.gen_ai_system = gen_ai_system(cfg.provider)
    return llm
