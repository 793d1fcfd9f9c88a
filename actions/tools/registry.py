"""FunctionRegistry: the plugins and loose tools a loop or planner may call, found by name."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from rolecast.errors import ToolError

from .function import KernelFunction, Plugin, Tool


@dataclass
class FunctionRegistry:
    """Plugins and loose tools, found by ``Plugin.Function``, ``Plugin-Function`` or bare name."""

    plugins: dict[str, Plugin] = field(default_factory=dict)
    loose: dict[str, KernelFunction] = field(default_factory=dict)

    @classmethod
    def of(cls, *items: Any) -> FunctionRegistry:
        """A registry from plugins, tools, plugin objects, or lists of those."""
        registry = cls()
        for item in items:
            registry.add(item)
        return registry

    def add(self, item: Any, name: str | None = None) -> None:
        if isinstance(item, FunctionRegistry):
            self.plugins.update(item.plugins)
            self.loose.update(item.loose)
        elif isinstance(item, Plugin):
            self.plugins[name or item.name] = item
        elif isinstance(item, KernelFunction):
            if item.plugin_name:
                self.plugins.setdefault(item.plugin_name, Plugin(item.plugin_name)).add(item)
            else:
                self.loose[item.name] = item
        elif isinstance(item, (list, tuple)):
            for sub in item:
                self.add(sub)
        elif callable(item) and not isinstance(item, type):
            self.add(Tool.from_function(item))
        else:
            self.plugins[name or type(item).__name__] = Plugin.from_object(item, name)

    add_plugin = add

    def functions(self) -> list[KernelFunction]:
        out = list(self.loose.values())
        for plugin in self.plugins.values():
            out.extend(plugin)
        return out

    def __iter__(self) -> Iterator[KernelFunction]:
        return iter(self.functions())

    def __len__(self) -> int:
        return len(self.loose) + sum(len(p) for p in self.plugins.values())

    def find(self, name: str) -> KernelFunction | None:
        """The function called ``name``: its full name ``Plugin.Fn``, its wire name ``Plugin-Fn``,
        ``Plugin_Fn``, or a unique bare ``Fn``."""
        name = name.strip().strip("`'\"")
        if name in self.loose:
            return self.loose[name]
        for sep in (".", "-"):
            if sep in name:
                plugin_name, _, fn_name = name.partition(sep)
                plugin = self.plugins.get(plugin_name)
                if plugin is not None and fn_name in plugin:
                    return plugin[fn_name]
        matches = [f for f in self.functions() if f.name == name or f.full_name.replace(".", "_") == name]
        return matches[0] if len(matches) == 1 else None

    def get(self, name: str) -> KernelFunction:
        """Like :meth:`find`, but an unknown name raises :class:`ToolError` listing the known ones."""
        found = self.find(name)
        if found is None:
            known = ", ".join(f.full_name for f in self.functions()) or "none"
            raise ToolError(f"unknown function {name!r}; available: {known}")
        return found

    def resolve(self, name: str) -> KernelFunction | None:
        """Find a function by the name a model wrote: as :meth:`find`, then without quotes,
        brackets or ``()``, then case- and punctuation-insensitively (``python_repl`` finds
        ``Python REPL``). None when no single function matches."""
        found = self.find(name)
        if found is not None:
            return found
        cleaned = name.strip().strip("[]`'\" ").removesuffix("()").strip()
        found = self.find(cleaned) if cleaned else None
        if found is not None:
            return found
        key = _folded(cleaned)
        matches = [f for f in self if key and key in (_folded(f.full_name), _folded(f.name))]
        return matches[0] if len(matches) == 1 else None

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.find(name) is not None


def _folded(name: str) -> str:
    return re.sub(r"[^0-9a-z]", "", name.lower())




__all__ = ["FunctionRegistry"]
