"""Azure OpenAI with the ``openai`` SDK's Azure client (``AsyncAzureOpenAI``).

MetaGPT's ``api_type: azure`` configuration: ``base_url`` is the resource's endpoint
(``https://NAME.openai.azure.com``), ``model`` the *deployment* name, ``api_version`` the
API version (required), ``api_key`` sent as the ``api-key`` header (else
``AZURE_OPENAI_API_KEY``). Requests go to ``/openai/deployments/{model}/chat/completions
?api-version=…``; everything else — retries, deadlines, structured outputs, tools, streams,
embeddings, typed errors — is the OpenAI provider's (:class:`~rolecast.llm.openai.OpenAILLM`).
"""

from __future__ import annotations

from typing import Any

from ...core.config import HostedConfig
from ...errors import ConfigError
from ..hosted import proxied_http_client
from ..openai.provider import OpenAILLM

__all__ = ["AzureOpenAILLM"]


class AzureOpenAILLM(OpenAILLM):
    """A deployment of Azure OpenAI (see the module)."""

    gen_ai_system = "az.ai.openai"

    def __init__(self, model: str, *, api_version: str | None = None, **kwargs: Any):
        if not kwargs.get("base_url"):
            raise ConfigError("the Azure provider needs the resource's endpoint as base_url "
                              "(https://NAME.openai.azure.com)")
        if not api_version:
            raise ConfigError("the Azure provider needs api_version (for example 2024-10-21)")
        if not kwargs.get("api_key"):
            raise ConfigError("the Azure provider needs an API key: set api_key (or AZURE_OPENAI_API_KEY)")
        kwargs.setdefault("grammars", False)
        super().__init__(model, **kwargs)
        self.api_version = api_version

    @property
    def server_url(self) -> str:
        return str(self.base_url)

    @classmethod
    def from_config(cls, cfg: Any, **kwargs: Any) -> AzureOpenAILLM:
        if not isinstance(cfg, HostedConfig):
            raise ConfigError(f"the azure provider needs a HostedConfig, not {type(cfg).__name__}")
        if not cfg.model:
            raise ConfigError("the Azure provider needs the deployment's name as model")
        params: dict[str, Any] = {
            "model": cfg.model, "api_version": cfg.api_version,
            "api_key": cfg.api_key.get_secret_value() if cfg.api_key is not None else None,
            "base_url": cfg.base_url, "timeout": cfg.timeout, "max_retries": cfg.max_retries,
            "deadline": cfg.deadline, "structured_outputs": cfg.structured_outputs, "settings": cfg.settings,
            "http_client": proxied_http_client(cfg.proxy, cfg.timeout) if cfg.proxy else None,
        }
        return cls(**{**params, **kwargs})

    def _new_client(self) -> Any:
        import openai

        return openai.AsyncAzureOpenAI(
            api_key=self.api_key, api_version=self.api_version, azure_endpoint=str(self.base_url),
            timeout=self.timeout, max_retries=0, http_client=self._http_client,
        )
