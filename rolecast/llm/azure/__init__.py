"""Azure OpenAI: :mod:`.provider` (``AzureOpenAILLM``, the ``openai`` SDK's Azure client), exported lazily."""

from typing import TYPE_CHECKING

from ...core.lazy import lazy_exports

if TYPE_CHECKING:
    from .provider import AzureOpenAILLM

__all__ = ["AzureOpenAILLM"]

__getattr__, __dir__ = lazy_exports(__name__, globals(), {"AzureOpenAILLM": ".provider"})
