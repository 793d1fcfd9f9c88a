"""Ollama: :mod:`.provider` (``OllamaLLM``, over Ollama's OpenAI-compatible ``/v1``), exported lazily."""

from typing import TYPE_CHECKING

from ...core.lazy import lazy_exports

if TYPE_CHECKING:
    from .provider import OllamaLLM

__all__ = ["OllamaLLM"]

__getattr__, __dir__ = lazy_exports(__name__, globals(), {"OllamaLLM": ".provider"})
