"""llama.cpp's server's own completion API (``POST /completion``): the request body and the
OpenAI text completion it asks for, and the answer writer. Plain Python and pydantic."""

from .schemas import LlamaCompletionBody
from .writer import LlamaCppWriter

__all__ = ["LlamaCompletionBody", "LlamaCppWriter"]
