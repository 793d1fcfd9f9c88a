"""The embedded local model: :mod:`.provider` (``LocalLLM``) and the modules only it uses
(:mod:`.engine`).

``LocalLLM`` is exported here lazily: importing a helper of the package does not load
the provider (nor, through it, the error mapping that imports the helpers).
"""

from typing import TYPE_CHECKING

from ...core.lazy import lazy_exports

if TYPE_CHECKING:
    from .provider import LocalLLM

__all__ = ["LocalLLM"]

__getattr__, __dir__ = lazy_exports(__name__, globals(), {"LocalLLM": ".provider"})
