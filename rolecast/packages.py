"""``rolecast.actions``, ``rolecast.roles``, ``rolecast.environment`` and ``rolecast.memory``:
the top-level packages under rolecast's own name, and a clear error when another package of
the same name shadows one of them.

The framework's packages are top-level (``from actions import Action``, as MetaGPT scripts
import them). A project with its own ``actions/`` folder on ``sys.path`` before rolecast's
would hide rolecast's: ``from rolecast.actions import Action`` (and ``import roles``) then
raise a :class:`~rolecast.errors.ConfigError` naming the other package's path, rather than a
puzzling ImportError deep inside the framework.

The aliases are the same module objects (``rolecast.actions is actions``), submodules too
(``rolecast.actions.structured is actions.structured``): no class exists twice.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from .errors import ConfigError

#: the top-level packages rolecast ships, each also importable as ``rolecast.<name>``
PACKAGES = ("actions", "roles", "environment", "memory")

_HOME = Path(__file__).resolve().parent.parent  # the folder holding rolecast/ and its sibling packages


def own_package(name: str) -> ModuleType:
    """Import rolecast's top-level package ``name`` (``"actions"`` …); a :class:`ConfigError`
    naming the path when a package of that name from elsewhere shadows it."""
    module = importlib.import_module(name)
    check_package(name, module)
    return module


def check_package(name: str, module: ModuleType) -> None:
    """A :class:`ConfigError` when ``module`` is not rolecast's package ``name``."""
    file = getattr(module, "__file__", None)
    where = Path(file).resolve().parent if file else None
    if where is None or where != _HOME / name:
        shown = where or ", ".join(str(p) for p in getattr(module, "__path__", [])) or "(no file)"
        raise ConfigError(
            f"the package {name!r} imported from {shown} is not rolecast's ({_HOME / name}): a folder or "
            f"package named {name!r} earlier on sys.path shadows it (rolecast's packages "
            f"import each other by these names). Rename that folder, or run from another directory"
        )


class _AliasLoader(importlib.abc.Loader):
    """Puts the real module in ``sys.modules`` under the alias (the import system returns that)."""

    def __init__(self, real: str) -> None:
        self.real = real

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        top = self.real.partition(".")[0]
        package = own_package(top)
        sys.modules[module.__name__] = package if self.real == top else importlib.import_module(self.real)


class _AliasFinder(importlib.abc.MetaPathFinder):
    """Finds ``rolecast.actions`` (and ``rolecast.actions.…``) as ``actions`` (…), for each of
    :data:`PACKAGES`."""

    def find_spec(
        self, fullname: str, path: object = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        for name in PACKAGES:
            alias = f"rolecast.{name}"
            if fullname == alias or fullname.startswith(alias + "."):
                return importlib.util.spec_from_loader(fullname, _AliasLoader(name + fullname[len(alias):]))
        return None


def install() -> None:
    """Make ``rolecast.actions`` … importable (done once, when rolecast is imported)."""
    if not any(isinstance(finder, _AliasFinder) for finder in sys.meta_path):
        sys.meta_path.append(_AliasFinder())


__all__ = ["PACKAGES", "check_package", "install", "own_package"]
