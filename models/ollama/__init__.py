"""Ollama's wire format (its native ``/api`` endpoints): request bodies and the OpenAI request
each asks for, the JSON-lines answer writer, error bodies and model listings. Plain Python and
pydantic: no server here."""

from .catalog import CatalogEntry, running, show, tags
from .schemas import (
    OllamaChatBody,
    OllamaEmbedBody,
    OllamaGenerateBody,
    OllamaShowBody,
    model_name,
    tag_name,
)
from .writer import MEDIA_TYPE, Endpoint, NdjsonWriter, error_body, loaded

__all__ = [
    "MEDIA_TYPE",
    "CatalogEntry",
    "Endpoint",
    "NdjsonWriter",
    "OllamaChatBody",
    "OllamaEmbedBody",
    "OllamaGenerateBody",
    "OllamaShowBody",
    "error_body",
    "loaded",
    "model_name",
    "running",
    "show",
    "tag_name",
    "tags",
]
