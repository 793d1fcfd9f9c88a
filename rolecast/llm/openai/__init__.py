"""The OpenAI-compatible provider: :mod:`.provider` (``OpenAILLM``, the client glue) and
:mod:`.wire` (request and answer shapes on the wire).

``OpenAILLM`` is exported here lazily: importing a helper of the package does not load
the provider (nor, through it, the error mapping that imports the helpers).
"""

from typing import TYPE_CHECKING

from ...core.lazy import lazy_exports

if TYPE_CHECKING:
    from .provider import OpenAILLM

__all__ = ["OpenAILLM"]

__getattr__, __dir__ = lazy_exports(__name__, globals(), {"OpenAILLM": ".provider"})
