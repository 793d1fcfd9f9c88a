"""Configuration: which model, where, with which key.

Read only when a model is first needed (never at import). Sources, later wins:

1. a YAML file: ``$ROLECAST_CONFIG``, else ``./rolecast.yaml``, else ``~/.rolecast/config.yaml``;
2. environment variables: ``OPENAI_API_KEY``, ``OPENAI_BASE_URL``, ``ROLECAST_MODEL``,
   ``ROLECAST_PROVIDER`` (``openai``, ``local`` or a plugin's name), ``ROLECAST_MODEL_PATH``
   (a GGUF file);
3. values passed in code (``Config(llm=LLMConfig(...))``).

A model's configuration is one member of a union discriminated by ``provider``, each
with only its own fields and its call settings in ``settings``
(:class:`~rolecast.llm.base.LLMSettings`): :class:`OpenAIConfig`, :class:`LocalConfig`,
:class:`PluginConfig` (a provider a plugin registered), and :class:`AutoConfig` (no
provider named: the embedded model, when installed). :func:`LLMConfig` builds the right
one: an explicit ``provider`` wins, a ``.gguf`` model or ``model_path`` means local, a
key, base URL or model name means OpenAI-compatible. ``temperature``, ``max_tokens``,
``top_p`` and ``seed`` may be given beside the other fields; they go into ``settings``.
A key no provider has, or one of another provider, is a :class:`ConfigError`.

YAML shape::

    llm:
      provider: openai          # or local; omitted = decide from what is configured
      model: gpt-4o-mini
      api_key: sk-...
      base_url: https://api.openai.com/v1
      temperature: 0.2
    services:                   # more named models, chosen by Action(service="fast")
      fast: {provider: local}
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Literal, Union

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    SecretStr,
    Tag,
    TypeAdapter,
    ValidationError,
    model_validator,
)

from ..errors import ConfigError
from .settings import LLMSettings

_SETTINGS_SHORTHAND = ("temperature", "max_tokens", "top_p", "seed")
BUILTIN_PROVIDERS = ("openai", "local")


class LLMType(str, Enum):
    """The built-in providers by name (MetaGPT's ``LLMType``; ``config.llm.api_type`` is one).

    MetaGPT's other provider names (``azure``, ``ollama``, ``zhipu`` …) name plugin
    providers here; an OpenAI-compatible server is ``OPENAI`` with its ``base_url``.
    """

    OPENAI = "openai"
    LOCAL = "local"
    AUTO = "auto"


#: MetaGPT's names for the provider field (``api_type: openai`` in its config2.yaml)
PROVIDER_ALIASES = ("api_type", "llm_type")


def with_provider_names(data: Any) -> Any:
    """A model configuration with MetaGPT's ``api_type`` (or ``llm_type``) read as ``provider``."""
    if not isinstance(data, Mapping) or not any(k in data for k in PROVIDER_ALIASES):
        return data
    data = dict(data)
    names = {str(getattr(data[k], "value", data[k])) for k in PROVIDER_ALIASES if k in data}
    if "provider" in data:
        names.add(str(data["provider"]))
    if len(names) > 1:
        raise ConfigError(f"the model configuration names several providers: {sorted(names)}")
    for key in PROVIDER_ALIASES:
        data.pop(key, None)
    data["provider"] = names.pop()
    return data


class _ProviderConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    @property
    def api_type(self) -> LLMType | str:
        """The provider, as MetaGPT's ``api_type``: an :class:`LLMType` for a built-in one, else its name."""
        provider = str(getattr(self, "provider", "auto"))
        return LLMType(provider) if provider in LLMType._value2member_map_ else provider

    model: str | None = None
    settings: LLMSettings = Field(default_factory=LLMSettings)
    context_window: int | None = Field(
        default=None, gt=0,
        description="tokens one call may take (prompt + answer); default: what the provider knows of the model",
    )

    @model_validator(mode="before")
    @classmethod
    def _settings_shorthand(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and any(k in data for k in _SETTINGS_SHORTHAND):
            data = dict(data)
            settings = dict(data.get("settings") or {})
            for key in _SETTINGS_SHORTHAND:
                if key in data:
                    settings[key] = data.pop(key)
            data["settings"] = settings
        return data


class OpenAIConfig(_ProviderConfig):
    """A model behind an OpenAI-compatible API (OpenAI, Azure, vLLM, Ollama, llama.cpp server …)."""

    provider: Literal["openai"] = "openai"
    api_key: SecretStr | None = None
    base_url: str | None = None
    timeout: float = 60.0
    max_retries: int = 3
    deadline: float | None = Field(
        default=None, gt=0,
        description="seconds one call may take in all, its retries and Retry-After waits included; "
        "None = timeout × (max_retries + 1)",
    )
    structured_outputs: bool | None = Field(
        default=None,
        description="whether the server accepts response_format json_schema; None = try it and fall back on an error",
    )
    grammars: bool | None = Field(
        default=None,
        description="whether the server takes a GBNF grammar (llama.cpp's grammar, vLLM's guided_grammar); "
        "None = send one and stop on a rejection",
    )


class LocalConfig(_ProviderConfig):
    """A GGUF model run in-process by llama.cpp (by default the embedded SmolLM2-135M-Instruct)."""

    provider: Literal["local"] = "local"
    model_path: str | None = Field(default=None, description="GGUF file; default: the embedded model")
    n_ctx: int = 8192
    n_threads: int | None = Field(default=None, description="threads generating; default: half the cores")
    n_threads_batch: int | None = Field(
        default=None, description="threads evaluating prompts; default: as many as n_threads",
    )
    n_parallel: int = Field(
        default=4, ge=1, description="slots decoded together: concurrent calls share one batch",
    )
    prefix_cache_mib: float = Field(
        default=256.0, ge=0,
        description="RAM for the prompt states of idle slots (0 = evaluate every prompt from scratch)",
    )


class AutoConfig(_ProviderConfig):
    """No provider named and nothing that implies one: the embedded model, when it is installed."""

    provider: Literal["auto"] = "auto"


class PluginConfig(_ProviderConfig):
    """A provider registered by a plugin (:func:`rolecast.llm.register_provider`); its own
    options are kept as extra fields and handed to its factory."""

    model_config = ConfigDict(extra="allow", defer_build=True)

    provider: str

    @model_validator(mode="after")
    def _not_builtin(self) -> PluginConfig:
        if self.provider in (*BUILTIN_PROVIDERS, "auto"):
            raise ValueError(f"provider {self.provider!r} is built in")
        return self

    @property
    def options(self) -> dict[str, Any]:
        """The plugin's own options (the fields not every provider has)."""
        return dict(self.model_extra or {})


def infer_provider(data: Any) -> str:
    """Which member of the union a configuration means (the discriminator)."""
    if isinstance(data, BaseModel):
        return str(getattr(data, "provider", "auto")) if not isinstance(data, PluginConfig) else "plugin"
    if not isinstance(data, Mapping):
        return "auto"
    provider = data.get("provider")
    if provider:
        return provider if provider in (*BUILTIN_PROVIDERS, "auto") else "plugin"
    model = data.get("model") or ""
    local_keys = ("n_ctx", "n_threads", "n_threads_batch", "n_parallel", "prefix_cache_mib")
    if data.get("model_path") or str(model).endswith(".gguf") or any(k in data for k in local_keys):
        return "local"
    if data.get("api_key") is not None or data.get("base_url") or model:
        return "openai"
    return "auto"


ProviderConfig = Annotated[
    Union[
        Annotated[OpenAIConfig, Tag("openai")],
        Annotated[LocalConfig, Tag("local")],
        Annotated[AutoConfig, Tag("auto")],
        Annotated[PluginConfig, Tag("plugin")],
    ],
    Discriminator(infer_provider),
]


@functools.cache
def _adapter() -> TypeAdapter[Any]:
    """The validator of :data:`ProviderConfig`, built on first use (building it is a third of import time)."""
    return TypeAdapter(ProviderConfig)


def _explain(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(str(x) for x in e['loc'][1:]) or 'llm'}: {e['msg']}" for e in exc.errors())


def LLMConfig(**fields: Any) -> OpenAIConfig | LocalConfig | AutoConfig | PluginConfig:
    """The configuration of one model, as the member of :data:`ProviderConfig` its fields mean."""
    try:
        config: OpenAIConfig | LocalConfig | AutoConfig | PluginConfig = _adapter().validate_python(
            with_provider_names(fields))
    except ValidationError as exc:
        raise ConfigError(f"invalid model configuration: {_explain(exc)}") from exc
    return config


class Config(BaseModel):
    """The default model plus optional named services."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    llm: ProviderConfig = Field(default_factory=AutoConfig)
    services: dict[str, ProviderConfig] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _metagpt_provider_names(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            data = dict(data)
            if "llm" in data:
                data["llm"] = with_provider_names(data["llm"])
            if isinstance(data.get("services"), Mapping):
                data["services"] = {k: with_provider_names(v) for k, v in data["services"].items()}
        return data

    def get_openai_llm(self) -> OpenAIConfig | None:
        """The configuration of an OpenAI-compatible model: the default one if it is, else the first
        such service, else None (MetaGPT's ``Config.get_openai_llm``)."""
        for candidate in (self.llm, *self.services.values()):
            if isinstance(candidate, OpenAIConfig):
                return candidate
        return None

    @classmethod
    def from_yaml(cls, path: str | Path) -> Config:
        return cls.from_data(_read_yaml(Path(path)), source=str(path))

    @classmethod
    def default(cls) -> Config:
        """The configuration a run uses when none is given (MetaGPT's ``Config.default()``): files, then environment."""
        return cls.from_env()

    @classmethod
    def from_home(cls, path: str | Path) -> Config | None:
        """``~/.rolecast/<path>`` as a configuration, or None when there is no such file (MetaGPT's ``from_home``)."""
        home_file = CONFIG_HOME / path
        return cls.from_yaml(home_file) if home_file.is_file() else None

    @staticmethod
    def read_yaml(path: str | Path) -> dict[str, Any]:
        """A YAML file's mapping (``Config(**Config.read_yaml(path))``, as MetaGPT scripts write it)."""
        return _read_yaml(Path(path))

    @classmethod
    def from_data(cls, data: Mapping[str, Any], *, source: str = "configuration") -> Config:
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise ConfigError(f"{source} is invalid: {exc}") from exc

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, *, use_files: bool = True) -> Config:
        """The configuration from the YAML file (if any) with environment variables on top."""
        env = os.environ if environ is None else environ
        data: dict[str, Any] = {}
        source = "configuration"
        if use_files:
            found = _config_file(env)
            if found is not None:
                data, source = _read_yaml(found), str(found)
        llm = dict(data.get("llm") or {})
        overrides = _env_overrides(env)
        merged = {**llm, **overrides}
        if infer_provider(merged) in ("local", "auto"):
            # OPENAI_* variables describe another provider: they do not apply to this one
            merged = {k: v for k, v in merged.items() if k not in ("api_key", "base_url") or k in llm}
        return cls.from_data({**data, "llm": merged}, source=source)


#: where per-user configuration files live
CONFIG_HOME = Path.home() / ".rolecast"


def _config_file(env: Mapping[str, str]) -> Path | None:
    explicit = env.get("ROLECAST_CONFIG")
    if explicit:
        return Path(explicit)
    for candidate in (Path("rolecast.yaml"), CONFIG_HOME / "config.yaml"):
        if candidate.is_file():
            return candidate
    return None


def _read_yaml(path: Path) -> dict[str, Any]:
    import yaml  # only when a file is actually read

    if not path.is_file():
        raise ConfigError(f"config file {path} does not exist")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {path} is invalid: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must hold a mapping, not {type(data).__name__}")
    return data


def _env_overrides(env: Mapping[str, str]) -> dict[str, Any]:
    overrides: dict[str, Any] = {}
    for variable, key in (("OPENAI_API_KEY", "api_key"), ("OPENAI_BASE_URL", "base_url"),
                          ("ROLECAST_MODEL", "model"), ("ROLECAST_MODEL_PATH", "model_path")):
        if env.get(variable):
            overrides[key] = env[variable]
    if env.get("ROLECAST_PROVIDER"):
        provider = env["ROLECAST_PROVIDER"].strip().lower()
        if not provider.replace("_", "").replace("-", "").isalnum():
            raise ConfigError(f"ROLECAST_PROVIDER must name a provider such as 'openai' or 'local', not {provider!r}")
        overrides["provider"] = provider
    return overrides


__all__ = [
    "AutoConfig",
    "Config",
    "LLMConfig",
    "LLMType",
    "LocalConfig",
    "OpenAIConfig",
    "PluginConfig",
    "ProviderConfig",
    "infer_provider",
]
