"""Configuration: which model, where, with which key.

Read only when a model is first needed (never at import). Sources, later wins:

1. a YAML file: ``$ROLECAST_CONFIG``, else ``./rolecast.yaml``, else ``~/.rolecast/config.yaml``;
2. environment variables: ``OPENAI_API_KEY``, ``OPENAI_BASE_URL``, ``ROLECAST_MODEL``,
   ``ROLECAST_PROVIDER`` (``openai``, ``local`` or a plugin's name), ``ROLECAST_MODEL_PATH``
   (a GGUF file); ``ROLECAST_N_THREADS``, the embedded model's threads when ``n_threads`` is not
   set (read when the model loads: :func:`rolecast.llm.local.engine.threads`);
3. values passed in code (``Config(llm=LLMConfig(...))``).

A model's configuration is one member of a union discriminated by ``provider``, each
with only its own fields and its call settings in ``settings``
(:class:`~rolecast.llm.base.LLMSettings`): :class:`OpenAIConfig`, :class:`LocalConfig`,
:class:`HostedConfig` (every other ``api_type`` of MetaGPT's ``config2.yaml``: anthropic /
claude, gemini, azure, ollama and the OpenAI-compatible services, see
:mod:`rolecast.core.providers`), :class:`PluginConfig` (a provider a plugin registered), and
:class:`AutoConfig` (no provider named: the embedded model, when installed). MetaGPT's
``config2.yaml`` reads unchanged: ``api_type``, ``max_token``, named ``models`` (services here),
its global ``proxy``; its sections rolecast has no use for are accepted and ignored. :func:`LLMConfig` builds the right
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

import datetime
import difflib
import functools
import os
import uuid
from collections.abc import Mapping, Sequence
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
from .providers import HOSTED_PROVIDERS, key_variables
from .proxies import ProxyURL
from .redact import redact_urls
from .settings import LLMSettings

_SETTINGS_SHORTHAND = ("temperature", "max_tokens", "top_p", "seed")
BUILTIN_PROVIDERS = ("openai", "local")
#: MetaGPT's LLMConfig fields with nothing to do here (usage is always counted, system prompts
#: always sent, streaming chosen per call): accepted so that its config2.yaml reads unchanged
_METAGPT_NO_OPS = ("calc_usage", "stream", "pricing_plan", "use_system_prompt")


class LLMType(str, Enum):
    """The built-in providers by name (MetaGPT's ``LLMType``; ``config.llm.api_type`` is one).

    MetaGPT's hosted providers are here too (:mod:`rolecast.core.providers`); any other
    name is a plugin's provider.
    """

    OPENAI = "openai"
    LOCAL = "local"
    AUTO = "auto"
    # MetaGPT's hosted providers (native wires, then the OpenAI-compatible presets)
    ANTHROPIC = "anthropic"
    CLAUDE = "claude"
    GEMINI = "gemini"
    AZURE = "azure"
    OLLAMA = "ollama"
    DEEPSEEK = "deepseek"
    MOONSHOT = "moonshot"
    OPENROUTER = "openrouter"
    MISTRAL = "mistral"
    YI = "yi"
    SILICONFLOW = "siliconflow"
    ZHIPUAI = "zhipuai"
    DASHSCOPE = "dashscope"
    FIREWORKS = "fireworks"
    OPEN_LLM = "open_llm"
    QIANFAN = "qianfan"
    ARK = "ark"
    SPARK = "spark"
    BEDROCK = "bedrock"
    METAGPT = "metagpt"


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
        if isinstance(data, Mapping) and any(k in data for k in ("max_token", *_METAGPT_NO_OPS)):
            data = {k: v for k, v in data.items() if k not in _METAGPT_NO_OPS}
            if "max_token" in data:  # MetaGPT's spelling
                data["max_tokens"] = data.pop("max_token")
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
    proxy: ProxyURL = Field(default=None, description="an HTTP(S) proxy for the calls (MetaGPT's proxy)")
    api_version: str | None = Field(default=None, description="MetaGPT's field: only Azure takes one")
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


    @model_validator(mode="after")
    def _no_api_version(self) -> OpenAIConfig:
        if self.api_version:
            raise ValueError("api_version is Azure OpenAI's: configure it with api_type: azure")
        return self


class LocalConfig(_ProviderConfig):
    """A GGUF model run in-process by llama.cpp (by default the embedded SmolLM2-135M-Instruct)."""

    provider: Literal["local"] = "local"
    model_path: str | None = Field(default=None, description="GGUF file; default: the embedded model")
    n_ctx: int = 8192
    n_threads: int | None = Field(
        default=None, description="threads generating; default: ROLECAST_N_THREADS, else one per core free at load",
    )
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


class HostedConfig(_ProviderConfig):
    """A hosted model named by MetaGPT's ``api_type``: Anthropic (``claude``), Gemini, Azure OpenAI,
    Ollama, or an OpenAI-compatible service (``deepseek``, ``moonshot`` … see :mod:`rolecast.core.providers`)."""

    provider: str
    api_key: SecretStr | None = None
    base_url: str | None = Field(default=None, description="the server; default: the provider's own")
    api_version: str | None = Field(default=None, description="Azure's api-version; Gemini's API version")
    proxy: ProxyURL = Field(default=None, description="an HTTP(S) proxy for the calls")
    region_name: str | None = Field(default=None, description="Bedrock's AWS region")
    timeout: float = 60.0
    max_retries: int = 3
    deadline: float | None = Field(default=None, gt=0, description="seconds one call may take in all, retries "
                                   "included; None = timeout × (max_retries + 1)")
    structured_outputs: bool | None = Field(
        default=None, description="OpenAI-compatible services: whether to send response_format json_schema",
    )

    @model_validator(mode="after")
    def _known(self) -> HostedConfig:
        if self.provider not in HOSTED_PROVIDERS:
            raise ValueError(f"provider {self.provider!r} is not a hosted one ({', '.join(HOSTED_PROVIDERS)})")
        return self


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
        if self.provider in (*BUILTIN_PROVIDERS, *HOSTED_PROVIDERS, "auto"):
            raise ValueError(f"provider {self.provider!r} is built in")
        return self

    @property
    def options(self) -> dict[str, Any]:
        """The plugin's own options (the fields not every provider has)."""
        return dict(self.model_extra or {})


def infer_provider(data: Any) -> str:
    """Which member of the union a configuration means (the discriminator)."""
    if isinstance(data, BaseModel):
        if isinstance(data, (PluginConfig, HostedConfig)):
            return "plugin" if isinstance(data, PluginConfig) else "hosted"
        return str(getattr(data, "provider", "auto"))
    if not isinstance(data, Mapping):
        return "auto"
    provider = data.get("provider")
    if provider:
        if provider in HOSTED_PROVIDERS:
            return "hosted"
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
        Annotated[HostedConfig, Tag("hosted")],
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


def LLMConfig(**fields: Any) -> OpenAIConfig | LocalConfig | AutoConfig | HostedConfig | PluginConfig:
    """The configuration of one model, as the member of :data:`ProviderConfig` its fields mean."""
    try:
        config: OpenAIConfig | LocalConfig | AutoConfig | HostedConfig | PluginConfig = _adapter().validate_python(
            with_provider_names(fields))
    except ValidationError as exc:
        raise ConfigError(f"invalid model configuration: {_explain(exc)}") from None  # (no values: a key among them)
    return config


def project_root() -> Path:
    """The project root (MetaGPT's ``METAGPT_ROOT``, by its rule): ``$ROLECAST_PROJECT_ROOT`` when set,
    else the source checkout rolecast runs from (``pyproject.toml`` beside the package), else the
    current directory."""
    given = os.environ.get("ROLECAST_PROJECT_ROOT")
    if given:
        return Path(given).expanduser()
    source = Path(__file__).resolve().parents[2]
    if (source / "pyproject.toml").is_file() and (source / "rolecast").is_dir():
        return source
    return Path.cwd()


class WorkspaceConfig(BaseModel):
    """Where scripts write their work (MetaGPT's ``config.workspace``): ``path``, by default the
    project root's ``workspace`` folder."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    path: Path = Field(default_factory=lambda: project_root() / "workspace")
    #: MetaGPT's: with ``use_uid`` the work goes to ``path / uid`` (a fresh uid when none is given)
    use_uid: bool = False
    uid: str = ""

    def model_post_init(self, context: Any, /) -> None:
        if self.use_uid:
            if not self.uid:
                self.uid = f"{datetime.datetime.now():%Y%m%d%H%M%S}-{uuid.uuid4().hex[-8:]}"
            self.path = self.path / self.uid


class Config(BaseModel):
    """The default model plus optional named services (and the workspace folder)."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    llm: ProviderConfig = Field(default_factory=AutoConfig)
    services: dict[str, ProviderConfig] = Field(default_factory=dict)
    roles: dict[str, ProviderConfig] = Field(
        default_factory=dict,
        description="per-role models (MetaGPT's roles:): a role's class name, name or profile -> its model",
    )
    workspace: WorkspaceConfig = Field(default_factory=WorkspaceConfig)

    @model_validator(mode="before")
    @classmethod
    def _metagpt_provider_names(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            data = dict(data)
            if "llm" in data:
                data["llm"] = with_provider_names(data["llm"])
            if isinstance(data.get("models"), Mapping):  # MetaGPT's named models: services here
                data["services"] = {**data.pop("models"), **(data.get("services") or {})}
            if isinstance(data.get("services"), Mapping):
                data["services"] = {k: with_provider_names(v) for k, v in data["services"].items()}
            if "roles" in data:
                data["roles"] = _role_models(data["roles"])
            return _metagpt_sections(data)
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
        except ValidationError as exc:  # (each error's place and reason: never the values, a key among them)
            raise ConfigError(f"{source} is invalid:\n{explain(exc)}") from None

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
        llm = dict(with_provider_names(data.get("llm") or {}))
        overrides = _env_overrides(env)
        merged = {**llm, **overrides}
        if infer_provider(merged) in ("local", "auto", "hosted"):
            # OPENAI_* variables describe another provider: they do not apply to this one
            merged = {k: v for k, v in merged.items() if k not in ("api_key", "base_url") or k in llm}
        if infer_provider(merged) == "hosted" and merged.get("api_key") is None:
            merged.update(_hosted_key(str(merged["provider"]), env))
        return cls.from_data({**data, "llm": merged}, source=source)


#: the other sections of MetaGPT's config2.yaml: accepted so that its file reads unchanged, unused here
#: (``workspace`` is used: Config.workspace)
_METAGPT_SECTIONS = frozenset({
    "embedding", "omniparse", "search", "enable_search", "browser", "mermaid", "s3", "redis", "repair_llm_output",
    "prompt_schema", "enable_longterm_memory", "code_review_k_times", "code_validate_k_times",
    "exp_pool", "role_zero", "role_custom_configs", "metagpt_tti_url", "language", "redis_key",
    "iflytek_app_id", "iflytek_api_secret", "iflytek_api_key", "azure_tts_subscription_key", "azure_tts_region",
    "agentops_api_key", "mmdc", "puppeteer_config", "pyppeteer_executable_path", "mermaid_engine",
})


def _metagpt_sections(data: dict[str, Any]) -> dict[str, Any]:
    """MetaGPT's top-level sections rolecast has no use for dropped, and its global ``proxy`` given to
    each model that can use one and names none (as MetaGPT does)."""
    proxy = data.pop("proxy", None)
    data = {k: v for k, v in data.items() if k not in _METAGPT_SECTIONS}
    if not proxy:
        return data

    def proxied(model: Any) -> Any:
        takes_one = isinstance(model, Mapping) and infer_provider(model) in ("openai", "hosted")
        return {**model, "proxy": proxy} if takes_one and "proxy" not in model else model

    if "llm" in data:
        data["llm"] = proxied(data["llm"])
    for section in ("services", "roles"):
        if isinstance(data.get(section), Mapping):
            data[section] = {name: proxied(model) for name, model in data[section].items()}
    return data


def _role_models(value: Any) -> Any:
    """MetaGPT's ``roles:`` — a list of ``{role: <a role's class name or id>, llm: {...}}`` — as rolecast's
    mapping of a role (its class name, name or profile) to its model; rolecast's own mapping as it is."""
    if value is None:
        return {}
    if isinstance(value, Mapping):
        return {name: with_provider_names(model) for name, model in value.items()}
    if not isinstance(value, list):
        return value  # (pydantic's error: a mapping expected)
    models: dict[str, Any] = {}
    for i, entry in enumerate(value):
        role = entry.get("role") if isinstance(entry, Mapping) else None
        if not isinstance(role, str) or not role.strip() or "llm" not in entry or set(entry) - {"role", "llm"}:
            raise ValueError(f"roles[{i}] must be {{role: <a role's class name, name or profile>, llm: {{...}}}} "
                             "(MetaGPT's per-role model)")
        if role in models:
            raise ValueError(f"roles: the role {role!r} is given a model twice")
        models[role] = with_provider_names(entry["llm"])
    return models


_TAGGED: dict[str, type[BaseModel]] = {
    "openai": OpenAIConfig, "local": LocalConfig, "auto": AutoConfig, "hosted": HostedConfig, "plugin": PluginConfig,
}


#: words in a setting's name that mark it secret: its value is never shown in an error
_SECRET_WORDS = ("key", "secret", "token", "password", "passwd", "credential", "auth", "cookie")


def _may_show(loc: Sequence[str], value: Any) -> bool:
    """Whether an error may show the value it got: a short plain value of a setting whose name (or any
    name above it) is not secret-like — never a key, and never a mapping or list that could hold one."""
    names = [part.lower() for part in loc]
    secret = any(w in name and not name.endswith("tokens") for name in names for w in _SECRET_WORDS)
    return not secret and isinstance(value, (int, float, bool, str)) and len(repr(value)) <= 80


def explain(exc: ValidationError) -> str:
    """A configuration's validation errors, one line each, as the user wrote the keys: ``llm.n_thread``
    (not pydantic's ``llm.local.n_thread``, whose middle part is the provider it was read as), and
    for a key its section does not have, the closest one it does ("did you mean 'n_threads'?")."""
    lines = []
    for error in exc.errors():
        loc = [str(part) for part in error["loc"]]
        section: type[BaseModel] = Config
        tag_at = next((i for i in (1, 2) if len(loc) > i + 1 and loc[i] in _TAGGED
                       and loc[0] == ("llm" if i == 1 else "services")), None)
        if tag_at is not None:
            section = _TAGGED[loc[tag_at]]
            del loc[tag_at]
        where = ".".join(loc) or "(top level)"
        message = str(error["msg"])
        if error["type"] == "extra_forbidden" and (tag_at is not None or len(loc) == 1):
            known = [*section.model_fields, *(_SETTINGS_SHORTHAND if section is not Config else ())]
            close = difflib.get_close_matches(loc[-1], known, n=1, cutoff=0.6)
            message = f"unknown setting{f' (did you mean {close[0]!r}?)' if close else ''}; " \
                      f"{'this section takes' if section is not Config else 'the top level takes'} " \
                      f"{', '.join(sorted(known))}"
        elif "input" in error and error["type"] != "missing" and _may_show(loc, error["input"]):
            shown = redact_urls(error["input"]) if isinstance(error["input"], str) else error["input"]
            message += f" (got {shown!r})"
        lines.append(f"  {where}: {message}")
    return "\n".join(lines)


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


def _hosted_key(provider: str, env: Mapping[str, str]) -> dict[str, Any]:
    """``{"api_key": ...}`` from the provider's own variable (ANTHROPIC_API_KEY …), if one is set."""
    for variable in key_variables(provider):
        if env.get(variable):
            return {"api_key": env[variable]}
    return {}


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
    "HostedConfig",
    "LLMConfig",
    "LLMType",
    "LocalConfig",
    "OpenAIConfig",
    "PluginConfig",
    "ProviderConfig",
    "WorkspaceConfig",
    "infer_provider",
    "project_root",
]
