"""Providers by name: the built-in ones, the ones registered in code, and plugins' entry points.

A provider is a factory ``factory(config, **kwargs) -> BaseLLM`` taking its member of
:data:`rolecast.core.config.ProviderConfig`. ``openai`` and ``local`` are built in, and so
is every ``api_type`` of MetaGPT's ``config2.yaml`` (:mod:`rolecast.core.providers`). A
program adds one with :func:`register_provider`; a plugin package declares one as an
entry point in the group ``rolecast.providers`` whose name is the provider's and whose
object is the factory::

    [project.entry-points."rolecast.providers"]
    anthropic = "rolecast_anthropic:from_config"

Entry points are looked at only for a name that is neither built in nor registered, and
only installed packages can declare one: configuration names a provider, it never
names code to import.
"""

from __future__ import annotations

import difflib
import importlib
import threading
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any, cast

from loguru import logger

from ..core.providers import OPENAI_COMPATIBLE
from ..errors import ConfigError
from .base import BaseLLM

ProviderFactory = Callable[..., BaseLLM]
ENTRY_POINT_GROUP = "rolecast.providers"

_FACTORIES: dict[str, ProviderFactory] = {}
# the built-in providers, loaded when first asked for (the openai and llama.cpp glue is not light);
# a fixed table: configuration picks one of these names, it never names a module
_BUILT_IN = {
    "openai": ("rolecast.llm.openai.provider", "OpenAILLM"),
    "local": ("rolecast.llm.local.provider", "LocalLLM"),
    # MetaGPT's api_types (rolecast.core.providers): the native wires, then the OpenAI-compatible presets
    "anthropic": ("rolecast.llm.anthropic.provider", "AnthropicLLM"),
    "claude": ("rolecast.llm.anthropic.provider", "AnthropicLLM"),
    "gemini": ("rolecast.llm.gemini.provider", "GeminiLLM"),
    "azure": ("rolecast.llm.azure.provider", "AzureOpenAILLM"),
    "human": ("rolecast.llm.human", "from_config"),  # a person answers (MetaGPT's HumanProvider)
    **{name: ("rolecast.llm.ollama.provider", "OllamaLLM")
       for name in ("ollama", "ollama.generate", "ollama.embeddings", "ollama.embed")},
    **{name: ("rolecast.llm.openai.presets", "from_config")
       for name in (*OPENAI_COMPATIBLE, "open_router", "openrouter_reasoning")},
}
_LOCK = threading.Lock()


def register_provider(name: str, factory: ProviderFactory, *, replace: bool = False) -> None:
    """Make ``provider: name`` in a configuration build models with ``factory(config, **kwargs)``."""
    if not name or name == "auto":
        raise ConfigError(f"{name!r} cannot name a provider")
    with _LOCK:
        if (name in _FACTORIES or name in _BUILT_IN) and not replace and _FACTORIES.get(name) is not factory:
            raise ConfigError(f"a provider named {name!r} is already registered (pass replace=True to replace it)")
        _FACTORIES[name] = factory


def registered_providers() -> list[str]:
    """The names known now (built in and registered; plugins not loaded yet are not listed)."""
    return sorted({*_FACTORIES, *_BUILT_IN})


def _built_in(name: str) -> ProviderFactory | None:
    spec = _BUILT_IN.get(name)
    if spec is None:
        return None
    module, cls = spec
    made = getattr(importlib.import_module(module), cls)
    factory = cast(ProviderFactory, getattr(made, "from_config", made))  # a class's from_config, or a function
    with _LOCK:
        return _FACTORIES.setdefault(name, factory)


def provider_factory(name: str) -> ProviderFactory:
    """The factory of provider ``name``: registered, else a plugin's entry point, else :class:`ConfigError`."""
    with _LOCK:
        factory = _FACTORIES.get(name)
    if factory is None:
        factory = _built_in(name)
    if factory is not None:
        return factory
    for point in entry_points(group=ENTRY_POINT_GROUP):
        if point.name == name:
            try:
                loaded = point.load()
            except Exception as exc:  # a broken plugin must say which one
                raise ConfigError(f"the provider plugin {name!r} ({point.value}) failed to load: {exc}") from exc
            if not callable(loaded):
                raise ConfigError(f"the provider plugin {name!r} ({point.value}) is not a factory")
            logger.info("provider {!r} from the plugin {}", name, point.value)
            factory = cast(ProviderFactory, loaded)
            register_provider(name, factory)
            return factory
    names = sorted({*_FACTORIES, *_BUILT_IN, *(p.name for p in entry_points(group=ENTRY_POINT_GROUP))})
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.75)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise ConfigError(f"no model provider named {name!r}{hint}; known: {', '.join(names)}")


def create_provider(name: str, config: Any, **kwargs: Any) -> BaseLLM:
    """Build a model of provider ``name`` from its configuration."""
    llm = provider_factory(name)(config, **kwargs)
    window = getattr(config, "context_window", None)
    if window:  # the configuration's window is over whatever the provider knows
        llm.context_window = window
    return llm


__all__ = ["ENTRY_POINT_GROUP", "ProviderFactory", "create_provider", "provider_factory", "register_provider",
           "registered_providers"]
