"""Every ``api_type`` MetaGPT's ``config2.yaml`` accepts, and what rolecast makes of it.

Four wires differ from OpenAI's and have native providers (``anthropic`` and its alias
``claude``, ``gemini``, ``azure``, ``ollama``); the rest speak OpenAI's chat completions
and are presets over the OpenAI provider: :data:`OPENAI_COMPATIBLE` gives each one's
default server (``base_url`` in the configuration wins) and the environment variable its
key is read from when the configuration has none.

A plain table, imported by :mod:`rolecast.core.config`: no provider code is loaded here.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

from ..errors import ConfigError

__all__ = [
    "HOSTED_PROVIDERS", "NATIVE_PROVIDERS", "OPENAI_COMPATIBLE", "Preset", "canonical_provider",
    "gen_ai_system", "key_variables", "require_sdk",
]


@dataclass(frozen=True)
class Preset:
    """An OpenAI-compatible service: its default server, its key's variable, its OTel ``gen_ai.system``."""

    base_url: str | None
    key_env: str | None = None
    system: str | None = None


#: api_type -> preset. base_url None: the configuration must give one (a self-hosted server)
OPENAI_COMPATIBLE: dict[str, Preset] = {
    "deepseek": Preset("https://api.deepseek.com/v1", "DEEPSEEK_API_KEY", "deepseek"),
    "moonshot": Preset("https://api.moonshot.cn/v1", "MOONSHOT_API_KEY"),
    "openrouter": Preset("https://openrouter.ai/api/v1", "OPENROUTER_API_KEY"),
    "mistral": Preset("https://api.mistral.ai/v1", "MISTRAL_API_KEY", "mistral_ai"),
    "yi": Preset("https://api.lingyiwanwu.com/v1", "YI_API_KEY"),
    "siliconflow": Preset("https://api.siliconflow.cn/v1", "SILICONFLOW_API_KEY"),
    "zhipuai": Preset("https://open.bigmodel.cn/api/paas/v4", "ZHIPUAI_API_KEY"),
    "dashscope": Preset("https://dashscope.aliyuncs.com/compatible-mode/v1", "DASHSCOPE_API_KEY"),
    "fireworks": Preset("https://api.fireworks.ai/inference/v1", "FIREWORKS_API_KEY"),
    # Volcengine Ark, Baidu Qianfan (v2, a bearer API key), iFlytek Spark (the APIPassword as key)
    "ark": Preset("https://ark.cn-beijing.volces.com/api/v3", "ARK_API_KEY"),
    "qianfan": Preset("https://qianfan.baidubce.com/v2", "QIANFAN_API_KEY"),
    "spark": Preset("https://spark-api-open.xf-yun.com/v1", "SPARK_API_KEY"),
    # Bedrock's OpenAI-compatible endpoint with a Bedrock API key; the region comes from region_name
    "bedrock": Preset("https://bedrock-runtime.{region}.amazonaws.com/openai/v1", "AWS_BEARER_TOKEN_BEDROCK",
                      "aws.bedrock"),
    "llama_api": Preset("https://api.llama.com/compat/v1", "LLAMA_API_KEY"),
    # self-hosted OpenAI-compatible servers: base_url required
    "open_llm": Preset(None),
    "metagpt": Preset(None),
}

#: MetaGPT's other spellings of the same providers
_ALIASES = {
    "claude": "anthropic",
    "open_router": "openrouter",
    "openrouter_reasoning": "openrouter",
    "ollama.generate": "ollama",
    "ollama.embeddings": "ollama",
    "ollama.embed": "ollama",
}

#: the providers with their own wire (each a package under rolecast/llm/)
NATIVE_PROVIDERS = ("anthropic", "gemini", "azure", "ollama")

#: every hosted api_type (native, OpenAI-compatible, aliases): configured by HostedConfig
HOSTED_PROVIDERS: tuple[str, ...] = (*NATIVE_PROVIDERS, *OPENAI_COMPATIBLE, *_ALIASES)

_KEY_ENV = {
    "anthropic": ("ANTHROPIC_API_KEY",),
    "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
    "azure": ("AZURE_OPENAI_API_KEY",),
    "ollama": (),
}

_SYSTEMS = {"anthropic": "anthropic", "gemini": "gcp.gemini", "azure": "az.ai.openai", "ollama": "ollama"}


def canonical_provider(name: str) -> str:
    """``claude`` -> ``anthropic``, ``open_router`` -> ``openrouter`` …; other names as they are."""
    return _ALIASES.get(name, name)


def key_variables(name: str) -> tuple[str, ...]:
    """The environment variables a hosted provider's key is read from when its configuration has none."""
    name = canonical_provider(name)
    preset = OPENAI_COMPATIBLE.get(name)
    if preset is not None:
        return (preset.key_env,) if preset.key_env else ()
    return _KEY_ENV.get(name, ())


def gen_ai_system(name: str) -> str:
    """The OpenTelemetry ``gen_ai.system`` of a provider (the semantic conventions' name where there is one)."""
    name = canonical_provider(name)
    preset = OPENAI_COMPATIBLE.get(name)
    if preset is not None:
        return preset.system or name
    return _SYSTEMS.get(name, name)


#: the SDK each native provider sends through (a module to find) and the extra that installs it
_SDKS = {"anthropic": ("anthropic", "anthropic"), "gemini": ("google.genai", "gemini")}


def require_sdk(name: str) -> None:
    """A :class:`~rolecast.errors.ConfigError` naming the extra to install when provider ``name``'s SDK is
    not installed (``rolecast info`` and the model's construction both ask; nothing is imported)."""
    sdk = _SDKS.get(canonical_provider(name))
    if sdk is None:
        return
    module, extra = sdk
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # (google installed without genai: its parent package is found, not it)
        found = False
    if not found:
        raise ConfigError(f"the {canonical_provider(name)} provider needs the {module} SDK, which is not installed: "
                          f'pip install -e ".[{extra}]" in a checkout of rolecast (or pip install "rolecast[{extra}]")')
