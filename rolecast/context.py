"""What one run shares: configuration, models by name, cost accounting and hooks.

A :class:`Context` belongs to a team (or to the process, by default). While a role
acts, :meth:`Context.scope` marks the running task with the context and the role's
name, so that every LLM call made inside — however deep — is charged to the right
budget and role. Tasks started by ``asyncio.gather`` inherit the scope.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loguru import logger

from .accounting.cost import CostManager
from .accounting.metering import default_cost_manager, metered
from .control.hooks import Hooks
from .core.config import AutoConfig, Config, LocalConfig, OpenAIConfig, PluginConfig, ProviderConfig
from .errors import UsageError
from .llm import as_llm, create_llm
from .llm.base import BaseLLM
from .runs.log import RunLog


class AttrDict:
    """A dict read and written as attributes; a missing one reads as ``None`` (MetaGPT's ``AttrDict``)."""

    def __init__(self, **kwargs: Any):
        self.__dict__.update(kwargs)

    @classmethod
    def model_validate(cls, data: dict[str, Any]) -> AttrDict:
        return cls(**data)

    def __getattr__(self, key: str) -> Any:  # only called for attributes that are not set
        if key.startswith("__"):
            raise AttributeError(key)
        return None

    def __delattr__(self, key: str) -> None:
        if key not in self.__dict__:
            raise AttributeError(f"No such attribute: {key}")
        del self.__dict__[key]

    def set(self, key: str, value: Any) -> None:
        """``ad.set("a", 1)`` is ``ad.a = 1`` (MetaGPT's ``AttrDict.set``)."""
        setattr(self, key, value)

    def get(self, key: str, default: Any = None) -> Any:
        return self.__dict__.get(key, default)

    def remove(self, key: str) -> None:
        """Delete ``key`` if it is there."""
        self.__dict__.pop(key, None)

    def model_dump(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def __repr__(self) -> str:
        return f"AttrDict({self.__dict__!r})"


def _no_model(name: str) -> BaseLLM:
    raise UsageError(f"the named model {name!r} is None: give a model or a model name")


@dataclass(frozen=True)
class ProjectRepo:
    """The folder a project's files live in (MetaGPT's ``Context.repo``, without its git layer)."""

    workdir: Path


class Context:
    """Configuration, the default model, named services, costs and hooks of one run.

    ``kwargs`` is a free :class:`AttrDict` for what a script wants its roles to share
    (MetaGPT's ``Context.kwargs``). ``project_path`` names the folder a project works in
    (``context.repo.workdir``); ``git_repo`` and ``src_workspace`` are MetaGPT's slots for a
    script's own repository object and source folder — rolecast keeps them and uses neither.
    """

    def __init__(
        self,
        *,
        config: Config | None = None,
        llm: BaseLLM | None = None,
        llms: dict[str, BaseLLM] | None = None,
        cost_manager: CostManager | None = None,
        hooks: Hooks | None = None,
    ):
        self._config = config
        self._default = as_llm(llm, "Context(llm=...)")
        self._given_llm = llm is not None  # a model given to the context: per-role models of roles: do not apply
        self._role_llms: dict[str, BaseLLM] = {}
        if llms is not None and not isinstance(llms, dict):
            raise UsageError(f"llms= takes a dict of named models, not {type(llms).__name__}")
        self._services: dict[str, BaseLLM] = {
            name: as_llm(model, f"llms[{name!r}]") or _no_model(name) for name, model in (llms or {}).items()
        }
        self.cost_manager = cost_manager or CostManager()
        self.hooks = hooks or Hooks()
        self.kwargs = AttrDict()
        self._lock = threading.Lock()
        self._warned_missing: set[str] = set()
        #: the write-ahead log of the team run this context belongs to (set by the team)
        self.run_log: RunLog | None = None
        #: the folder the project works in (MetaGPT's ``config.project_path``), if any
        self.project_path: str | None = None
        #: MetaGPT's slots for a script's git repository object and source folder (rolecast sets neither)
        self.git_repo: Any = None
        self.src_workspace: Any = None

    @property
    def repo(self) -> ProjectRepo | None:
        """The project's folder (``repo.workdir``), when ``project_path`` is set; else None."""
        return ProjectRepo(Path(self.project_path)) if self.project_path else None

    def llm_with_cost_manager_from_llm_config(self, llm_config: ProviderConfig) -> BaseLLM:
        """A model made from ``llm_config`` (MetaGPT's name). Its calls are charged to this context's
        costs when made in :meth:`scope`, as every call of a team's roles is."""
        return create_llm(llm_config)

    @property
    def config(self) -> Config:
        """The configuration, read from files and the environment on first use."""
        if self._config is None:
            self._config = Config.from_env()
        return self._config

    def set_llm(self, llm: BaseLLM) -> None:
        self._default = as_llm(llm, "the default model (llm=...)")
        self._given_llm = self._default is not None

    @property
    def given_llm(self) -> BaseLLM | None:
        """The default model as given (None when it is to be made from the configuration)."""
        return self._default

    @property
    def given_config(self) -> Config | None:
        """The configuration as given (None when it is to be read from files and the environment)."""
        return self._config

    def add_service(self, name: str, llm: BaseLLM) -> None:
        """Register a named model (Semantic Kernel's ``add_service`` with a service id)."""
        self._services[name] = as_llm(llm, f"add_service({name!r}, ...)") or _no_model(name)

    @property
    def services(self) -> dict[str, BaseLLM]:
        return dict(self._services)

    def role_llm(self, role: Any) -> BaseLLM | None:
        """The model the configuration's ``roles:`` gives ``role`` (MetaGPT's per-role ``llm``), found by the
        role's class name, then its name, then its profile; None when it names none — or when this context
        was given a model (``Context(llm=...)``, ``Team(llm=...)``): that one is every role's."""
        if self._given_llm:
            return None
        models = self.config.roles
        if not models:
            return None
        for key in (type(role).__name__, getattr(role, "name", None), getattr(role, "profile", None)):
            if key and key in models:
                with self._lock:
                    if key not in self._role_llms:
                        self._role_llms[key] = create_llm(models[key])
                return self._role_llms[key]
        return None

    def llm(self, name: str | None = None) -> BaseLLM:
        """The model called ``name``, else the default (with a warning for a missing name)."""
        if name:
            if name in self._services:
                return self._services[name]
            if name in self.config.services:
                with self._lock:
                    if name not in self._services:
                        self._services[name] = create_llm(self.config.services[name])
                return self._services[name]
            if name not in self._warned_missing:
                self._warned_missing.add(name)
                logger.warning("no LLM service named {!r}; using the default model", name)
        if self._default is None:
            with self._lock:
                if self._default is None:
                    self._default = create_llm(self.config.llm)
        return self._default

    @contextmanager
    def scope(self, role: str | None = None) -> Iterator[Scope]:
        """Charge every LLM call made inside to this context (and ``role``)."""
        scope = Scope(self, role)
        token = _SCOPE.set(scope)
        try:
            with metered(self.cost_manager, role, self.run_log):
                yield scope
        finally:
            _SCOPE.reset(token)


@dataclass(frozen=True)
class Scope:
    """The context (and the role, if any) that code running inside :func:`scope` sees."""

    context: Context
    role: str | None = None


_SCOPE: ContextVar[Scope | None] = ContextVar("rolecast_scope", default=None)
_DEFAULT: Context | None = None
_DEFAULT_LOCK = threading.Lock()


def default_context() -> Context:
    """The process-wide context used outside any team."""
    global _DEFAULT
    if _DEFAULT is None:
        with _DEFAULT_LOCK:
            if _DEFAULT is None:
                _DEFAULT = Context(cost_manager=default_cost_manager())
    return _DEFAULT


def current_scope() -> Scope:
    """The scope of the running task, or the default context's."""
    return _SCOPE.get() or Scope(default_context(), None)


def current_context() -> Context:
    """The context of the running task (the process-wide default outside any team)."""
    scope = _SCOPE.get()
    return scope.context if scope is not None else default_context()


def LLM(llm_config: ProviderConfig | None = None, context: Context | None = None) -> BaseLLM:
    """MetaGPT's ``LLM()``: the configured default model (of ``context``, else of the running team's
    or the process's context), or a model made from ``llm_config``. It has MetaGPT's calls:
    ``aask(msg, system_msgs=, stream=)``, ``aask_batch``, ``acompletion``, ``acompletion_text`` and
    the synchronous ``completion``."""
    if llm_config is not None and not isinstance(llm_config, (AutoConfig, LocalConfig, OpenAIConfig, PluginConfig)):
        raise UsageError(f"LLM(llm_config=...) takes a model's configuration (LLMConfig(...) or "
                         f"config.llm), not {type(llm_config).__name__}")
    ctx = context if context is not None else current_context()
    if llm_config is not None:
        return ctx.llm_with_cost_manager_from_llm_config(llm_config)
    return ctx.llm()


def __getattr__(name: str) -> Config:
    """``config``: the configuration of the process's default context, read on first use
    (MetaGPT's global ``metagpt.config2.config``); ``config.workspace.path``, ``config.llm``."""
    if name == "config":
        return default_context().config
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["LLM", "AttrDict", "Context", "Scope", "current_context", "current_scope", "default_context"]
