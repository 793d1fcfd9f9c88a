"""rolecast's top-level packages (``actions``, ``roles``, ``environment``, ``memory``): found where rolecast
is installed, or a clear error; and their ``rolecast.*`` aliases.

MetaGPT's imports (``from actions import Action``) make the four packages top-level names. A project with a
folder of its own named ``actions`` (or ``memory`` …) first on ``sys.path`` would hide rolecast's, and the
first import of it would fail deep inside rolecast with an ImportError about a missing name.
:func:`check_packages` names the folder that hides rolecast's instead (:class:`~rolecast.errors.ShadowedPackage`).
``rolecast.actions``, ``rolecast.roles``, ``rolecast.environment`` and ``rolecast.memory`` are the same
modules under rolecast's own name (with their submodules: ``rolecast.actions.coding`` is ``actions.coding``).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from ..errors import ShadowedPackage

#: rolecast's top-level packages
TOP_LEVEL = ("actions", "roles", "environment", "memory")
#: where rolecast's top-level packages are installed: beside the rolecast package
HOME = Path(__file__).resolve().parent.parent.parent


def check_packages(*names: str) -> None:
    """A :class:`ShadowedPackage` naming the folder when one of ``names`` would be imported from somewhere
    other than beside rolecast (a project's own ``actions/`` folder first on ``sys.path``)."""
    for name in names:
        module = sys.modules.get(name)
        origin = getattr(module, "__file__", None) if module is not None else None
        if module is None:
            spec = importlib.util.find_spec(name)
            origin = spec.origin if spec is not None else None
        if origin is None:
            continue
        found = Path(origin).resolve().parent
        if found != HOME / name:
            raise ShadowedPackage(
                f"the package {name!r} is imported from {found}, not rolecast's ({HOME / name}): a folder or module "
                f"named {name!r} of your project comes first on sys.path and hides rolecast's {name!r}. "
                f"Rename yours (e.g. my_{name}); rolecast needs its own under that name")


class _AliasFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """``rolecast.<package>[.<sub>]`` → the module ``<package>[.<sub>]`` itself (one module, two names)."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        parts = fullname.split(".")
        if len(parts) < 2 or parts[0] != "rolecast" or parts[1] not in TOP_LEVEL:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        check_packages(spec.name.split(".")[1])
        return importlib.import_module(spec.name.split(".", 1)[1])

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the module was imported under its own name."""


def install_aliases() -> None:
    """Make ``rolecast.actions`` (and the others) importable as aliases; idempotent."""
    if not any(isinstance(finder, _AliasFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _AliasFinder())


__all__ = ["TOP_LEVEL", "check_packages", "install_aliases"]
