"""Google's Gemini API: :mod:`.provider` (``GeminiLLM``, the ``google-genai`` glue) and :mod:`.wire`
(contents, function declarations, usage). ``GeminiLLM`` is exported lazily: nothing here imports the SDK."""

from typing import TYPE_CHECKING

from ...core.lazy import lazy_exports

if TYPE_CHECKING:
    from .provider import GeminiLLM

__all__ = ["GeminiLLM"]

__getattr__, __dir__ = lazy_exports(__name__, globals(), {"GeminiLLM": ".provider"})
