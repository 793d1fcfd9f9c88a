"""Anthropic's Messages API (Claude): :mod:`.provider` (``AnthropicLLM``, the SDK glue) and
:mod:`.wire` (messages and tools as the API wants them). ``AnthropicLLM`` is exported lazily:
nothing here imports the ``anthropic`` SDK."""

from typing import TYPE_CHECKING

from ...core.lazy import lazy_exports

if TYPE_CHECKING:
    from .provider import AnthropicLLM

__all__ = ["AnthropicLLM"]

__getattr__, __dir__ = lazy_exports(__name__, globals(), {"AnthropicLLM": ".provider"})
